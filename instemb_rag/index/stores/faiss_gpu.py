"""FAISS on a GPU: what the CUDA search path uses, importable (and answering False) everywhere.

The encoder's device choices are in encoder/device.py. FAISS GPU support comes
from the optional extras ``instemb-rag[gpu]`` (faiss-gpu, CUDA 12) or ``[gpu-cu13]``
(faiss-gpu-cuvs, CUDA 13); a CPU faiss build lacks StandardGpuResources and reports 0 GPUs.
"""

from __future__ import annotations

from functools import cache

from ...errors import InstEmbError

GPU_EXTRA_HINT = 'pip install "instemb-rag[gpu]" (CUDA 12) or "instemb-rag[gpu-cu13]" (CUDA 13)'


def faiss_gpu_available() -> bool:
    """True only when faiss was built with GPU support and sees at least one GPU."""
    try:
        import faiss
    except ImportError:
        return False
    if not hasattr(faiss, "StandardGpuResources") or not hasattr(faiss, "index_cpu_to_gpu"):
        return False
    get_num_gpus = getattr(faiss, "get_num_gpus", None)
    try:
        return bool(get_num_gpus and get_num_gpus() > 0)
    except RuntimeError:  # a GPU build on a machine whose driver is missing
        return False


@cache
def _gpu_resources(device: int):
    import faiss

    # One StandardGpuResources per GPU: it owns scratch memory and streams, and is costly
    # to build, so every index moved to that GPU shares it.
    return faiss.StandardGpuResources()


def to_gpu_index(index, device: int = 0, use_float16: bool = False):
    """Copy a CPU faiss index to GPU ``device``; raise with the install hint when impossible.

    Keep the CPU index for saving: faiss writes GPU indexes only after index_gpu_to_cpu.
    """
    if not faiss_gpu_available():
        raise InstEmbError(
            "FAISS on GPU was asked for, but the installed faiss has no GPU support or sees no GPU. "
            f"Install it with: {GPU_EXTRA_HINT}; or leave the index on the CPU."
        )
    import faiss

    options = faiss.GpuClonerOptions()
    options.useFloat16 = use_float16
    return faiss.index_cpu_to_gpu(_gpu_resources(device), device, index, options)


def maybe_to_gpu_index(index, device: int = 0):
    """The GPU copy when faiss GPU support is present, else the index unchanged."""
    return to_gpu_index(index, device) if faiss_gpu_available() else index


def to_cpu_index(index):
    """A CPU copy of a GPU index (for faiss.write_index); a CPU index is returned as is."""
    import faiss

    if hasattr(faiss, "index_gpu_to_cpu") and type(index).__name__.startswith("Gpu"):
        return faiss.index_gpu_to_cpu(index)
    return index
