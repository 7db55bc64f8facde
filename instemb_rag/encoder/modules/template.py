"""The prompt template: text first, then the instruction, then L look-ahead slots.

Text first lets several instructions share the text's key/value prefix. Each piece is
tokenized on its own and the ids are joined, so where the text ends never depends on how
the tokenizer would merge characters across a boundary. Truncation shortens the text only:
the instruction and the look-ahead slots always survive.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ...errors import InstEmbError

LOOKAHEAD_SLOT = -1  # placeholder id, replaced by a look-ahead vector in inputs_embeds


@dataclass(frozen=True)
class PromptTemplate:
    prefix: str = ""
    instruction_prefix: str = "\nInstruction: "
    suffix: str = "\n"
    add_bos: bool = False

    @classmethod
    def for_tokenizer(cls, tokenizer) -> PromptTemplate:
        """ChatML-style pieces for chat models that use <|im_start|>, plain pieces otherwise."""
        chat = getattr(tokenizer, "chat_template", None) or ""
        bos_added = bool(tokenizer("a").input_ids[:1]) and (
            tokenizer("a").input_ids != tokenizer("a", add_special_tokens=False).input_ids
        )
        if "<|im_start|>" in chat:
            return cls(
                prefix="<|im_start|>user\n",
                instruction_prefix="\n\nInstruction: ",
                suffix="<|im_end|>\n<|im_start|>assistant\n",
                add_bos=bos_added,
            )
        return cls(add_bos=bos_added)

    def piece_ids(self, tokenizer, piece: str) -> list[int]:
        return tokenizer(piece, add_special_tokens=False).input_ids if piece else []

    def build_ids(
        self,
        tokenizer,
        text: str,
        instruction: str | None,
        lookahead_length: int,
        max_length: int,
        text_ids: list[int] | None = None,
    ) -> list[int]:
        """Token ids of one input, with ``lookahead_length`` LOOKAHEAD_SLOT ids at the end."""
        head = [tokenizer.bos_token_id] if self.add_bos and tokenizer.bos_token_id is not None else []
        head += self.piece_ids(tokenizer, self.prefix)
        tail: list[int] = []
        if instruction:
            tail += self.piece_ids(tokenizer, self.instruction_prefix)
            tail += self.piece_ids(tokenizer, instruction)
        tail += self.piece_ids(tokenizer, self.suffix)
        if text_ids is None:
            text_ids = self.piece_ids(tokenizer, text)
        budget = _text_budget(len(head) + len(tail), lookahead_length, max_length)
        return head + text_ids[:budget] + tail + [LOOKAHEAD_SLOT] * lookahead_length

    def build_ids_batch(
        self,
        tokenizer,
        texts: list[str],
        instructions: list[str | None],
        lookahead_length: int,
        max_length: int,
    ) -> list[list[int]]:
        """``build_ids`` of every (text, instruction) pair, the ids equal, with one tokenizer call for
        the texts and one for the distinct instructions (the CUDA batch path: no per-query call)."""
        pieces = {
            piece: self.piece_ids(tokenizer, piece) for piece in (self.prefix, self.instruction_prefix, self.suffix)
        }
        head = [tokenizer.bos_token_id] if self.add_bos and tokenizer.bos_token_id is not None else []
        head += pieces[self.prefix]
        distinct = list(dict.fromkeys(instruction for instruction in instructions if instruction))
        tokenized = tokenizer(distinct, add_special_tokens=False).input_ids if distinct else []
        tails = {None: pieces[self.suffix]}
        for instruction, ids in zip(distinct, tokenized):
            tails[instruction] = pieces[self.instruction_prefix] + ids + pieces[self.suffix]
        text_ids = tokenizer(list(texts), add_special_tokens=False).input_ids if texts else []
        slots = [LOOKAHEAD_SLOT] * lookahead_length
        built = []
        for ids, instruction in zip(text_ids, instructions):
            tail = tails[instruction or None]
            budget = _text_budget(len(head) + len(tail), lookahead_length, max_length)
            built.append(head + ids[:budget] + tail + slots)
        return built

    def get_config_dict(self) -> dict:
        return asdict(self)

    def save(self, folder: Path) -> None:
        (Path(folder) / "template.json").write_text(json.dumps(self.get_config_dict(), indent=2))

    @classmethod
    def load(cls, folder: Path) -> PromptTemplate:
        return cls(**json.loads((Path(folder) / "template.json").read_text()))


def _text_budget(template_tokens: int, lookahead_length: int, max_length: int) -> int:
    """Tokens left for the text; none left is refused."""
    budget = max_length - template_tokens - lookahead_length
    if budget < 1:
        raise InstEmbError(
            f"The instruction and template take {template_tokens} tokens plus "
            f"{lookahead_length} look-ahead tokens, leaving no room for the text within "
            f"max_length={max_length}. Shorten the instruction or raise max_length."
        )
    return budget
