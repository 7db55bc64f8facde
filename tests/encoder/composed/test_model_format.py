"""One model format (issue 62 item 1): instemb_parts.json format 3 records every part's and route's
type as its class path, a save writes it and a load reads it without the converter (legacy.py),
which reads older folders and nothing else; only instemb-rag's own classes are imported; a new
part or route is a class in a module of its own, with no table to add it to; every committed
model folder (the shipped default, research/checkpoints/) is in the current format."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from instemb_rag.encoder.composed import legacy
from instemb_rag.encoder.composed.class_paths import class_path, resolve_class
from instemb_rag.encoder.composed.config import (
    FORMAT_VERSION,
    LLM_TYPE,
    PARTS_FILE,
    SENTENCE_ENCODER_TYPE,
    uses_class_paths,
)
from instemb_rag.encoder.composed.effect_map import EffectMap
from instemb_rag.encoder.composed.routes import EffectQueries, Route, route_from_config
from instemb_rag.encoder.composed.spec import read_spec
from instemb_rag.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "instemb_rag" / "default_checkpoint"
# Issue 67's readers (research/checkpoints/reader-r*) are a cross-encoder's files, not model folders.
COMMITTED = [SHIPPED] + sorted(
    path
    for path in (ROOT / "research" / "checkpoints").iterdir()
    if path.is_dir() and not (path / "adapter.safetensors").is_file()
)
TEXTS = ["which tent is light ?", "which tent lasts ?"]
INSTRUCTIONS = ["focus on weight", "focus on durability"]


@pytest.fixture()
def no_converter(monkeypatch):
    """legacy.convert raises: whatever reads a folder now reads it without the converter."""

    def refuse(folder, raw=None):
        raise AssertionError(
            f"the converter was asked to read {folder}: it is in an older format. Re-save it with "
            f"`instemb-rag export {folder} NEW` (no weights loaded; keep a documents_llm link as a link) "
            "and put NEW in its place."
        )

    monkeypatch.setattr(legacy, "convert", refuse)


@pytest.fixture(scope="module")
def effect(tiny_model_dir, tiny_st_dir):
    """A tiny instruction-effect encoder with every kind of part: LLM, sentence encoder, module part."""
    from instemb_rag.encoder.load import untrained_effect

    untrained = untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2)
    effect_map = EffectMap(untrained.llm_dimension, rank=2)
    with torch.no_grad():
        for parameter in effect_map.parameters():
            parameter.normal_(0, 0.1)
    return untrained.with_parts(
        effect_map=effect_map, query_route=dataclasses.replace(untrained.query_route, effect_map="effect_map")
    )


def recorded_types(folder: Path) -> list[str]:
    raw = json.loads((folder / PARTS_FILE).read_text())
    return [entry["type"] for entry in [*raw["parts"].values(), *raw["routes"].values()]]


def test_a_save_records_class_paths_and_loads_back_without_the_converter(effect, tmp_path, no_converter):
    from instemb_rag.encoder.load import load_model

    effect.save(tmp_path / "saved")
    raw = json.loads((tmp_path / "saved" / PARTS_FILE).read_text())
    assert raw["format_version"] == FORMAT_VERSION and uses_class_paths(raw)
    assert {name: entry["type"] for name, entry in raw["parts"].items()} == {
        "documents_llm": LLM_TYPE,
        "sentence_encoder": SENTENCE_ENCODER_TYPE,
        "effect_map": class_path(EffectMap),
    }
    assert raw["routes"]["query"]["type"] == class_path(EffectQueries)
    loaded = load_model(tmp_path / "saved", device="cpu")
    assert type(loaded) is type(effect) and loaded.fingerprint == effect.fingerprint
    np.testing.assert_array_equal(
        loaded.encode_queries(TEXTS, INSTRUCTIONS), effect.encode_queries(TEXTS, INSTRUCTIONS)
    )


def format_2_names(folder: Path) -> dict:
    """Rewrite a saved folder's instemb_parts.json in format 2's names (the part ``tower``, the
    classes before issue 62 named each concept once), as the committed folders were written."""
    path = folder / PARTS_FILE
    raw = json.loads(path.read_text())
    old_parts = {new: old for old, new in legacy.RENAMED_PARTS.items()}
    old_classes = {new: old for old, new in legacy.RENAMED_CLASSES.items()}
    raw["format_version"] = 2
    raw["parts"] = {
        old_parts.get(name, name): {**entry, "type": old_classes.get(entry["type"], entry["type"])}
        for name, entry in raw["parts"].items()
    }
    for side, route in raw["routes"].items():
        route["type"] = old_classes.get(route["type"], route["type"])
        raw["routes"][side] = {
            old_parts.get(field, field): old_parts.get(value, value) if field in ("sentence_encoder", "head") else value
            for field, value in route.items()
        }
    path.write_text(json.dumps(raw))
    return raw


def test_format_2_names_are_read_by_the_converter_into_format_3(effect, tmp_path):
    from instemb_rag.encoder.load import load_model

    effect.save(tmp_path / "saved")
    current = read_spec(tmp_path / "saved")
    raw = format_2_names(tmp_path / "saved")
    assert "tower" in raw["parts"] and raw["routes"]["document"]["type"].endswith(".HalvesDocuments")
    assert read_spec(tmp_path / "saved") == current
    loaded = load_model(tmp_path / "saved", device="cpu")
    assert loaded.fingerprint == effect.fingerprint
    np.testing.assert_array_equal(
        loaded.encode_queries(TEXTS, INSTRUCTIONS), effect.encode_queries(TEXTS, INSTRUCTIONS)
    )


def short_names(folder: Path) -> None:
    """Rewrite a saved folder's types as the short names of format 2 before class paths."""
    path = folder / PARTS_FILE
    format_2_names(folder)
    raw = json.loads(path.read_text())
    parts = {value: key for key, value in legacy.PART_TYPES.items()}
    current = {old: new for old, new in legacy.RENAMED_CLASSES.items()}
    for entry in raw["parts"].values():
        entry["type"] = parts[current.get(entry["type"], entry["type"])]
    for side, route in raw["routes"].items():
        route["type"] = {value: key for key, value in legacy.ROUTE_TYPES[side].items()}[
            current.get(route["type"], route["type"])
        ]
    path.write_text(json.dumps(raw))


