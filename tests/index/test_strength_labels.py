"""The strength you set is the strength you see (issue 63 item 4): --explain shows the knob as set
(or the model's own) and, labelled apart, the effective strength the effect is added at (the knob
times the model's gain for the query), and --help says what the default is (the shipped folder's
own value, read without loading torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import index_cli_args
from typer.testing import CliRunner

from instemb_rag.cli import app

pytest.importorskip("sentence_transformers")

QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
GAIN_BIAS = -1.0  # the effect map's gain: 2 sigmoid(-1) ~ 0.538 for every query (its weights are zero)
GAIN = 2 * float(torch.sigmoid(torch.tensor(GAIN_BIAS)))
runner = CliRunner()


@pytest.fixture(scope="module")
def effect_model(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    """A tiny instruction-effect model whose effect map keeps ~54% of the effect (a gain of 0.538)."""
    from instemb_rag.encoder.composed.effect import InstructionEffectEncoder
    from instemb_rag.encoder.composed.effect_map import EffectMap
    from instemb_rag.encoder.load import untrained_effect

    untrained = untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    llm = untrained.parts["documents_llm"]
    effect_map = EffectMap(llm.dimension, rank=0)
    with torch.no_grad():
        effect_map.gain.bias.fill_(GAIN_BIAS)
    encoder = InstructionEffectEncoder(llm, untrained.parts["sentence_encoder"], effect_map, instruction_strength=1.5)
    folder = tmp_path_factory.mktemp("gain") / "model"
    encoder.save(folder)
    return folder


@pytest.fixture(scope="module")
def effect_index(effect_model, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gain_index")
    (root / "docs").mkdir()
    (root / "docs" / "light.md").write_text("a light tent . packed size 30 cm . weight 1 kg .")
    (root / "docs" / "ridge.md").write_text("the tent is durable nylon . good in rain and wind .")
    result = runner.invoke(app, index_cli_args(root / "docs", root / "index", effect_model, "--chunk-overlap", "8"))
    assert result.exit_code == 0, result.output
    return root / "index"


def query(index_dir: Path, *extra: str) -> str:
    result = runner.invoke(
        app,
        ["query", QUERY, "-i", INSTRUCTION, "--index-dir", str(index_dir), "--explain", *extra],
        env={"COLUMNS": "250", "INSTEMB_NO_DAEMON": "1"},
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("strength", [1.0, 2.0, 10.0])
def test_explain_json_has_the_knob_as_set_and_the_effective_strength(effect_index, strength):
    document = json.loads(query(effect_index, "--instruction-strength", str(strength), "--json"))
    for found in document["hits"]:
        assert found["explain"]["instruction_strength"] == pytest.approx(strength)
        assert found["explain"]["effective_strength"] == pytest.approx(strength * GAIN, rel=1e-4)


def test_without_the_option_explain_shows_the_models_own_strength(effect_index):
    document = json.loads(query(effect_index, "--json"))
    parts = document["hits"][0]["explain"]
    assert parts["instruction_strength"] == pytest.approx(1.5)
    assert parts["effective_strength"] == pytest.approx(1.5 * GAIN, rel=1e-4)


def test_the_table_labels_both(effect_index):
    output = query(effect_index, "--instruction-strength", "2")
    assert "strength" in output and "effective" in output
    assert "2.0000" in output and f"{2 * GAIN:.4f}" in output
    flat = " ".join(output.split())
    assert "strength = --instruction-strength (the model's own when not given)" in flat
    assert "effective = strength * the model's gain for this query and instruction" in flat


def test_the_help_says_the_shipped_defaults_strength_without_loading_torch():
    from instemb_rag.encoder.composed.spec import read_spec
    from instemb_rag.shipped import SHIPPED_FOLDER

    shipped = read_spec(SHIPPED_FOLDER).routes["query"].get("instruction_strength")
    if shipped is None:
        pytest.skip("the shipped default is not an instruction-effect model")
    script = (
        "import sys; from typer.testing import CliRunner; from instemb_rag.cli import app; "
        "out = CliRunner().invoke(app, ['query', '--help'], env={'COLUMNS': '300'}).output; "
        "print(' '.join(out.split())); print('torch loaded' if 'torch' in sys.modules else 'no torch')"
    )
    printed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert f"Default: the model's own (the shipped default's: {float(shipped)})." in printed
    assert "the effective strength" in printed
    assert printed.strip().endswith("no torch")
