"""One text under many instructions: the text once, every instruction's suffix in the same pass.

The template puts the text first (head + text + instruction + suffix + look-ahead slots), so
every instruction's input starts with the same head + text ids. That shared prefix and the K
suffixes (instruction, template suffix, look-ahead slots) are packed into one row and run in one
forward pass: each suffix attends to the prefix and to itself (a block mask), its positions go on
from the prefix's, and the same Pooling reads each suffix. The result equals
``encoder.encode_queries([text] * K, instructions)`` up to float rounding (about 1e-6).

On a CPU a forward pass costs a fixed part (every weight read once: about a third of a short
query's pass for SmolLM2-135M) plus a part per token, so one pass of prefix + K suffixes beats a
prefix pass followed by a pass over K padded suffixes (the key/value-cache way this module took
before issue 60: 1.9x a plain query for the instruction-effect default's two suffixes, 1.35x
packed). More than ``batch_size`` suffixes go in several packed passes, each with the prefix.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ...errors import InstEmbError
from ...instructions import normalize_instruction
from ..modules.forward import States, embed_inputs, run_embedded


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
    so that pooling reads it from the suffix's own states; hence the cap at shortest - L - 1.
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
    # Plain ids per instruction carry build_ids' truncation (the text is cut so the
    # instruction fits); the prefix actually shared is measured on them, not assumed.
    id_lists = [encoder.build_ids(text, instruction) for instruction in instructions]
    prefix_length = shared_prefix_length(id_lists, encoder.lookahead_length)
    if len(instructions) == 1 or prefix_length == 0 or not attention_is_full(encoder.model.config):
        return encoder.encode_unnormalised(
            [text] * len(instructions), instructions, batch_size=max(batch_size, 1), normalise=normalise
        )
    prefix = id_lists[0][:prefix_length]
    output = np.zeros((len(instructions), encoder.dimension), dtype=np.float32)
    step = max(batch_size, 1)
    for start in range(0, len(id_lists), step):
        suffixes = [ids[prefix_length:] for ids in id_lists[start : start + step]]
        pooled = encoder.embed_states(suffix_states(encoder, prefix, suffixes)).float()
        if normalise:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        output[start : start + len(suffixes)] = pooled.cpu().numpy()
    return output


def attention_is_full(config) -> bool:
    """Whether every layer attends as the packed row's mask says: a sliding-window layer would
    apply its own window over the packed positions, so such models take the plain path."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def packed_row(prefix: list[int], suffixes: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(position ids [T], attention [T, T]) of ``prefix + suffix_1 + ... + suffix_K`` in one row.

    A token attends to the tokens before it in its own segment and to the whole prefix before
    it; positions go on from the prefix in every suffix, as in the suffix's own full input."""
    lengths = [len(prefix), *(len(ids) for ids in suffixes)]
    segment = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    positions = torch.cat([torch.arange(lengths[0])] + [lengths[0] + torch.arange(n) for n in lengths[1:]])
    order = torch.arange(len(segment))
    earlier = order[None, :] <= order[:, None]
    readable = (segment[None, :] == 0) | (segment[None, :] == segment[:, None])
    return positions, earlier & readable


def suffix_states(encoder, prefix: list[int], suffixes: list[list[int]]) -> States:
    """Final-layer states of each suffix after ``prefix`` [K, longest suffix, d], right-padded,
    from one forward pass of the packed row."""
    model, vectors = encoder.model, encoder.lookahead.vectors
    device = vectors.device
    # Each segment is embedded alone: its look-ahead slots take vectors 0..L-1, as in its own input.
    embeds = torch.cat(
        [embed_inputs(model, vectors, torch.tensor([ids], device=device)) for ids in (prefix, *suffixes)], dim=1
    )
    positions, attention = packed_row(prefix, suffixes)
    hidden = run_embedded(
        model,
        embeds,
        torch.ones(1, len(positions), dtype=torch.long, device=device),
        positions[None].to(device),
        attention=attention[None, None].to(device),
    ).hidden[0]
    width = max(len(ids) for ids in suffixes)
    states = hidden.new_zeros((len(suffixes), width, hidden.shape[-1]))
    mask = torch.zeros((len(suffixes), width), dtype=torch.long, device=device)
    start = len(prefix)
    for row, ids in enumerate(suffixes):
        states[row, : len(ids)] = hidden[start : start + len(ids)]
        mask[row, : len(ids)] = 1
        start += len(ids)
    return States(states, mask)
