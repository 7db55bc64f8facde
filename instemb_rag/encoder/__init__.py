"""The encoder: a decoder LLM + look-ahead tokens + pooling, and everything that builds one.

    model.py       InstEmbEncoder (from_pretrained, encode_queries / encode_documents, save);
                   shipped_llm_checkpoint (the shipped LLM, whichever layout the default has)
    checkpoint.py  the checkpoint format: its one reader (returns parts) and one writer
    backbone.py    the base model: the shipped GGUF converted once, any HF folder, fingerprints
    protocol.py    Encoder, LocalEncoder, ForwardEncoder: what code outside encoder/ may call
    settings.py    EncoderSettings (pooling, inference L, max_length, precision)
    quantize.py    precision="int8" (quantize_plan.py: which layers; cpu_flags.py: which kernel)
    device.py      where and in which dtype it runs
    modules/       the saved parts (template, look-ahead, pooling, projection, LoRA) and the forward pass
    fast/          faster paths to the same embeddings (shared prefix, torch.compile)

``InstEmbEncoder``, ``load_checkpoint`` and ``shipped_llm_checkpoint`` are imported lazily, so
that the light modules here (checkpoint.py's format, settings) can be read without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import InstEmbEncoder, load_checkpoint, shipped_llm_checkpoint

__all__ = ["InstEmbEncoder", "load_checkpoint", "shipped_llm_checkpoint"]


def __getattr__(name: str):
    if name in __all__:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module 'instemb_rag.encoder' has no attribute {name!r}")