def test_format_2_with_short_type_names_is_read_by_the_converter_alone(effect, tmp_path, monkeypatch):
    from instemb_rag.encoder.load import load_model

    effect.save(tmp_path / "short")
    short_names(tmp_path / "short")
    assert not uses_class_paths(json.loads((tmp_path / "short" / PARTS_FILE).read_text()))
    loaded = load_model(tmp_path / "short", device="cpu")
    assert loaded.fingerprint == effect.fingerprint
    np.testing.assert_array_equal(
        loaded.encode_queries(TEXTS, INSTRUCTIONS), effect.encode_queries(TEXTS, INSTRUCTIONS)
    )
    loaded.save(tmp_path / "resaved")  # a save of what the converter read: the current format
    assert all("." in kind for kind in recorded_types(tmp_path / "resaved"))
    monkeypatch.setattr(legacy, "convert", lambda folder, raw=None: pytest.fail("converter"))
    with pytest.raises(pytest.fail.Exception):
        read_spec(tmp_path / "short")


def test_every_short_name_the_converter_reads_names_a_class_of_today():
    for name, path in legacy.PART_TYPES.items():
        cls = resolve_class(path, "legacy.PART_TYPES", name)
        assert class_path(cls) == path
    for side, routes in legacy.ROUTE_TYPES.items():
        for name, path in routes.items():
            cls = resolve_class(path, "legacy.ROUTE_TYPES", name)
            assert issubclass(cls, Route) and cls.role == side and class_path(cls) == path


@pytest.mark.parametrize("path", ["os.system", "subprocess.Popen", "builtins.eval", "instemb_rag_evil.Part"])
def test_a_type_outside_the_package_is_refused_before_anything_is_imported(path, monkeypatch):
    imported = []
    monkeypatch.setattr(importlib, "import_module", lambda name, *args: imported.append(name))
    with pytest.raises(CheckpointError, match=rf"'{path}' is not a class of instemb-rag.*ARCHITECTURE"):
        route_from_config("query", {"type": path, "llm": "documents_llm"}, "somewhere/instemb_parts.json")
    assert imported == []


def test_a_folder_naming_a_foreign_part_class_is_refused_with_the_path(effect, tmp_path):
    from instemb_rag.encoder.load import load_model

    effect.save(tmp_path / "saved")
    path = tmp_path / "saved" / PARTS_FILE
    raw = json.loads(path.read_text())
    raw["parts"]["effect_map"]["type"] = "shutil.rmtree"
    path.write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match=r"part 'effect_map' type 'shutil.rmtree' is not a class of instemb-rag"):
        load_model(tmp_path / "saved", device="cpu")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("instemb_rag.encoder.composed.routes.NoSuchRoute", "names no class of this instemb-rag"),
        ("instemb_rag.encoder.composed.routes.TwoSpacesDocuments", "is not a query route"),
        ("instemb_rag.encoder.composed.gate.WeightGate", "is not a query route"),
        ("effect", "is not a class path"),
    ],
)
def test_a_route_type_that_is_no_query_route_says_so(path, message):
    with pytest.raises(CheckpointError, match=message):
        route_from_config("query", {"type": path}, "somewhere/instemb_parts.json")


# ---------------------------------------------------------------------------- a new part and route
FAKE_MODULE = "instemb_rag.encoder.composed.scaled_effect_for_tests"


