import json
import shutil

import numpy as np
import pytest
import torch
from testing import build_tiny_model_folder

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder.composed import llm_folder_of
from instemb_rag.encoder.llm_folder import CONFIG_FILE, export_llm_folder, read_config
from instemb_rag.encoder.model import SHIPPED_MODEL_FOLDER
from instemb_rag.errors import CheckpointError, FingerprintMismatchError, ModelNotFoundError

TEXTS = ["a durable tent for rain", "light stove"]
INSTRUCTIONS = ["focus on durability", None]


def _perturb(encoder: InstEmbEncoder, seed: int = 1) -> list[str]:
    """Pretend training happened: move the look-ahead vectors and one top layer; its name."""
    generator = torch.Generator().manual_seed(seed)
    top = encoder.model.base_model.layers[-1]
    with torch.no_grad():
        encoder.lookahead.vectors.add_(torch.randn(encoder.lookahead.vectors.shape, generator=generator))
        top.mlp.down_proj.weight.add_(0.05 * torch.randn(top.mlp.down_proj.weight.shape, generator=generator))
    name = next(n for n, p in encoder.model.named_parameters() if p is top.mlp.down_proj.weight)
    return [name]


def test_save_load_round_trip_is_exact(tiny_encoder, tmp_path):
    trained = _perturb(tiny_encoder)
    before = tiny_encoder.encode_queries(TEXTS, INSTRUCTIONS)
    tiny_encoder.save(tmp_path / "ckpt", trained=trained)
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")
    np.testing.assert_array_equal(before, loaded.encode_queries(TEXTS, INSTRUCTIONS))
    assert loaded.fingerprint == tiny_encoder.fingerprint
    assert loaded.config.template == tiny_encoder.config.template
    # Only trainable parts are stored, never the whole base (and the sentence-transformers files).
    stored = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert stored == [
        "adapted.safetensors",
        "config_sentence_transformers.json",
        CONFIG_FILE,
        "lookahead.safetensors",
        "modules.json",
    ]


def test_untrained_checkpoint_from_any_base(tiny_encoder, tmp_path):
    tiny_encoder.save(tmp_path / "fresh")
    config = read_config(tmp_path / "fresh")
    assert config.lookahead_length == 4 and config.pooling == "daap"
    assert config.base_fingerprint == tiny_encoder.backbone.fingerprint
    reloaded = InstEmbEncoder.from_pretrained(tmp_path / "fresh", device="cpu")
    np.testing.assert_array_equal(tiny_encoder.encode_documents(TEXTS), reloaded.encode_documents(TEXTS))


def test_fingerprint_mismatch_is_refused(tmp_path):
    base = build_tiny_model_folder(tmp_path / "base", seed=0)
    encoder = InstEmbEncoder.from_pretrained(base, device="cpu", lookahead_length=2)
    encoder.save(tmp_path / "ckpt")
    # Replace the base weights in place: same path, different weights.
    build_tiny_model_folder(tmp_path / "base", seed=1)
    with pytest.raises(FingerprintMismatchError, match="retrain it on this one"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")


def test_fingerprint_changes_with_what_shapes_embeddings(tiny_model_dir):
    daap = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4)
    last = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, pooling="input_last")
    short = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2)
    assert len({daap.fingerprint, last.fingerprint, short.fingerprint}) == 3


