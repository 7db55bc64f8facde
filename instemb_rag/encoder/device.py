"""Where and in which dtype the encoder runs: CUDA when present (bf16), else the CPU (float32).

The backbone loads with PyTorch SDPA attention; ``attention_implementation`` reports the kernel a
loaded model runs, for the CUDA checks.
"""

from __future__ import annotations

import torch

__all__ = ["attention_implementation", "default_dtype", "resolve_device"]


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' means CUDA when present, else CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (tensor cores, half the memory); fp32 on CPU, where bf16 is slower."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def attention_implementation(model) -> str | None:
    """The attention kernel the loaded backbone runs ('sdpa' is expected)."""
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None)
