"""The encoder: a decoder LLM + look-ahead tokens + pooling, and everything that builds one.

    model.py       InstEmbEncoder: the symmetric encoder and every model's LLM part
                   (from_pretrained, encode_queries / encode_documents, save)
    load.py        load_model: every model reference resolved (any folder layout, concat:,
                   pasted:, the default); shipped_llm_folder; the untrained arrangements
    references.py  the references resolved, handed the LLM class (no import of model.py back)
    combine.py     the math of combining spaces (routes, losses and eval call it)
    composed/      the encoder of parts: parts, routes, the folder format, the one converter
    llm_folder.py  the LLM folder's format (a symmetric model, or a composed folder's LLM part): its
                   one reader and one writer (checkpoint.py: its old path, an alias)
    backbone.py    the base model: the shipped GGUF converted once, any HF folder, fingerprints
    protocol.py    Encoder, LocalEncoder, ForwardEncoder: what code outside encoder/ may call
    settings.py    EncoderSettings (pooling, inference L, max_length, precision)
    quantize.py    precision="int8" (quantize_plan.py: which layers; cpu_flags.py: which kernel)
    device.py      where and in which dtype it runs
    modules/       the saved parts (template, look-ahead, pooling, projection, LoRA) and the forward pass
    fast/          faster paths to the same embeddings (shared prefix, torch.compile)

``InstEmbEncoder``, ``load_llm_folder``, ``load_model`` and ``shipped_llm_folder`` are imported lazily, so
that the light modules here (llm_folder.py's format, settings) can be read without loading torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .load import load_checkpoint, load_llm_folder, load_model
    from .model import InstEmbEncoder, shipped_llm_checkpoint, shipped_llm_folder

# load_checkpoint, shipped_llm_checkpoint: aliases kept for compatibility (issue 68 names round 2)
__all__ = [
    "InstEmbEncoder",
    "load_checkpoint",
    "load_llm_folder",
    "load_model",
    "shipped_llm_checkpoint",
    "shipped_llm_folder",
]
HOMES = {
    "InstEmbEncoder": "model",
    "load_checkpoint": "load",
    "load_llm_folder": "load",
    "load_model": "load",
    "shipped_llm_checkpoint": "model",
    "shipped_llm_folder": "model",
}


def __getattr__(name: str):
    if name in HOMES:
        from importlib import import_module

        return getattr(import_module(f".{HOMES[name]}", __name__), name)
    raise AttributeError(f"module 'instemb_rag.encoder' has no attribute {name!r}")
