"""`instemb-rag train` under torchrun: two CPU ranks (gloo) give the single-process run's loss curve
and checkpoint (DDP; FSDP up to the kill); a run killed mid-way resumes, at another world size.

The global micro-batch is 5 records over 11 (so the ranks get 3 and 2 rows, and every third
micro-batch has one record, which leaves rank 1 without rows); hard negatives, groups and the
retrieval loss are on, so every gathered tensor is exercised. The dropout view is off: its masks
are drawn per rank, so with it the runs agree in distribution only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from instemb_rag.datasets.records import TrainingRecord, write_records
from instemb_rag.training.args import load_config
from instemb_rag.training.parallel import KILL_AFTER_STEP_ENV
from instemb_rag.training.trainer import train

TINY_RECIPE = "instemb_rag/training/recipes/tiny.yaml"
STEPS = 9
TOLERANCE = 1e-5
SETTINGS = {
    "training.batch_size": 5,
    "training.max_steps": STEPS,
    "training.save_steps": 3,
    "training.save_total_limit": 10,
    "training.views": ["student_input", "teacher_input", "student_output"],
    "training.retrieval_weight": 1.0,
    "training.negative_memory": 6,  # every rank must remember the same gathered documents
    "training.device": "cpu",
}


def _records() -> list[TrainingRecord]:
    words = "the tent is light and durable for a camp trip in cold rain with water stove".split()
    records = []
    for i in range(11):
        text = " ".join(words[(i * 3 + k) % len(words)] for k in range(8))
        records.append(
            TrainingRecord(
                text=text,
                instruction=["what is the weight ?", "does it do well in rain ?", None][i % 3],
                output=" ".join(words[(i * 5 + k) % len(words)] for k in range(2 + i % 4)),
                negative_instruction="how is the stove ?" if i % 4 == 0 else None,
                negative_outputs=("cold water in the tent",) if i % 5 == 1 else (),
                group=f"g{i // 2}" if i < 4 else None,
            )
        )
    return records


@pytest.fixture(scope="module")
def train_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dist_records") / "train.jsonl"
    write_records(path, _records())
    return path


@pytest.fixture(scope="module")
def single_process_run(tiny_model_dir, train_file, tmp_path_factory) -> Path:
    output_dir = tmp_path_factory.mktemp("single") / "run"
    train(
        load_config(
            TINY_RECIPE,
            {
                "model.model_name_or_path": str(tiny_model_dir),
                "data.train_file": str(train_file),
                "training.output_dir": str(output_dir),
                **SETTINGS,
            },
        )
    )
    return output_dir


def _torchrun(
    tiny_model_dir,
    train_file,
    output_dir,
    nproc: int,
    *extra: str,
    check: bool = True,
    environ: dict[str, str] | None = None,
) -> str:
    sets = [item for key, value in SETTINGS.items() for item in ("--set", f"{key}={json.dumps(value)}")]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "instemb_rag.cli",
        "train",
        "--config",
        TINY_RECIPE,
        "--model",
        str(tiny_model_dir),
        "--train-file",
        str(train_file),
        "--output-dir",
        str(output_dir),
        *sets,
        *extra,
    ]
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update({"OMP_NUM_THREADS": "1", **(environ or {})})
    result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stdout
    return result.stdout


def _metrics(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def _assert_same_tensors(expected_file: Path, actual_file: Path) -> None:
    expected, actual = load_file(str(expected_file)), load_file(str(actual_file))
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.allclose(expected[name], actual[name], atol=TOLERANCE, rtol=0), (
            f"{name}: max diff {(expected[name] - actual[name]).abs().max()}"
        )


def _assert_same_curves(expected: list[dict], actual: list[dict]) -> None:
    assert [row["step"] for row in actual] == [row["step"] for row in expected]
    for want, got in zip(expected, actual):
        for key in ("loss", "distill", "contrastive", "retrieval", "grad_norm", "input_tokens"):
            assert abs(want[key] - got[key]) <= TOLERANCE * max(1.0, abs(want[key])), (want["step"], key, want, got)


def test_two_gloo_ranks_match_one_process(tiny_model_dir, train_file, single_process_run, tmp_path):
    run = tmp_path / "ddp"
    output = _torchrun(tiny_model_dir, train_file, run, 2, "--parallel", "ddp")
    assert output.count("Final checkpoint") == 1  # rank 0 alone reports
    _assert_same_curves(_metrics(single_process_run), _metrics(run))
    for name in ("trainer_params.safetensors", "lookahead.safetensors", "adapted.safetensors"):
        _assert_same_tensors(single_process_run / f"checkpoint-{STEPS}" / name, run / f"checkpoint-{STEPS}" / name)
    _assert_same_tensors(
        single_process_run / "final" / "lookahead.safetensors", run / "final" / "lookahead.safetensors"
    )
    run_info = json.loads((run / "run_info.json").read_text())
    assert run_info["world_size"] == 2
    # Each rank cached the teacher targets of its own slices, in its own file.
    shards = [json.loads(p.read_text()).get("rank_shard") for p in (run / "teacher_cache").glob("*.json")]
    assert sorted(shards) == ["0/2", "1/2"]


def test_killed_two_rank_fsdp_run_resumes_in_one_process(tiny_model_dir, train_file, single_process_run, tmp_path):
    """Also the FSDP check: its steps 1-4 (kept in metrics.jsonl) and its checkpoint-4, trained on
    by one process, must give the single-process curve and weights."""
    run = tmp_path / "killed"
    # Rank 1 dies (SIGKILL) after step 5; rank 0 wrote checkpoint-4 before step 5's collectives.
    output = _torchrun(
        tiny_model_dir,
        train_file,
        run,
        2,
        "--parallel",
        "fsdp",
        "--set",
        "training.save_steps=1",
        check=False,
        environ={KILL_AFTER_STEP_ENV: "1:5"},
    )
    assert (run / "checkpoint-4").is_dir(), output
    assert not (run / "final").exists() and not (run / f"checkpoint-{STEPS}").exists(), output
    train(
        load_config(
            TINY_RECIPE,
            {
                "model.model_name_or_path": str(tiny_model_dir),
                "data.train_file": str(train_file),
                "training.output_dir": str(run),
                **SETTINGS,
                "training.save_steps": 1,
                "training.resume": True,
            },
        )
    )
    _assert_same_tensors(
        single_process_run / f"checkpoint-{STEPS}" / "trainer_params.safetensors",
        run / f"checkpoint-{STEPS}" / "trainer_params.safetensors",
    )
    _assert_same_curves(_metrics(single_process_run), _metrics(run))
    sessions = json.loads((run / "run_info.json").read_text())
    assert sessions["world_size"] == 1 and sessions["sessions"][-1]["world_size"] == 2
    assert sessions["sessions"][-1]["fsdp_sharded_parameters"] > 0  # the frozen bottom layer was sharded


def test_slices_cover_the_micro_batch_in_order():
    from instemb_rag.training.parallel import DistributedEnv, local_indices, slice_bounds

    for size in range(1, 12):
        for world in (1, 2, 3, 8):
            bounds = [slice_bounds(size, rank, world) for rank in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == size
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert local_indices([7], DistributedEnv(1, 2, 1)) == ([7], False)  # stand-in row, counted nowhere
    assert local_indices([7, 8, 9], DistributedEnv(0, 2, 0)) == ([7, 8], True)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_nccl_ranks_train_on_cuda(tiny_model_dir, train_file, tmp_path, parallel):
    # NCCL, bf16 autocast and FSDP's bf16 gathers: the curve follows the CPU run's only roughly.
    _torchrun(tiny_model_dir, train_file, tmp_path / parallel, 2, "--device", "cuda", "--parallel", parallel)
    rows = _metrics(tmp_path / parallel)
    assert len(rows) == STEPS and all(row["loss"] == row["loss"] for row in rows)  # no NaN
    assert (tmp_path / parallel / "final" / "lookahead.safetensors").is_file()
