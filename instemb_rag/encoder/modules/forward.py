"""The one forward pass of an InstEmb model: the path every embedding and training loss runs.

Token embeddings get the look-ahead vectors written into their LOOKAHEAD_SLOT positions (they
never enter the vocabulary), the decoder stack runs on those ``inputs_embeds``, and the
final-layer states (after the final norm) come back with the rows' attention mask. The
encoder, the trainer, the shared-prefix path and the evaluation's shared forward all call
``run_backbone`` (through ``InstEmbEncoder.states``), so they cannot drift apart.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cache as memoize

import torch
import torch.nn.functional as F

from .template import LOOKAHEAD_SLOT


@dataclass
class States:
    hidden: torch.Tensor  # [B, T, d] final-layer states of the rows' own positions
    attention_mask: torch.Tensor  # [B, T] the rows' mask (cached prefix positions not included)


def embed_inputs(model, lookahead_vectors: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Token embeddings with the look-ahead vectors written into the LOOKAHEAD_SLOT positions."""
    slots = input_ids == LOOKAHEAD_SLOT
    embeds = model.get_input_embeddings()(input_ids.clamp(min=0))
    if slots.any():
        per_row = int(slots[0].sum())
        vectors = lookahead_vectors[:per_row].to(embeds.dtype)
        embeds = embeds.masked_scatter(
            slots[..., None], vectors.expand(input_ids.shape[0], -1, -1).reshape(-1, embeds.shape[-1])
        )
    return embeds


def run_backbone(
    model, lookahead_vectors: torch.Tensor, batch: dict[str, torch.Tensor], *, cache=None, embed_dropout: float = 0.0
) -> States:
    """Final-layer states of a collated batch (``input_ids``, ``attention_mask``, ``position_ids``).

    ``cache``: a key/value cache of a prefix every row continues; the rows' ``position_ids`` must
    then continue from it, and the cache grows by the rows.
    ``embed_dropout``: dropout on the input embeddings (the trainer's second SimCSE-style view;
    Llama has no dropout layers of its own).
    """
    device = lookahead_vectors.device
    batch = {key: value.to(device) for key, value in batch.items()}
    embeds = embed_inputs(model, lookahead_vectors, batch["input_ids"])
    if embed_dropout > 0:
        embeds = F.dropout(embeds, p=embed_dropout, training=True)
    return run_embedded(model, embeds, batch["attention_mask"], batch["position_ids"], cache=cache)


def run_embedded(
    model,
    embeds: torch.Tensor,
    mask: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    cache=None,
    attention: torch.Tensor | None = None,
) -> States:
    """The decoder stack on input embeddings [B, T, d] (``run_backbone``'s second half).

    ``attention``: a prepared boolean mask [B, 1, T, T] (True: may attend) in place of the causal
    mask of ``mask``: rows that pack several sequences (fast/shared_prefix.py: a prefix and the
    suffixes that continue it, each attending to the prefix and to itself). transformers takes a
    4D mask as it is."""
    full_mask = mask
    if cache is not None and cache.get_seq_length() > 0:
        prefix = torch.ones(mask.shape[0], cache.get_seq_length(), dtype=mask.dtype, device=mask.device)
        full_mask = torch.cat([prefix, mask], dim=1)
    elif cache is None and attention is None and causal_suffices(mask):
        # Issue 69: with right padding the causal pattern alone gives every valid position its
        # states (``causal_mask``), so the rows are handed over unpadded as far as the mask goes:
        # transformers then builds no [B, 1, T, T] mask and calls SDPA with is_causal=True, whose
        # CPU kernel skips the key blocks above the diagonal instead of computing them and masking
        # them (about half the attention work). Only the padded positions' states change, and no
        # reader takes those: pooling, the trainer's targets and losses index valid positions by
        # ``mask``, which States keeps.
        full_mask = torch.ones_like(mask)
    cache_argument = {cache_keyword(type(model.base_model)): cache} if cache is not None else {}
    outputs = model.base_model(
        inputs_embeds=embeds,
        attention_mask=full_mask if attention is None else attention,
        position_ids=position_ids,
        use_cache=cache is not None,
        **cache_argument,
    )
    return States(outputs.last_hidden_state, mask)


