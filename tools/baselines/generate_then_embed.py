"""The two-stage baseline InstEmb replaces: generate an answer, then embed the answer.

The same decoder first writes a short answer to (text, instruction) by greedy decoding,
then the encoder embeds that answer with no instruction. The cost is a prefill plus one
decoding step per generated token plus a second prefill; InstEmb pays one prefill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from instemb_rag.instructions import per_item_instructions


@dataclass
class GenerateThenEmbedArgs:
    max_new_tokens: int = 32  # answer length; the paper's comparison decodes a short answer
    batch_size: int = 8


class GenerateThenEmbed:
    """Embeds LLM-generated answers; shares the encoder's backbone, tokenizer and template."""

    def __init__(self, encoder, args: GenerateThenEmbedArgs | None = None):
        self.encoder = encoder
        self.args = args or GenerateThenEmbedArgs()

    def prompt_ids(self, text: str, instruction: str | None) -> list[int]:
        """The encoder's template without look-ahead slots: it ends where the answer starts."""
        return self.encoder.build_ids(text, instruction, lookahead_length=0)

    @torch.inference_mode()
    def generate_answers(self, texts: Sequence[str], instructions=None) -> list[str]:
        per_item = per_item_instructions(instructions, len(texts))
        answers: list[str] = []
        tokenizer = self.encoder.tokenizer
        for start in range(0, len(texts), self.args.batch_size):
            prompts = [
                self.prompt_ids(text, instruction)
                for text, instruction in zip(
                    texts[start : start + self.args.batch_size], per_item[start : start + self.args.batch_size]
                )
            ]
            # Left padding so that every row's new tokens start at the same column.
            batch = self.encoder.collate(prompts, padding_side="left")
            batch = {key: value.to(self.encoder.device) for key, value in batch.items()}
            generated = self.encoder.model.generate(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                max_new_tokens=self.args.max_new_tokens,
                min_new_tokens=self.args.max_new_tokens,  # fixed length: a fair, stable cost
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )
            new_tokens = generated[:, batch["input_ids"].shape[1] :]
            answers += tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return answers

    def encode(self, texts: Sequence[str], instructions=None) -> np.ndarray:
        """L2-normalised [N, d] embeddings of the generated answers."""
        texts = list(texts)
        answers = self.generate_answers(texts, instructions)
        return self.encoder.encode_documents(answers, instruction=None, batch_size=self.args.batch_size)