def test_newer_format_and_damaged_config_are_refused(tiny_encoder, tmp_path):
    tiny_encoder.save(tmp_path / "ckpt")
    config_path = tmp_path / "ckpt" / CONFIG_FILE
    raw = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**raw, "format_version": 99}))
    with pytest.raises(CheckpointError, match="Upgrade instemb-rag"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")
    config_path.write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")


def test_inference_lookahead_length_ablation(tiny_encoder, tmp_path):
    tiny_encoder.save(tmp_path / "ckpt")
    for length in (0, 1, 4):
        encoder = InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu", lookahead_length=length)
        assert encoder.encode_documents(TEXTS).shape == (2, encoder.dimension)
    with pytest.raises(Exception, match="between 0 and"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu", lookahead_length=5)


def test_missing_model_folder_gets_clear_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="Model folder not found"):
        InstEmbEncoder.from_pretrained(tmp_path / "nope", device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        InstEmbEncoder.from_pretrained(tmp_path / "empty", device="cpu")


def test_interrupted_save_keeps_previous_checkpoint(tiny_encoder, tmp_path, monkeypatch):
    tiny_encoder.save(tmp_path / "ckpt")
    before = (tmp_path / "ckpt" / "lookahead.safetensors").read_bytes()
    _perturb(tiny_encoder)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tiny_encoder.lookahead, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        tiny_encoder.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "lookahead.safetensors").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no staging left behind


def test_export_keeps_weights_drops_trainer_state_and_overrides_inference_settings(tiny_encoder, tmp_path):
    from typer.testing import CliRunner

    from instemb_rag.cli import app

    source = tmp_path / "run" / "checkpoint-3"
    tiny_encoder.save(source)
    (source / "trainer_state.json").write_text("{}")  # what a training checkpoint also holds
    target = tmp_path / "shipped"
    result = CliRunner().invoke(
        app, ["export", str(source), str(target), "--max-length", "128", "--pooling", "all_mean"]
    )
    assert result.exit_code == 0, result.output
    assert not (target / "trainer_state.json").exists()
    config = read_config(target)
    assert (config.max_length, config.pooling) == (128, "all_mean")
    assert config.base_fingerprint == read_config(source).base_fingerprint
    exported = InstEmbEncoder.from_pretrained(target, device="cpu", pooling=tiny_encoder.pooling.mode)
    texts = ["a light tent", "the stove is durable"]
    np.testing.assert_allclose(exported.encode_documents(texts), tiny_encoder.encode_documents(texts), atol=1e-6)

    bad = CliRunner().invoke(app, ["export", str(source), str(tmp_path / "x"), "--pooling", "maxpool"])
    assert bad.exit_code == 2 and "'maxpool' is not one of" in " ".join(bad.output.split())
    assert not (tmp_path / "x").exists()


def test_checkpoint_records_its_weight_files_and_refuses_to_load_without_one(tiny_encoder, tmp_path):
    trained = _perturb(tiny_encoder)
    tiny_encoder.save(tmp_path / "ckpt", trained=trained)
    assert read_config(tmp_path / "ckpt").files == ["lookahead.safetensors", "adapted.safetensors"]
    (tmp_path / "ckpt" / "adapted.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"adapted\.safetensors is missing.*Copy the whole LLM folder"):
        InstEmbEncoder.from_pretrained(tmp_path / "ckpt", device="cpu")
    with pytest.raises(CheckpointError, match=r"adapted\.safetensors is missing"):
        export_llm_folder(tmp_path / "ckpt", tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("layout", ["as shipped", pytest.param("two-space", marks=pytest.mark.slow)])
def test_shipped_default_without_its_lora_folder_refuses_to_load(tmp_path, layout, request):
    """What an installed wheel without default_checkpoint/lora/ used to load silently: the shipped
    LLM without its adapter refuses, and so does the default as a whole, in either layout (a
    two-space default, built from the shipped LLM where minilm is installed: its LLM is its
    documents_llm/, which refuses before any other part loads)."""
    source = SHIPPED_MODEL_FOLDER if layout == "as shipped" else request.getfixturevalue("composed_default_dir")
    shutil.copytree(source, tmp_path / "default")
    llm = llm_folder_of(tmp_path / "default")  # the default itself, or its documents_llm/
    assert "lora/adapter_model.safetensors" in read_config(llm).files
    shutil.rmtree(llm / "lora")
    for folder in {llm, tmp_path / "default"}:
        with pytest.raises(
            CheckpointError,
            match=r"lora/adapter_config\.json is missing \(and 1 more: "
            r"lora/adapter_model\.safetensors\).*reinstall instemb-rag",
        ):
            InstEmbEncoder.from_pretrained(folder, device="cpu")


def test_checkpoint_without_a_file_list_still_loads(tiny_encoder, tmp_path):
    """Checkpoints written before the config recorded its files load as before."""
    trained = _perturb(tiny_encoder)
    tiny_encoder.save(tmp_path / "old", trained=trained)
    path = tmp_path / "old" / CONFIG_FILE
    raw = json.loads(path.read_text())
    del raw["files"]
    path.write_text(json.dumps(raw))
    loaded = InstEmbEncoder.from_pretrained(tmp_path / "old", device="cpu")
    assert loaded.fingerprint == tiny_encoder.fingerprint
    np.testing.assert_array_equal(loaded.encode_documents(TEXTS), tiny_encoder.encode_documents(TEXTS))


def test_export_with_head_input_weight_writes_a_blended_view_of_the_head(tiny_encoder, tmp_path):
    """A geometry checkpoint exported with --head-input-weight keeps w of the pooled cosine."""
    from typer.testing import CliRunner

    from instemb_rag.cli import app
    from instemb_rag.encoder.modules.projection import Projection

    torch.manual_seed(0)
    headed = tiny_encoder.with_projection(Projection(tiny_encoder.hidden_size, 8))
    headed.save(tmp_path / "geometry")
    result = CliRunner().invoke(
        app, ["export", str(tmp_path / "geometry"), str(tmp_path / "blend"), "--head-input-weight", "0.5"]
    )
    assert result.exit_code == 0, result.output
    blend = InstEmbEncoder.from_pretrained(tmp_path / "blend", device="cpu")
    head_only = InstEmbEncoder.from_pretrained(tmp_path / "geometry", device="cpu")
    bare = tiny_encoder.with_projection(None)
    assert blend.dimension == 8 + tiny_encoder.hidden_size and blend.fingerprint != head_only.fingerprint

    def cosines(encoder):
        a, b = encoder.encode_documents(TEXTS)
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    np.testing.assert_allclose(cosines(blend), 0.5 * cosines(bare) + 0.5 * cosines(head_only), atol=1e-5)
    # Weight 0 is the head alone again, with the original fingerprint.
    export_llm_folder(tmp_path / "blend", tmp_path / "unblended", head_input_weight=0.0)
    assert InstEmbEncoder.from_pretrained(tmp_path / "unblended", device="cpu").fingerprint == head_only.fingerprint
    tiny_encoder.save(tmp_path / "plain", trained=[])
    with pytest.raises(CheckpointError, match="no projection head"):
        export_llm_folder(tmp_path / "plain", tmp_path / "x", head_input_weight=0.5)
    with pytest.raises(CheckpointError, match=r"\[0, 1\)"):
        export_llm_folder(tmp_path / "geometry", tmp_path / "x", head_input_weight=1.0)
    assert not (tmp_path / "x").exists()
