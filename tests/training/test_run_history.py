"""run_info.json keeps the history of a run: one entry per invocation, each saying where it started."""

from __future__ import annotations

import json
import random
from datetime import datetime

from helpers import tiny_train_config

from instemb_rag.datasets.records import TrainingRecord, write_records
from instemb_rag.training.lookahead.frozen_llm import file_digest
from instemb_rag.training.trainer import train

WORDS = "the tent is light and durable for a camp trip in cold rain with water stove".split()


def test_each_resume_adds_an_entry_with_its_start_step_time_and_config(tiny_model_dir, tmp_path):
    rng = random.Random(0)
    records = [
        TrainingRecord(
            text=" ".join(rng.choice(WORDS) for _ in range(10)),
            instruction="what is the weight ?",
            output="a light tent",
        )
        for _ in range(16)
    ]
    write_records(tmp_path / "train.jsonl", records)
    run = tmp_path / "run"

    def invocation(max_steps: int, resume: bool) -> dict:
        config = tiny_train_config(
            tiny_model_dir,
            tmp_path / "train.jsonl",
            run,
            **{"training.max_steps": max_steps, "training.save_steps": 3, "training.resume": resume},
        )
        train(config)
        return json.loads((run / "run_info.json").read_text())

    first = invocation(3, resume=False)
    assert first["start_step"] == 0 and "sessions" not in first
    invocation(6, resume=True)  # resumes from checkpoint-3
    latest = invocation(8, resume=True)  # resumes from checkpoint-6, with a longer schedule

    history = [*latest["sessions"], latest]
    assert [entry["start_step"] for entry in history] == [0, 3, 6]
    assert latest["resumed_at_step"] == 6 and history[1]["resumed_at_step"] == 3
    assert latest["config_sha256"] == file_digest(run / "train_config.json")
    assert len({entry["config_sha256"] for entry in history}) == 3  # max_steps differed each time
    started = [datetime.fromisoformat(entry["started_at"]) for entry in history]
    assert started == sorted(started) and all(moment.tzinfo is not None for moment in started)
    assert all(entry["device"] == "cpu" and entry["records"] == 16 for entry in history)