def embed_inputs_static(model, lookahead_vectors: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """``embed_inputs`` without a host read (the CUDA graph path, fast/cuda_graphs.py): the k-th
    LOOKAHEAD_SLOT of a row gets vector k (what ``masked_scatter`` gives), chosen by a gather and a
    ``where`` over shapes known in advance, so nothing waits on the device's values."""
    embeds = model.get_input_embeddings()(input_ids.clamp(min=0))
    count = lookahead_vectors.shape[0]
    if count == 0:
        return embeds
    slots = input_ids == LOOKAHEAD_SLOT
    index = (slots.long().cumsum(dim=1) - 1).clamp(min=0, max=count - 1)
    vectors = lookahead_vectors.to(embeds.dtype)[index]  # [B, T, d]
    return torch.where(slots[..., None], vectors, embeds)


def causal_suffices(mask: torch.Tensor) -> bool:
    """Whether the causal pattern alone gives ``mask``'s valid positions their states: right-padded
    rows (each row's valid positions one run from position 0) with some padding, on the CPU (the
    test reads the mask on the host, which a GPU would wait for; the CUDA path takes
    ``causal_mask`` anyway). Rows without padding need nothing: transformers skips their mask itself."""
    if mask.device.type != "cpu" or mask.dim() != 2 or mask.shape[1] < 2 or bool(mask.all()):
        return False
    valid = mask.bool()
    return bool(valid[:, 0].all()) and not bool((valid[:, 1:] & ~valid[:, :-1]).any())


def causal_mask(width: int, device: torch.device) -> torch.Tensor:
    """The [1, 1, T, T] causal mask (True: attend) every right-padded row can share.

    With right padding a valid position j attends keys 0..j, all of them valid, so the causal
    pattern alone gives the valid positions the states the padding-aware mask gives. transformers
    takes a 4D mask as it is: none of its mask building runs (that reads the 2D mask's values on the
    host, which a CUDA graph cannot capture)."""
    return torch.ones(width, width, dtype=torch.bool, device=device).tril()[None, None]


def run_backbone_static(
    model, lookahead_vectors: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Final-layer states [B, T, d] of right-padded rows (ids already on the device) under ``mask``
    (``causal_mask``): no host read, no tensor made on the CPU, no shape read back. Positions are
    0..T-1, those of the valid tokens of a right-padded row."""
    embeds = embed_inputs_static(model, lookahead_vectors, input_ids)
    return model.base_model(inputs_embeds=embeds, attention_mask=mask, use_cache=False).last_hidden_state


@memoize
def cache_keyword(model_class: type) -> str:
    """The keyword the decoder's forward takes its key/value cache under.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes in
    5.40); releases before 5.24 take only ``past_key_values`` and would swallow ``cache`` into
    their ``**kwargs`` unused, so the name is read from the signature, not assumed.
    """
    parameters = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


# Issue 69: padded positions per forward pass on a CPU (forward_runs says why).
CPU_TOKENS_PER_FORWARD = 1024


def forward_runs(rows: list[int], id_lists, device: torch.device):
    """The rows of one batch (longest first) as the forward passes that run them: one on a GPU;
    on a CPU, runs of at most CPU_TOKENS_PER_FORWARD padded positions (at least one row each).

    Issue 69: on a CPU the decoder's time goes into products over the batch's positions, and
    a forward of a few hundred rows' worth of tokens keeps each layer's activations (the
    MLP's [positions, intermediate] products: 6 MiB at 1,024 positions of the default model,
    24 MiB at 16 chunks of 256) in the cache between the product that writes them and the
    one that reads them. Measured on a 2-core EPYC (benchmarks/README.md, issue 69): 16
    length-sorted prose chunks ran at 0.69 of the fp32 matmul peak in one forward and at
    0.80 in forwards of 4; the padding is less too (each run pads to its own longest row).
    Every row's vector is its own either way (right padding, one causal pass per row)."""
    if device.type != "cpu":
        yield rows
        return
    run: list[int] = []
    for row in rows:
        if run and (len(run) + 1) * len(id_lists[run[0]]) > CPU_TOKENS_PER_FORWARD:
            yield run
            run = []
        run.append(row)
    if run:
        yield run
