"""What every benchmark script shares: the machine label, timing, the matmul peak, JSON out.

Convention for benchmarks/*.py (so that benchmarks/run.py can collect them): each script has
``main(argv: list[str] | None = None) -> dict``, accepts ``--quick``, ``--smoke`` and
``--json-out PATH``, and returns (and writes, when asked) a JSON-serialisable dict.

``--smoke`` runs the script's real code path in seconds on the tiny random Llama of
tests/testing.py (``smoke_run``) and a handful of inputs, and writes the same JSON: its figures
mean nothing, its shape is what tests/test_benchmarks_smoke.py checks against run.py's table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

PROJECT_ROOT = Path(__file__).resolve().parents[1]

if str(PROJECT_ROOT) not in sys.path:  # run as `python benchmarks/x.py` from a checkout
    sys.path.insert(0, str(PROJECT_ROOT))

from instemb_rag.paths import data_root  # noqa: E402  (after the path fix above)

SHARED_DATA = data_root()  # $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and inputs (a rough figure)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds: the real code path on the tiny random model of tests/testing.py (unless --model) and a "
        "handful of inputs, caches in a scratch INSTEMB_HOME; the figures mean nothing",
    )
    parser.add_argument("--json-out", type=Path, default=None, help="also write the result dict here as JSON")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    return parser


def benchmarked_llm_folder(model: str | None) -> str:
    """The LLM folder (or Hugging Face folder) of the symmetric LLM a benchmark of the LLM itself
    loads (FLOPs, look-ahead, shared prefix, int8, generation): ``--model`` as given, the documents'
    LLM of a two-space folder, or (None) the shipped LLM, whichever layout the default has
    (``shipped_llm_folder``)."""
    from instemb_rag.encoder import shipped_llm_folder
    from instemb_rag.encoder.composed import llm_folder_of

    return str(llm_folder_of(model) if model else shipped_llm_folder())


llm_checkpoint = benchmarked_llm_folder  # alias kept for compatibility (issue 68 names round 2)


# --smoke: torch threads unless --threads says otherwise. A tiny model gains nothing from more,
# and on a busy machine idle OpenMP threads spinning for a core cost seconds a step.
SMOKE_THREADS = 1


@contextlib.contextmanager
def smoke_run(args, layers: int = 2) -> Iterator[Path | None]:
    """With ``--smoke``: a scratch folder holding the tiny random Llama of tests/testing.py (the
    tests' own, built in a second without a download; not built when ``--model`` names one) and
    ``$INSTEMB_HOME`` (so that caches the script fills stay out of the user's), removed at the
    end; ``args.model`` is pointed at the model and ``args.threads`` defaults to SMOKE_THREADS
    (enter it before apply_threads). Yields the scratch folder, or None without ``--smoke``."""
    if not getattr(args, "smoke", False):
        yield None
        return
    if not getattr(args, "threads", None):
        args.threads = SMOKE_THREADS
    saved = {name: os.environ.get(name) for name in ("INSTEMB_HOME", "OMP_NUM_THREADS")}
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as folder:
        scratch = Path(folder)
        os.environ["INSTEMB_HOME"] = str(scratch / "home")
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # processes the script starts (servers)
        try:
            if getattr(args, "model", None) is None:
                args.model = str(tiny_model(scratch / "tiny_model", layers))
            yield scratch
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def tiny_model(folder: Path, layers: int = 2) -> Path:
    """tests/testing.py's tiny random Llama with its word-level tokenizer, saved in ``folder``."""
    tests = str(PROJECT_ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from testing import build_tiny_model_folder

    return build_tiny_model_folder(folder, layers=layers)


def tiny_sentence_encoder(folder: Path) -> Path:
    """tests/testing.py's tiny sentence-transformers folder (1-layer BERT, 32-d), saved in ``folder``."""
    tests = str(PROJECT_ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from testing import build_tiny_sentence_encoder_folder

    folder.mkdir(parents=True, exist_ok=True)
    return build_tiny_sentence_encoder_folder(folder)


def apply_threads(threads: int | None) -> int:
    import torch

    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: str = "cpu") -> dict:
    import torch
    import transformers

    info = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "device": device,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def time_once(fn: Callable[[], object], device: str = "cpu") -> float:
    synchronize(device)
    started = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - started


def interleaved_times(
    fns: dict[str, Callable[[], object]], repeats: int, device: str = "cpu"
) -> dict[str, list[float]]:
    """Time several variants in alternation so that load from other processes on a shared
    machine hits them alike; ratios of the medians are then fair even when absolutes drift."""
    for fn in fns.values():  # warm-up: allocator, thread pool, lazy kernels
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(time_once(fn, device))
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def matmul_peak_gflops(device: str = "cpu", quick: bool = False, dtype=None, sizes=None) -> dict:
    """Best fp32 (or ``dtype``) GEMM rate over a few sizes: the machine's reachable peak."""
    import torch

    dtype = dtype or torch.float32
    if sizes is None:
        sizes = (512, 1024, 2048) if quick else (512, 1024, 2048, 3072)
        if device.startswith("cuda"):  # a GPU reaches its peak only on larger products
            sizes += (4096, 8192)
    results = {}
    for size in sizes:
        left = torch.randn(size, size, device=device, dtype=dtype)
        right = torch.randn(size, size, device=device, dtype=dtype)
        flops = 2 * size**3
        repeats = max(3, int((1e9 if quick else 4e9) / flops))
        best = min(time_once(lambda a=left, b=right: torch.matmul(a, b), device) for _ in range(repeats))
        results[str(size)] = flops / best / 1e9
    return {"peak_gflops": max(results.values()), "by_size_gflops": results}


PROBE_SIZE = 1024
PROBE_REPEATS = 4


def gemm_probe(device: str = "cpu", size: int = PROBE_SIZE):
    """(callable, flops): a short fp32 GEMM burst to time next to each model run, so that the
    fraction of peak compares the model with the matmul rate available at that moment."""
    import torch

    left = torch.randn(size, size, device=device)
    right = torch.randn(size, size, device=device)

    def run():
        for _ in range(PROBE_REPEATS):
            torch.matmul(left, right)

    return run, PROBE_REPEATS * 2 * size**3


def emit(result: dict, json_out: Path | None) -> dict:
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(text)
    return result
