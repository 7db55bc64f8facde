"""Opt-in ``torch.compile`` of the backbone, with the compiled code cached under INSTEMB_HOME.

    encoder = InstEmbEncoder.from_pretrained()
    compile_encoder(encoder)            # or --compile on index / query / eval

TorchInductor fuses the small element-wise kernels of a Llama block (rotary embedding,
RMSNorm, SwiGLU) that eager PyTorch runs one by one. The decoder blocks are compiled one by one
(regional compilation: one traced graph serves all of them), so the first process pays ~15 s on
a 2-core CPU and later ones ~3 s; its FX-graph cache (generated C++/Triton and the built
libraries) is pointed at

    $INSTEMB_HOME/compile/torch-<version>-<device>-<dtype>[-int8]/<encoder fingerprint>/

so a second process with the same model, torch, device and dtype loads the compiled code
instead of building it. ``dynamic=True`` makes one graph serve every batch of two or more and
every sequence length (torch specializes a batch of one, a single query, into a second graph,
cached the same way), so no shape buckets are needed (and no inputs are padded: the embeddings
are those of the eager path up to float rounding).

Compilation does not change what an embedding is, so it is not part of the fingerprint.
It is opt-in: see benchmarks/README.md for what it cost and gained where it was measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ...choices import Precision
from ...paths import instemb_home

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def llm_parts(encoder) -> list:
    """The LLMs an encoder runs: itself, or an encoder of parts' (composed/: a two-space default)
    documents' and query LLMs, once each (the same one where no query LLM of its own)."""
    found = [getattr(encoder, name, None) for name in ("documents_llm", "query_llm")]
    parts = []
    for part in found:
        if part is not None and all(part is not seen for seen in parts):
            parts.append(part)
    return parts or [encoder]


def compile_cache_dir(encoder) -> Path:
    """Where this encoder's compiled graphs live: one folder per (torch, device, dtype, fingerprint)."""
    dtype = str(llm_parts(encoder)[0].model.dtype).replace("torch.", "")
    precision = getattr(encoder, "precision", Precision.fp32.value)
    version = torch.__version__.replace("+", "_")
    kind = f"torch-{version}-{encoder.device.type}-{dtype}" + (
        "" if precision == Precision.fp32.value else f"-{precision}"
    )
    return instemb_home() / "compile" / kind / encoder.fingerprint


def repeated_blocks(backbone: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The decoder's stack of identical blocks (``layers`` in Llama, Mistral, Qwen; found by shape elsewhere)."""
    layers = getattr(backbone, "layers", None)
    if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
        return layers
    count = getattr(getattr(backbone, "config", None), "num_hidden_layers", None)
    for module in backbone.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count and len({type(m) for m in module}) == 1:
            return module
    return None


def compile_encoder(encoder, dynamic: bool = True) -> Path:
    """Compile the encoder's decoder blocks in place (lazily: the first call pays); return the cache folder.
    An encoder of parts (a two-space model) has each of its LLMs compiled so.

    Regional compilation: every decoder block runs the same code, so compiling the blocks one by
    one lets Dynamo trace one block and reuse its graph for the other 29, where compiling the
    whole backbone traces all 30 every process. Measured on the 2-core box (benchmarks/README.md):
    the first batch of a process took 93 s cold / 35-40 s with a warm cache for the whole backbone,
    16.5 s / 5 s per block, at the same speed afterwards. A backbone without a recognisable block
    stack is compiled whole.

    On CUDA the encoder takes the CUDA-graph path (its shape buckets are captured on first use),
    whatever INSTEMB_CUDA_FAST or INSTEMB_CUDA_GRAPHS say, and nothing is compiled unless
    INSTEMB_CUDA_INDUCTOR=1 (then the graphs capture the compiled blocks).

    The inductor cache location is process-wide (an environment variable torch reads at each
    compile), so the folder of the encoder compiled last is the one in use.
    """
    folder = compile_cache_dir(encoder)
    folder.mkdir(parents=True, exist_ok=True)
    if encoder.device.type == "cuda":
        # On a GPU the forward is launch-bound, and per-block inductor code with dynamic shapes ran
        # at half eager's speed (issue 57): --compile takes the CUDA-graph path instead, one
        # launch per forward of a captured shape bucket (fast/cuda_graphs.py). With
        # INSTEMB_CUDA_INDUCTOR=1 the blocks are compiled as well and the graphs capture inductor's
        # fused kernels (unmeasured: bench_gpu.py --shape NAME --inductor measures it).
        from .batch_plan import set_cuda_options

        for llm in llm_parts(encoder):
            set_cuda_options(llm, enabled=True, graphs=True)
        if os.environ.get("INSTEMB_CUDA_INDUCTOR") != "1":
            return folder
    os.environ[CACHE_ENV] = str(folder)
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True  # on by default; the point here, so made explicit
    for module in (module for llm in llm_parts(encoder) for module in _compiled_modules(llm)):
        module.compile(dynamic=dynamic)
    return folder


def _compiled_modules(llm) -> list[torch.nn.Module]:
    blocks = repeated_blocks(llm.model.base_model)
    return list(blocks) if blocks is not None else [llm.model.base_model]


def is_compiled(encoder) -> bool:
    modules = [module for llm in llm_parts(encoder) for module in _compiled_modules(llm)]
    return all(getattr(m, "_compiled_call_impl", None) is not None for m in modules)
