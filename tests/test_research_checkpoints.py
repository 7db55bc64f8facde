"""Every candidate checkpoint a report names is committed whole under research/checkpoints/:
its config reads, every weight file it lists is there, and the real model loads it (slow). A
two-space candidate (instemb_parts.json) is checked part by part."""

from __future__ import annotations

from pathlib import Path

import pytest

from instemb_rag.encoder.llm_folder import check_complete, read_config

FOLDERS = sorted(path for path in (Path(__file__).parents[1] / "research" / "checkpoints").iterdir() if path.is_dir())
# Issue 67's readers (a cross-encoder's config, LoRA adapter, head and fusion weight), not encoders.
READERS = [
    path for path in FOLDERS if (path / "adapter.safetensors").is_file() and (path / "head.safetensors").is_file()
]
CANDIDATES = [path for path in FOLDERS if path not in READERS]


@pytest.mark.parametrize("folder", READERS, ids=lambda path: path.name)
def test_each_reader_candidate_is_complete(folder):
    import json

    from safetensors.torch import load_file

    from instemb_rag.reader.model import ReaderConfig

    config = ReaderConfig.from_dict(json.loads((folder / "config.json").read_text()), str(folder))
    assert config.base == "minilm" and len(config.base_fingerprint) == 64
    adapter = load_file(str(folder / "adapter.safetensors"))
    assert adapter and all("lora_" in name for name in adapter)
    assert set(load_file(str(folder / "head.safetensors"))) == {"weight", "bias"}
    assert json.loads((folder / "fusion.json").read_text())["weight"] >= 0


def test_there_are_candidates_to_check():
    assert {path.name for path in CANDIDATES} >= {"facets-general-300", "facets-general-450"}


def llm_folders(folder: Path) -> list[Path]:
    """The InstEmb checkpoints a candidate holds: itself, or a two-space folder's LLM parts."""
    from instemb_rag.encoder.composed.spec import is_composed, read_spec

    if not is_composed(folder):
        return [folder]
    return sorted({folder / entry.path for entry in read_spec(folder).parts.values() if entry.is_llm})


@pytest.mark.parametrize("folder", CANDIDATES, ids=lambda path: path.name)
def test_each_candidate_is_complete(folder):
    from instemb_rag.encoder.composed.spec import is_composed, read_spec
    from instemb_rag.teachers.registry import TEACHERS

    for part in llm_folders(folder):
        check_checkpoint(part)
    if is_composed(folder):  # its sentence encoder: an installable teacher, or shipped inside
        reference = read_spec(folder).parts["sentence_encoder"].config["encoder"]
        assert reference in TEACHERS or (folder / reference).is_dir(), reference


def check_checkpoint(folder: Path) -> None:
    from instemb_rag.encoder.composed.spec import read_spec

    config = read_config(folder)
    check_complete(folder, config)  # raises naming the missing file
    assert config.base_model == "smollm2-135m-instruct"
    sentence_encoder = read_spec(folder).parts.get("sentence_encoder")  # two-tower: the converter reads its entry
    if sentence_encoder is not None:  # its sentence encoder is an installable teacher, or ships inside
        from instemb_rag.teachers.registry import TEACHERS

        reference = sentence_encoder.config["encoder"]
        assert reference in TEACHERS or (folder / reference).is_dir(), reference


@pytest.mark.slow
def test_a_candidate_loads_and_embeds_with_its_head():
    from instemb_rag.encoder import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(CANDIDATES[0])
    vectors = encoder.encode_queries(["Which tent is lightest?"], ["Focus on packed size."])
    assert vectors.shape == (1, 576 + 384)  # pooled (576) blended beside the head's MiniLM space (384)
