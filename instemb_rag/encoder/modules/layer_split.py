"""The decoder stack run in two parts: the frozen lower layers, then the trainable top K.

With the look-ahead vectors and every layer below ``N - K`` frozen, causal attention makes the
hidden states entering layer ``N - K`` a fixed function of the input ids. The trainer's
frozen-prefix cache (training/prefix_cache.py) computes them once per input with
``states_below``; each training step then runs only ``run_top`` on them. Both halves follow
the model's own forward (causal mask from the attention mask, rotary embeddings from the
position ids, each decoder layer, the final norm), and a test checks that the two halves
together give ``run_backbone``'s states.

Decoder stacks shaped like Llama's (``embed_tokens``, ``layers``, ``norm``, ``rotary_emb``:
Llama, SmolLM, Qwen2, Mistral) are supported; another architecture gets a clear error.
"""

from __future__ import annotations

import inspect

import torch

from ...errors import InstEmbError
from .forward import embed_inputs


def decoder_stack(model):
    """The bare decoder (``model.base_model`` through any peft wrapper)."""
    stack = model.base_model
    while not hasattr(stack, "layers") and hasattr(stack, "model"):
        stack = stack.model
    missing = [name for name in ("layers", "norm", "rotary_emb") if not hasattr(stack, name)]
    if missing:
        raise InstEmbError(
            f"{type(stack).__name__} has no {', '.join(missing)}: the frozen-prefix cache supports Llama-style "
            "decoders only. Train without it (model.frozen_prefix: false)."
        )
    return stack


def _causal_mask(stack, hidden: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor):
    from transformers.masking_utils import create_causal_mask

    # transformers renamed past_key_values to cache; pass whichever this version takes.
    cache_argument = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
    return create_causal_mask(
        config=stack.config,
        inputs_embeds=hidden,
        attention_mask=attention_mask,
        position_ids=position_ids,
        **{cache_argument: None},
    )


def run_layers(
    model, hidden: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, first: int, last: int
) -> torch.Tensor:
    """Decoder layers ``first`` .. ``last - 1`` on ``hidden`` [B, T, d] (no final norm)."""
    stack = decoder_stack(model)
    mask = _causal_mask(stack, hidden, attention_mask, position_ids)
    position_embeddings = stack.rotary_emb(hidden, position_ids=position_ids)
    for layer in stack.layers[first:last]:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=position_embeddings, position_ids=position_ids)
        if isinstance(hidden, tuple):  # older transformers return (hidden, ...) from a layer
            hidden = hidden[0]
    return hidden


def layer_count(model) -> int:
    return len(decoder_stack(model).layers)


@torch.no_grad()
def states_below(model, lookahead_vectors: torch.Tensor, batch: dict[str, torch.Tensor], split: int) -> torch.Tensor:
    """Hidden states entering layer ``split`` [B, T, d] of a collated batch (no gradient: frozen)."""
    device = lookahead_vectors.device
    batch = {key: value.to(device) for key, value in batch.items()}
    embeds = embed_inputs(model, lookahead_vectors, batch["input_ids"])
    return run_layers(model, embeds, batch["attention_mask"], batch["position_ids"], 0, split)


def run_top(
    model, hidden: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, split: int
) -> torch.Tensor:
    """Final-layer states (after the final norm) from the states entering layer ``split``."""
    stack = decoder_stack(model)
    top = run_layers(model, hidden, attention_mask, position_ids, split, len(stack.layers))
    return stack.norm(top)
