"""benchmarks/gpu.sh: valid bash, refuses a machine without a GPU, and its dry run goes through
the GPU benchmark and the table on the CPU (the figures themselves are a GPU run's business)."""

from __future__ import annotations

import json
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


def test_goals_dry_run_measures_both_modes_and_renders_the_goals(tmp_path, tiny_model_dir):
    """gpu.sh --goals (issue 57) on the CPU: bench_gpu.py --shape default --smoke runs both modes,
    eager and the CUDA path, and the table carries every row and goal (figures mean nothing)."""
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("gpu.sh runs .venv/bin/python; create it with scripts/setup.sh")
    env = {**os.environ, "GPU_SH_OUT": str(tmp_path / "out"), "INSTEMB_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        ["bash", str(SCRIPT), "--goals", "--dry-run"], capture_output=True, text=True, env=env, timeout=900
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert any("(dry run, not run)" in line and "scripts/setup.sh" in line for line in done.stdout.splitlines())
    result = json.loads((tmp_path / "out" / "goals_default.json").read_text())
    assert result["benchmark"] == "gpu_shape" and result["dry_run"] and set(result["modes"]) == {"eager", "cuda_graphs"}
    for mode in result["modes"].values():
        assert {"query", "queries_64", "documents", "profile", "first_query_ms"} <= set(mode)
    assert len(result["goals"]) == 4 and not any(goal["met"] for goal in result["goals"])  # a dry run meets none
    table = (tmp_path / "out" / "goals_table.md").read_text()
    assert "| default (DRY RUN, CPU) | one query p50 / p99 ms" in table and table.count("goal: ") == 4
    assert "GPU kernel ms / wall ms per query" in table


def test_goals_options_are_checked():
    for args, message in [
        (["--kit", "x"], "--kit goes with --goals"),
        (["--goals", "--only", "gpu"], "--goals takes"),
        (["--goals", "--kit"], "--kit needs a value"),
    ]:
        done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


def test_goal_verdicts_read_the_cuda_path_and_the_table_shows_eager_beside_it():
    import bench_gpu_shapes

    def mode(p50, rate, fraction):
        return {
            "first_query_ms": 900.0,
            "query": {"p50_ms": p50, "p99_ms": p50 * 1.4},
            "queries_64": {"ms": 64 / rate * 1000, "queries_per_s": rate},
            "documents": {"best": "x", "tokens_per_s": 1e5, "fraction_of_measured_peak": fraction},
            "profile": {"queries": 10, "gpu_kernel_ms_per_query": 1.2, "wall_ms_per_query": 1.9,
                        "kernels_per_query": 940, "launch_calls_per_query": 1},
        }  # fmt: skip

    result = {
        "shape": "default",
        "dry_run": False,
        "query_tokens": 44,
        "documents": {"source": "SciFact", "mean_tokens": 325},
        "matmul_peak": {"dtype": "bf16", "peak_gflops": 754_000},
        "modes": {
            "eager": mode(19.5, 655, 0.07),
            "cuda_graphs": {**mode(1.8, 25_000, 0.15), "capture_seconds": {"1x64": 0.2}},
        },
    }
    goals = {goal["goal"]: goal["met"] for goal in bench_gpu_shapes.goals_of(result)}
    assert goals == {
        "one query p50 <= 2 ms": True,
        "one query p99 <= 3 ms": True,
        "64 queries >= 20,000 queries/s": True,
        "documents >= 0.20 of the measured matmul peak": False,
    }
    result["goals"] = bench_gpu_shapes.goals_of(result)
    table = bench_gpu_shapes.table([result])
    assert "| default | one query p50 / p99 ms (44 tokens) | 19.50 / 27.30 | 1.80 / 2.52 |" in table
    assert "1x64: 0.20" in table and "**not met**" in table and "**met**" in table
    # --inductor adds a third column, and each goal says whether that mode meets it
    result["modes"]["cuda_graphs_inductor"] = mode(1.1, 40_000, 0.21)
    result["goals"] = bench_gpu_shapes.goals_of(result)
    assert all(goal["met_with_inductor"] for goal in result["goals"])
    table = bench_gpu_shapes.table([result])
    assert "CUDA path + inductor |" in table.splitlines()[0]
    assert "| default | one query p50 / p99 ms (44 tokens) | 19.50 / 27.30 | 1.80 / 2.52 | 1.10 / 1.54 |" in table
