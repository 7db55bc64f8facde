"""Every benchmark script runs its own code path in smoke mode and writes the JSON that
benchmarks/run.py renders (issue 51).

``--smoke`` (bench_common.smoke_run): the tiny random Llama of tests/testing.py, a handful of
inputs (../shared/data where present, made-up texts where not), one thread, caches in a scratch
INSTEMB_HOME, seconds a script. Each script runs as `run.py` runs it, in its own process
(run.run_script), and its JSON must render into the table's rows without a failed, missing,
skipped or unreadable row: a rename anywhere below a script (the one ``BatchOrder`` that
bench_training.py kept calling ``micro_batch`` on) fails here, not in a documented command.
The GPU script runs its CPU-testable part, the dry run of `gpu.sh --dry-run`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
STAND_ALONE = {"bench_qdrant_embedded.py"}  # not in run.py's table (benchmarks/README.md)
TIMEOUT_S = 300
NOT_RENDERED = ("failed", "missing", "skipped", "unreadable")


def load_run():
    spec = importlib.util.spec_from_file_location("benchmarks_run_smoke", BENCHMARKS / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = load_run()


def smoke(name: str) -> tuple[dict, list[tuple]]:
    """The script's --smoke JSON, as run.py collects it, and the table rows run.py renders from it."""
    started = time.perf_counter()
    result = RUN.run_script(name, quick=False, device="cpu", timeout_s=TIMEOUT_S, smoke=True)
    print(f"{name}: --smoke took {time.perf_counter() - started:.1f} s")
    rows = RUN.rows_for(name, result)
    broken = [value for _, value, _, _ in rows if value.startswith(NOT_RENDERED)]
    assert not broken, (name, broken)
    assert result["smoke"] is True
    return result, rows


def figures(rows: list[tuple]) -> list[str]:
    return [figure for figure, _, _, _ in rows]


def test_every_script_has_a_smoke_run_here():
    # bench_gpu_shapes.py is a module of bench_gpu.py (its --shape runs), smoked through it
    scripts = {path.name for path in BENCHMARKS.glob("bench_*.py")} - {"bench_common.py", "bench_gpu_shapes.py"}
    assert scripts == set(RUN.SCRIPTS.values()) | STAND_ALONE
    covered = {name for name in RUN.SCRIPTS if f"test_{name}_smoke" in globals()}
    assert covered == set(RUN.SCRIPTS), set(RUN.SCRIPTS) - covered


def test_encoder_smoke():
    result, rows = smoke("encoder")
    assert len(rows) == 9, figures(rows)  # latency, throughput, 2 x peak fraction, 2 x DAAP, 3 x int8
    assert result["int8_vs_fp32"]["documents"] == 4


def test_multi_instruction_smoke():
    result, rows = smoke("multi_instruction")
    assert len(rows) == 4 and result["k"] == 8


def test_generate_baseline_smoke():
    result, rows = smoke("generate_baseline")
    assert len(rows) == 1 and result["new_tokens"] == 4


def test_index_smoke():
    result, rows = smoke("index")
    # indexing, the four latencies (FAISS exact and HNSW, Qdrant, encoding alone), HNSW recall
    assert len(rows) == 6, figures(rows)
    assert result["corpus"]["documents"] == 8 and result["corpus"]["chunks"] >= 8


def test_hybrid_smoke():
    result, rows = smoke("hybrid")
    assert len(rows) == 3 and set(result["fused_over_dense_p50"]) == {"hybrid_rrf", "hybrid_z"}


def test_reader_smoke():
    result, rows = smoke("reader")
    assert set(result["by_depth"]) == {"k3", "k5"} and all(row["p50_s"] > 0 for row in result["by_depth"].values())
    assert len(rows) == 2


