"""benchmarks/gpu.sh: valid bash, refuses a machine without a GPU, and its dry run goes through
the GPU benchmark and the table on the CPU (the figures themselves are a GPU run's business)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import GPU_BENCH_RESULT

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None and torch.cuda.is_available(), reason="a GPU is here")
def test_without_a_gpu_it_stops_and_says_so(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 3 and "no CUDA GPU here" in done.stderr and "--dry-run" in done.stderr


def test_dry_run_shows_the_gpu_steps_and_renders_the_table(tmp_path, tiny_model_dir):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("gpu.sh runs .venv/bin/python; create it with scripts/setup.sh")
    env = {
        **os.environ,
        "INSTEMB_BENCH_MODEL": str(tiny_model_dir),
        "GPU_SH_OUT": str(tmp_path / "out"),
        "INSTEMB_HOME": str(tmp_path / "home"),
    }
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    shown = [line for line in done.stdout.splitlines() if "(dry run, not run)" in line]
    assert any("scripts/setup.sh" in line for line in shown)
    assert any("pytest" in line and "tests/test_cuda_path.py" in line for line in shown)
    assert any("benchmarks/run.py --device cuda" in line for line in shown)
    table = (tmp_path / "out" / "gpu_table.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| DRY RUN")]
    assert len(rows) == 3, table
    assert "p50" in rows[0] and "p99" in rows[0]
    assert "tokens/s" in rows[1] and "matmul peak" in rows[1]
    assert "FAISS exact search" in rows[2] and "queries/s on the CPU" in rows[2]


def test_gpu_rows_report_the_datasheet_peak_and_faiss_gpu():
    import bench_gpu
    import run

    assert bench_gpu.datasheet_peak("NVIDIA H100 PCIe")[0] == "H100 PCIe"
    assert bench_gpu.datasheet_peak("NVIDIA H100 80GB HBM3") == ("H100", 989_000.0)
    assert bench_gpu.datasheet_peak("Some Future GPU") == (None, None)
    latency, docs, faiss = run.gpu_rows(GPU_BENCH_RESULT)
    assert "p50 6.1 ms, p99 9.5 ms" in latency[1]
    assert "0.081 of the H100 datasheet bf16 peak (989 TFLOP/s)" in docs[1]
    assert "90,000 queries/s on the GPU" in faiss[1] and "100.0x" in faiss[1]
    assert "gpu" not in [name for name in run.SCRIPTS if name not in run.GPU_ONLY]
