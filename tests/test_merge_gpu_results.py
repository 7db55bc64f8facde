"""benchmarks/merge_gpu_results.py: a results folder from `gpu.sh --offline` becomes the
gpu-results section of benchmarks/README.md (device, torch/CUDA versions, date), the same text
however often it is merged; the text around the markers stays; runs from two GPUs do not mix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import GPU_BENCH_RESULT

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import merge_gpu_results  # noqa: E402  (benchmarks/ is no package)

GPU_RESULT = {**GPU_BENCH_RESULT, "quick": False}


def results_folder(folder: Path, gpu: str, benchmarks: dict) -> Path:
    folder.mkdir(parents=True)
    environment = {
        "date": "2026-11-20",
        "gpu": gpu,
        "driver": "580.159.04",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "transformers": "5.17.0",
        "python": "3.12.3",
    }
    (folder / "environment.json").write_text(json.dumps(environment))
    (folder / "results_cuda.json").write_text(json.dumps({**benchmarks, "_command": "python benchmarks/run.py"}))
    (folder / "install.json").write_text(json.dumps({"kit_id": "abc123", "source_commit": "f00d", "faiss": None}))
    (folder / "cuda_tests.txt").write_text("....\n======= 14 passed, 1 skipped in 31.20s =======\n")
    return folder


def test_merge_writes_the_section_once_however_often_it_runs(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Benchmarks\n\nIntro.\n\n<!-- gpu-results:start -->\nold table\n<!-- gpu-results:end -->\n\nAfter.\n"
    )
    run_dir = results_folder(tmp_path / "r1", "NVIDIA H100 80GB HBM3", {"gpu": GPU_RESULT})
    raw = tmp_path / "results_cuda.json"

    merge_gpu_results.merge([run_dir], readme, raw)
    first = readme.read_text()
    assert "old table" not in first and first.startswith("# Benchmarks\n\nIntro.") and first.endswith("After.\n")
    assert "Measured 2026-11-20 on NVIDIA H100 80GB HBM3 (driver 580.159.04); torch 2.11.0+cu130, CUDA 13.0" in first
    assert "CUDA tests: 14 passed, 1 skipped in 31.20s." in first
    assert "p50 6.1 ms, p99 9.5 ms" in first  # the row run.py's renderer makes of the gpu result
    assert json.loads(raw.read_text())["gpu"] == GPU_RESULT

    merge_gpu_results.merge([run_dir], readme, raw)
    assert readme.read_text() == first


def test_merge_adds_the_section_where_there_is_none_and_later_runs_replace_earlier(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# Benchmarks\n")
    early = results_folder(tmp_path / "r1", "NVIDIA H200", {"gpu": {"skipped": "first try"}})
    late = results_folder(tmp_path / "r2", "NVIDIA H200", {"gpu": GPU_RESULT})
    merge_gpu_results.merge([early, late], readme, tmp_path / "raw.json")
    text = readme.read_text()
    assert text.count("<!-- gpu-results:start -->") == 1 and "first try" not in text and "p99 9.5 ms" in text


def test_runs_from_two_gpus_are_not_merged(tmp_path):
    one = results_folder(tmp_path / "r1", "NVIDIA H100 80GB HBM3", {"gpu": GPU_RESULT})
    two = results_folder(tmp_path / "r2", "NVIDIA H200", {"gpu": GPU_RESULT})
    with pytest.raises(merge_gpu_results.MergeError, match="different or unnamed devices"):
        merge_gpu_results.merge([one, two], tmp_path / "README.md", tmp_path / "raw.json")
    with pytest.raises(SystemExit) as stopped:
        merge_gpu_results.main([str(tmp_path / "absent"), "--readme", str(tmp_path / "README.md")])
    assert stopped.value.code == 2
