"""benchmarks/run.py collects every benchmark script and renders each one's figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# Documented as stand-alone in benchmarks/README.md (or not a benchmark at all).
# bench_gpu_shapes.py: a module of bench_gpu.py (its --shape runs), run through it
NOT_IN_THE_TABLE = {"bench_common.py", "bench_qdrant_embedded.py", "bench_gpu_shapes.py"}


def load_run():
    spec = importlib.util.spec_from_file_location("benchmarks_run", BENCHMARKS / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_script_is_run():
    run = load_run()
    scripts = {path.name for path in BENCHMARKS.glob("bench_*.py")} - NOT_IN_THE_TABLE
    assert scripts == set(run.SCRIPTS.values())
    assert set(run.SCRIPTS) == set(run.RENDERERS)


def test_ray_rows_render_a_saved_result():
    run = load_run()
    rows = run.rows_for("ray", json.loads((BENCHMARKS / "ray_local.json").read_text()))
    assert len(rows) == 3 and not any("unreadable" in value for _, value, _, _ in rows), rows
    assert rows[0][1] == "0.37 / 0.89 / 0.09 chunks/s"
    assert rows[2][1] == "323 chunks/s"
    assert run.rows_for("ray", {"skipped": "ray is not installed"}) == [
        ("ray", "skipped: ray is not installed", "", "")
    ]
