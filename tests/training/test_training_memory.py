"""`instemb-rag train --dry-run`: parameter counts from config.json equal the instantiated model's,
and the memory estimate moves the way the settings say (FSDP shards, checkpointing saves)."""

import json

import pytest
import torch
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.training.args import load_config
from instemb_rag.training.sizing import (
    KNOWN_CONFIGS,
    ModelShape,
    count_parameters,
    estimate_memory,
    model_config_dict,
)
from instemb_rag.training.student import load_student, make_trainable

TINY_RECIPE = "instemb_rag/training/recipes/tiny.yaml"
LLAMA_8B = "instemb_rag/training/recipes/llama3-8b-8gpu.yaml"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"model.lora_rank": 4},
        {"model.lora_rank": 4, "model.lora_all_layers": True},
        {"model.train_lookahead": False, "model.train_final_norm": False, "model.trainable_top_layers": 2},
    ],
)
def test_counts_from_config_equal_the_instantiated_model(tiny_model_dir, overrides):
    config = load_config(TINY_RECIPE, {"model.model_name_or_path": str(tiny_model_dir), **overrides})
    shape = ModelShape.from_config(model_config_dict(str(tiny_model_dir))[1])
    counts = count_parameters(shape, config)
    encoder = load_student(config, torch.device("cpu"))
    parts = make_trainable(encoder, config)
    model_params = sum(p.numel() for p in encoder.model.parameters())
    assert counts.total == model_params
    assert counts.trainable == sum(p.numel() for p in parts.named.values())


def test_llama3_8b_is_sized_by_config_without_weights():
    shape = ModelShape.from_config(KNOWN_CONFIGS["meta-llama/Meta-Llama-3-8B-Instruct"])
    assert 8.02e9 < shape.total_params < 8.04e9  # Llama-3-8B: 8.03 B parameters
    config = load_config(LLAMA_8B)
    counts = count_parameters(shape, config)
    assert 0.001 < counts.share < 0.02  # LoRA rank 64 on 8 layers + look-ahead + norm
    ddp = estimate_memory(shape, counts, config, 8, "ddp")
    fsdp = estimate_memory(shape, counts, config, 8, "fsdp")
    assert fsdp.weights < ddp.weights / 2
    assert ddp.total < 80 * 1024**3  # the recipe fits an 80 GB GPU with replicated weights
    full_layers = load_config(LLAMA_8B, {"model.lora_rank": 0})  # the paper's full top 8 layers
    full = count_parameters(shape, full_layers)
    full_ddp = estimate_memory(shape, full, full_layers, 8, "ddp")
    full_fsdp = estimate_memory(shape, full, full_layers, 8, "fsdp")
    assert full_fsdp.total < full_ddp.total - 15 * 1024**3  # FSDP shards the 24 frozen layers
    assert full_fsdp.optimizer == full_ddp.optimizer  # the trainable share stays replicated
    no_checkpointing = load_config(LLAMA_8B, {"training.gradient_checkpointing": False})
    assert estimate_memory(shape, counts, no_checkpointing, 8, "ddp").activations > 4 * ddp.activations


def test_dry_run_command_prints_counts_and_writes_nothing(tiny_model_dir, tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--config",
            TINY_RECIPE,
            "--model",
            str(tiny_model_dir),
            "--output-dir",
            str(tmp_path / "run"),
            "--dry-run",
            "--world-size",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "trainable" in result.output and "fsdp" in result.output and "over 2 rank(s)" in result.output
    assert not (tmp_path / "run").exists()
    llama = CliRunner().invoke(app, ["train", "--config", LLAMA_8B, "--dry-run", "--world-size", "8"])
    assert llama.exit_code == 0, llama.output
    assert "8,072,204,288 total" in llama.output and "built-in config" in llama.output


def test_dry_run_of_an_unknown_model_is_bad_input(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"hidden_size": 8}))
    result = CliRunner().invoke(app, ["train", "--model", str(tmp_path / "m"), "--dry-run"])
    assert result.exit_code == 2 and "Llama-style" in result.output


def test_gradient_checkpointing_changes_memory_not_the_result(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file

    from instemb_rag.datasets.records import TrainingRecord, write_records
    from instemb_rag.training.trainer import train

    words = "the tent is light and durable for a camp trip in cold rain".split()
    write_records(
        tmp_path / "r.jsonl",
        [
            TrainingRecord(
                text=" ".join(words[i : i + 6]), instruction="what is it ?", output=" ".join(words[i + 1 : i + 4])
            )
            for i in range(6)
        ],
    )
    finals = {}
    for checkpointing in (False, True):
        run = tmp_path / f"run-{checkpointing}"
        train(
            load_config(
                TINY_RECIPE,
                {
                    "model.model_name_or_path": str(tiny_model_dir),
                    "training.max_steps": 2,
                    "data.train_file": str(tmp_path / "r.jsonl"),
                    "training.output_dir": str(run),
                    "training.views": ["student_input", "teacher_input", "student_output"],
                    "training.gradient_checkpointing": checkpointing,
                },
            )
        )
        finals[checkpointing] = load_file(str(run / "checkpoint-2" / "trainer_params.safetensors"))
    for name, tensor in finals[False].items():
        assert torch.allclose(tensor, finals[True][name], atol=1e-6), name
