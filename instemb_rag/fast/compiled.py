"""Opt-in ``torch.compile`` of the backbone, with the compiled code cached under INSTEMB_HOME.

    encoder = InstEmbEncoder.from_pretrained()
    compile_encoder(encoder)            # or --compile on index / query / eval

TorchInductor fuses the small element-wise kernels of a Llama block (rotary embedding,
RMSNorm, SwiGLU) that eager PyTorch runs one by one. The first compile costs minutes on a
small CPU; its FX-graph cache (generated C++/Triton and the built libraries) is pointed at

    $INSTEMB_HOME/compile/torch-<version>-<device>-<dtype>[-int8]/<encoder fingerprint>/

so a second process with the same model, torch, device and dtype loads the compiled code
instead of building it. ``dynamic=True`` makes one graph serve every batch and sequence
length, so no shape buckets are needed (and no inputs are padded: the embeddings are those
of the eager path up to float rounding).

Compilation does not change what an embedding is, so it is not part of the fingerprint.
It is opt-in: see benchmarks/README.md for what it cost and gained where it was measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..paths import instemb_home

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def compile_cache_dir(encoder) -> Path:
    """Where this encoder's compiled graphs live: one folder per (torch, device, dtype, fingerprint)."""
    dtype = str(encoder.model.dtype).replace("torch.", "")
    precision = getattr(encoder, "precision", "fp32")
    version = torch.__version__.replace("+", "_")
    kind = f"torch-{version}-{encoder.device.type}-{dtype}" + ("" if precision == "fp32" else f"-{precision}")
    return instemb_home() / "compile" / kind / encoder.fingerprint


def compile_encoder(encoder, dynamic: bool = True) -> Path:
    """Compile the encoder's backbone forward in place (lazily: the first call pays); return the cache folder.

    The inductor cache location is process-wide (an environment variable torch reads at each
    compile), so the folder of the encoder compiled last is the one in use.
    """
    folder = compile_cache_dir(encoder)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[CACHE_ENV] = str(folder)
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True  # on by default; the point here, so made explicit
    encoder.model.base_model.compile(dynamic=dynamic)
    return folder


def is_compiled(encoder) -> bool:
    return getattr(encoder.model.base_model, "_compiled_call_impl", None) is not None