class Scale(nn.Module):
    """A new module part: one learned scale (load, save, get_config_dict, state_tensors)."""

    def __init__(self, value: float = 1.0):
        super().__init__()
        self.value = nn.Parameter(torch.tensor([value]))

    def get_config_dict(self) -> dict:
        return {}

    def state_tensors(self) -> dict:
        return {"value": self.value.detach().float().cpu().contiguous()}

    def save(self, folder) -> None:
        from safetensors.torch import save_file

        save_file(self.state_tensors(), str(Path(folder) / "scale.safetensors"))

    @classmethod
    def load(cls, folder, config: dict):
        from safetensors.torch import load_file

        return cls(float(load_file(str(Path(folder) / "scale.safetensors"))["value"][0]))


@dataclasses.dataclass(frozen=True)
class ScaledEffectQueries(EffectQueries):
    """A new query route: the effect route's vectors times the Scale part (no arrangement class)."""

    part_fields = (*EffectQueries.part_fields, "scale")
    arrangement = None
    scale: str | None = None

    def encode(self, enc, queries, instructions=None, **kwargs):
        return super().encode(enc, queries, instructions, **kwargs) * float(enc.parts[self.scale].value.detach())


@pytest.fixture()
def new_module(monkeypatch):
    """Scale and ScaledEffectQueries as a module of their own inside the package (nothing else
    knows them: no table lists them)."""
    module = types.ModuleType(FAKE_MODULE)
    for cls in (Scale, ScaledEffectQueries):
        monkeypatch.setattr(cls, "__module__", FAKE_MODULE)
        setattr(module, cls.__name__, cls)
    monkeypatch.setitem(sys.modules, FAKE_MODULE, module)
    return module


def test_a_new_part_and_route_are_classes_recorded_by_their_path(effect, new_module, tmp_path, no_converter):
    from instemb_rag.encoder.composed.encoder import ComposedEncoder
    from instemb_rag.encoder.load import load_model

    route = ScaledEffectQueries(**dataclasses.asdict(effect.query_route), scale="scale")
    scaled = effect.with_parts(scale=Scale(3.0), query_route=route)
    assert type(scaled) is ComposedEncoder  # its route names no arrangement class
    scaled.save(tmp_path / "scaled")
    raw = json.loads((tmp_path / "scaled" / PARTS_FILE).read_text())
    assert raw["parts"]["scale"] == {"type": f"{FAKE_MODULE}.Scale", "path": "scale", "config": None}
    assert raw["routes"]["query"]["type"] == f"{FAKE_MODULE}.ScaledEffectQueries"
    assert "scale/scale.safetensors" in raw["files"]
    loaded = load_model(tmp_path / "scaled", device="cpu")
    assert isinstance(loaded.parts["scale"], Scale) and float(loaded.parts["scale"].value.detach()) == 3.0
    expected = effect.encode_queries(TEXTS, INSTRUCTIONS) * 3.0
    np.testing.assert_allclose(loaded.encode_queries(TEXTS, INSTRUCTIONS), expected, atol=1e-6)


# ---------------------------------------------------------------------------- the committed folders
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda path: path.name)
def test_every_committed_folder_is_in_the_current_format(folder, no_converter):
    """A parts folder in format 3 with class paths (read here with the converter refused, each
    type imported), or a symmetric checkpoint alone (its LLM is the model)."""
    from instemb_rag.encoder.composed.parts import module_class

    spec = read_spec(folder)
    if not (folder / PARTS_FILE).is_file():
        assert spec.is_symmetric, f"{folder}: a checkpoint that names a sentence encoder (an older two-tower)"
        return
    raw = json.loads((folder / PARTS_FILE).read_text())
    assert raw["format_version"] == FORMAT_VERSION and uses_class_paths(raw), folder
    for side in ("query", "document"):
        route_from_config(side, spec.routes[side], str(folder))
    for name, entry in spec.parts.items():
        if not (entry.is_llm or entry.is_sentence_encoder):
            module_class(entry, str(folder), name)


def test_the_shipped_default_names_no_folder_of_the_run_that_trained_it(no_converter):
    training = read_spec(SHIPPED).training
    assert training.get("config", {}).get("training", {}).get("output_dir") is None
    assert training.get("steps") and training.get("data", {}).get("data_sha256")  # what documents the training


@pytest.mark.slow
def test_the_shipped_default_loads_without_the_converter(no_converter):
    from instemb_rag.encoder.composed.effect import InstructionEffectEncoder
    from instemb_rag.encoder.load import load_model

    recorded = json.loads((ROOT / "tests" / "data" / "shipped_before_issue62.json").read_text())
    encoder = load_model(None, device="cpu")
    assert isinstance(encoder, InstructionEffectEncoder)
    assert encoder.fingerprint == recorded["instemb_rag/default_checkpoint"]["identity"]["fingerprint"]