def test_training_smoke():
    result, rows = smoke("training")
    modes = ["full", "llm_target_cache", "lookahead_frozen", "prefix_k1", "prefix_k2", "all", "query_tower"]
    assert list(result["results"]) == modes and result["skipped_modes"] == {}
    for mode in modes:  # examples/s of each mode and its ratio to the full pass
        assert result["results"][mode]["examples_per_s"] > 0 and result["speedup_over_full"][mode] > 0
    assert result["speedup_over_full"]["full"] == 1.0
    assert len(rows) == len(modes) + 1  # + the caches' sizes
    goal = [row for row in rows if row[2]]
    assert len(goal) == 1 and goal[0][2] == ">= 5x the full pass" and "frozen prefix K=1 + LLM-target" in goal[0][0]
    assert "query-tower step (instruction + query only)" in figures(rows)[modes.index("query_tower")]


def test_serve_smoke():
    result, rows = smoke("serve")
    assert len(rows) == 2  # 1 and 2 clients, batching and --no-batching each
    assert all(level["requests"] > 0 for mode in result["modes"].values() for level in mode["levels"].values())


def test_cli_smoke():
    result, rows = smoke("cli")
    assert result["identical_answers"] is True  # the three paths agree, on any model
    assert [row[2] for row in rows][:2] == ["p50 <= 0.30 s", "<= 5 s"]
    assert result["warm"]["runs"] == 2 and result["cold_resident"]["runs"] == 1
    # The client's own CPU beside each wall time: measured (a process spends some), never more than
    # its cores could spend in its wall time; the --no-daemon client loads the model, the warm one does not.
    cores = result["cores"] or 1
    for path in ("warm", "cold_resident", "cold_no_daemon"):
        timing = result[path]
        assert len(timing["client_cpu_all_s"]) == timing["runs"]
        assert all(0 < cpu <= wall * cores + 0.05 for cpu, wall in zip(timing["client_cpu_all_s"], timing["all_s"]))
    assert result["warm"]["client_cpu_p50_s"] < result["cold_no_daemon"]["client_cpu_p50_s"]
    assert any("client process's own CPU" in figure for figure in figures(rows))


@pytest.mark.ray
def test_ray_smoke():
    try:
        import ray  # noqa: F401
    except ImportError:
        result = RUN.run_script("ray", quick=False, device="cpu", timeout_s=TIMEOUT_S, smoke=True)
        assert "ray is not installed" in result["skipped"], result
        pytest.skip("the `ray` extra is not installed: bench_ray.py says so, and that is all it can run")
    result, rows = smoke("ray")
    assert len(rows) == 3


def test_gpu_smoke():
    result, rows = smoke("gpu")  # the dry run: on the CPU, tiny sizes, as gpu.sh --dry-run
    assert result["dry_run"] is True
    assert len(rows) == 3 and all(figure.startswith("DRY RUN") for figure in figures(rows))


def test_qdrant_embedded_smoke(tmp_path):
    out = tmp_path / "qdrant.json"
    command = [sys.executable, str(BENCHMARKS / "bench_qdrant_embedded.py"), "--smoke", "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(result["engines"]) == {"qdrant-edge-py", "qdrant-client local"}
    for engine in result["engines"].values():
        assert {"load_s", "p50_ms", "p95_ms"} <= set(engine)


def test_index_prose_smoke(tmp_path):
    """`bench_index.py --prose` (issue 69): the document pass on docs/*.md against the matmul rate."""
    out = tmp_path / "prose.json"
    command = [sys.executable, str(BENCHMARKS / "bench_index.py"), "--prose", "--smoke", "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["benchmark"] == "index_prose" and result["corpus"]["chunks"] > 0
    assert result["indexing"]["chunks_per_s"] > 0 and result["indexing"]["tokens_per_s"] > 0
    assert 0 < result["fraction_of_matmul_peak"]["embedding"] and result["matmul_peak"]["peak_gflops"] > 0
    assert {"read_and_split_all_s", "llm_pass_sample_s", "padding_share_windows"} <= set(result["stages"])
