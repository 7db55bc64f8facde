"""One text under many instructions: run the text once, reuse its key/value cache.

The template puts the text first (head + text + instruction + suffix + look-ahead slots), so
every instruction's input starts with the same head + text ids. That shared prefix is run
once with ``use_cache=True``; its cache is repeated to K rows and only the K short suffixes
(instruction, template suffix, look-ahead slots) are run, right-padded, in one batch.

The result equals ``encoder.encode_queries([text] * K, instructions)`` up to float rounding:
position ids continue from the prefix length and the same Pooling reads the suffix mask.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from ...errors import InstEmbError
from ...instructions import normalize_instruction


def common_prefix_length(id_lists: Sequence[list[int]]) -> int:
    """Number of leading ids that every list shares."""
    shortest = min(len(ids) for ids in id_lists)
    for position in range(shortest):
        token = id_lists[0][position]
        if any(ids[position] != token for ids in id_lists[1:]):
            return position
    return shortest


def shared_prefix_length(id_lists: Sequence[list[int]], lookahead_length: int) -> int:
    """How many leading ids can be run once for all rows.

    Each suffix must keep its last input token (the DAAP anchor before the look-ahead slots)
    so that pooling reads it from the suffix pass; hence the cap at shortest - L - 1.
    """
    cap = min(len(ids) for ids in id_lists) - lookahead_length - 1
    return max(0, min(common_prefix_length(id_lists), cap))


def _normalise_instructions(instructions: Sequence[str | None]) -> list[str | None]:
    if isinstance(instructions, str):
        raise InstEmbError(
            "encode_instructions takes a list of instructions (one embedding per instruction); "
            "wrap a single instruction in a list."
        )
    return [normalize_instruction(item) for item in instructions]


@torch.inference_mode()
def encode_instructions(
    encoder,
    text: str,
    instructions: Sequence[str | None],
    batch_size: int = 32,
    normalise: bool = True,
) -> np.ndarray:
    """L2-normalised float32 embeddings [K, d] of ``text`` under each of K instructions
    (``normalise=False``: before the normalisation, as ``encoder.encode_unnormalised``)."""
    if not isinstance(text, str):
        raise InstEmbError(f"The text is {type(text).__name__}, not a string.")
    instructions = _normalise_instructions(instructions)
    if not instructions:
        return np.zeros((0, encoder.dimension), dtype=np.float32)
    lookahead_length = encoder.lookahead_length
    # Plain ids per instruction carry build_ids' truncation (the text is cut so the
    # instruction fits); the prefix actually shared is measured on them, not assumed.
    id_lists = [encoder.build_ids(text, instruction) for instruction in instructions]
    prefix_length = shared_prefix_length(id_lists, lookahead_length)
    if len(instructions) == 1 or prefix_length == 0:
        return encoder.encode_unnormalised(
            [text] * len(instructions), instructions, batch_size=max(batch_size, 1), normalise=normalise
        )
    prefix_ids = id_lists[0][:prefix_length]
    cache = run_prefix(encoder, prefix_ids)
    if not cache_is_plain(cache):
        return encoder.encode_unnormalised(
            [text] * len(instructions), instructions, batch_size=max(batch_size, 1), normalise=normalise
        )
    output = np.zeros((len(instructions), encoder.dimension), dtype=np.float32)
    for start in range(0, len(id_lists), batch_size):
        suffixes = [ids[prefix_length:] for ids in id_lists[start : start + batch_size]]
        pooled = pool_suffixes(encoder, cache, prefix_length, suffixes, normalise)
        output[start : start + len(suffixes)] = pooled.cpu().numpy()
    return output


def run_prefix(encoder, prefix_ids: list[int]) -> DynamicCache:
    """Key/value cache of the prefix, one row."""
    cache = DynamicCache(config=encoder.model.config)
    batch = {
        "input_ids": torch.tensor([prefix_ids], dtype=torch.long),
        "attention_mask": torch.ones(1, len(prefix_ids), dtype=torch.long),
        "position_ids": torch.arange(len(prefix_ids))[None, :],
    }
    encoder.states(batch, cache=cache)
    return cache


def repeat_cache(cache: DynamicCache, rows: int) -> DynamicCache:
    """A K-row view of a one-row cache; the original stays one row for the next batch.

    ``expand`` copies nothing: each layer's first update concatenates the suffix onto it.
    """
    return DynamicCache(
        ddp_cache_data=[
            (layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1)) for layer in cache.layers
        ]
    )


def cache_is_plain(cache: DynamicCache) -> bool:
    """Only full-attention layers can be shared this way (sliding windows crop the prefix)."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def pool_suffixes(
    encoder, cache: DynamicCache, prefix_length: int, suffixes: list[list[int]], normalise: bool = True
) -> torch.Tensor:
    """Run right-padded suffixes after the cached prefix; pooled (and normalised) [K, d]."""
    batch = encoder.collate(suffixes, padding_side="right")
    rows, width = batch["attention_mask"].shape
    # Positions go on from the prefix (padding included: nothing valid attends to it).
    batch["position_ids"] = prefix_length + torch.arange(width).expand(rows, -1)
    states = encoder.states(batch, cache=repeat_cache(cache, rows))
    pooled = encoder.embed_states(states).float()
    return torch.nn.functional.normalize(pooled, dim=-1) if normalise else pooled
