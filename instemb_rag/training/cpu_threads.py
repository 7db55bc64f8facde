"""Torch's CPU thread count for training: one thread per physical core this process may use.

Hyper-threads share a core's vector units, so more threads than physical cores mostly adds
contention to the matrix products; fewer leaves cores idle. A user who set OMP_NUM_THREADS
has chosen already, and is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (hyper-thread siblings count once)."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cores: set[tuple[str, str]] = set()
    try:
        processor = physical = None
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = (part.strip() for part in line.partition(":"))
            if name == "processor":
                processor, physical = int(value), "0"
            elif name == "physical id":
                physical = value
            elif name == "core id" and processor in allowed:
                cores.add((physical or "0", value))
    except (OSError, ValueError):
        cores = set()
    return max(1, min(len(cores), len(allowed)) if cores else len(allowed))


def set_training_threads(device_type: str) -> int | None:
    """Set torch's intra-op threads for a CPU run; returns the count set, or None when left alone
    (a CUDA run, or OMP_NUM_THREADS given)."""
    import torch

    if device_type != "cpu" or os.environ.get("OMP_NUM_THREADS"):
        return None
    threads = physical_cores()
    torch.set_num_threads(threads)
    return threads
