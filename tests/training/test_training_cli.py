"""`instemb-rag train` and `instemb-rag build-data` through the real typer app."""

import json

from testing import shared_data_or_skip
from typer.testing import CliRunner

from instemb_rag.cli import app

runner = CliRunner()


def _records(path, count=8):
    words = ["the tent is light", "cold rain and wind", "a durable stove", "water on the floor"]
    lines = [
        json.dumps(
            {
                "text": words[i % 4] + " for a camp trip",
                "instruction": "what is the weight ?",
                "output": words[(i + 1) % 4],
            }
        )
        for i in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_command_with_flag_and_set_overrides(tiny_model_dir, tmp_path):
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            "instemb_rag/training/recipes/tiny.yaml",
            "--model",
            str(tiny_model_dir),
            "--train-file",
            str(_records(tmp_path / "r.jsonl")),
            "--output-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "2",
            "--set",
            "training.batch_size=2",
            "--set",
            "save_dtype=bfloat16",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Final checkpoint" in result.output
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["training"]["batch_size"] == 2 and saved["training"]["max_steps"] == 2
    assert saved["training"]["save_dtype"] == "bfloat16"
    assert (tmp_path / "run" / "final" / "instemb_config.json").is_file()


def test_train_command_reports_bad_records_with_line_number(tiny_model_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "a", "output": "b"}) + "\n" + json.dumps({"text": "a"}) + "\n")
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            "instemb_rag/training/recipes/tiny.yaml",
            "--model",
            str(tiny_model_dir),
            "--train-file",
            str(bad),
            "--output-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 2
    assert "line 2" in result.output and "output" in result.output


def test_train_command_rejects_unknown_option(tmp_path):
    result = runner.invoke(app, ["train", "--set", "training.bogus=1", "--output-dir", str(tmp_path)])
    assert result.exit_code == 2 and "bogus" in result.output


def test_build_data_command(tmp_path):
    root = shared_data_or_skip("pubmedqa").parent
    result = runner.invoke(
        app,
        [
            "build-data",
            "--out",
            str(tmp_path / "data"),
            "--data-root",
            str(root),
            "--set-name",
            "pubmedqa",
            "--heldout-fraction",
            "0.1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "900 training and 100 held-out" in result.output
    assert (tmp_path / "data" / "heldout.jsonl").is_file()
