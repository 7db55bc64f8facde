"""Model folders in every layout written before issue 54's one folder of parts, written here by
hand (JSON and safetensors), never by the code under test: what a user's disk holds.

    symmetric          instemb_config.json, lookahead.safetensors, adapted.safetensors
    blended            the same with a projection head kept beside the pooled state (input_weight)
    two_tower          instemb_config.json naming a sentence encoder (the tower) and a head into
                       its space; the tower folder copied in as document_tower/
    two_tower_anchored the same, queries anchored on the tower's vector (query_anchor: true)
    two_spaces         instemb_parts.json (kind two_spaces): documents_llm/, query_llm/,
                       tower_head/, gate.safetensors, document_tower/
    two_spaces_fixed   the untrained mix: documents_llm/ and the sentence encoder only
    effect             instemb_parts.json (kind instruction_effect): documents_llm/,
                       effect_map.safetensors, document_tower/
    effect_identity    the untrained arrangement: documents_llm/ and the sentence encoder only

Each weight is drawn from its own seeded generator, so a layout is the same folder on every run
(tests/encoder/test_layouts_unchanged.py compares its vectors with those recorded before the move).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

LAYOUTS = (
    "symmetric",
    "blended",
    "two_tower",
    "two_tower_anchored",
    "two_spaces",
    "two_spaces_fixed",
    "effect",
    "effect_identity",
)
LOOKAHEAD = 2
HIDDEN = 64  # tests/testing.py's tiny Llama
TOWER_DIMENSION = 32  # and its tiny sentence encoder


def _random(seed: int, *shape: int, scale: float = 0.1):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * scale).contiguous()


def _save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    save_file(tensors, str(path))


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2))


def _template(base: Path) -> dict:
    from transformers import AutoTokenizer

    from instemb_rag.encoder.modules.template import PromptTemplate

    return PromptTemplate.for_tokenizer(AutoTokenizer.from_pretrained(base)).get_config_dict()


def _head(in_features: int, out_features: int, seed: int, **extra) -> tuple[dict, dict]:
    config = {"in_features": in_features, "out_features": out_features, "bias": True, "normalize_input": True}
    tensors = {"weight": _random(seed, out_features, in_features), "bias": _random(seed + 1, out_features)}
    return {**config, **extra}, tensors


def llm_checkpoint(folder: Path, base: Path, seed: int, projection=None, tower: dict | None = None) -> Path:
    """A symmetric InstEmb checkpoint (format 1) over the tiny Llama ``base``; ``projection``
    (config, tensors) adds a head, ``tower`` a two-tower entry."""
    import torch

    from instemb_rag.encoder.backbone import weights_fingerprint

    folder.mkdir(parents=True, exist_ok=True)
    _save({"vectors": _random(seed, LOOKAHEAD, HIDDEN, scale=0.02)}, folder / "lookahead.safetensors")
    _save({"model.norm.weight": torch.ones(HIDDEN) + _random(seed + 1, HIDDEN)}, folder / "adapted.safetensors")
    files = ["lookahead.safetensors", "adapted.safetensors"]
    config = {
        "format_version": 1,
        "base_model": str(base),
        "base_fingerprint": weights_fingerprint(base),
        "template": _template(base),
        "lookahead_length": LOOKAHEAD,
        "pooling": "daap",
        "max_length": 64,
        "training": {"written_by": "tests/legacy_layouts.py"},
        "files": files,
        "trained": ["model.norm.weight"],
        "projection": None,
        "document_tower": tower,
    }
    if projection is not None:
        config["projection"], tensors = projection
        _save(tensors, folder / "projection.safetensors")
    _write_json(folder / "instemb_config.json", config)
    return folder


def _tower_entry(folder: Path, tower_dir: Path, **extra) -> dict:
    from instemb_rag.teachers.fingerprint import folder_fingerprint

    shutil.copytree(tower_dir, folder / "document_tower", ignore=shutil.ignore_patterns(".*"))
    fingerprint = folder_fingerprint(folder / "document_tower")
    return {"encoder": "document_tower", "fingerprint": fingerprint, "dimension": TOWER_DIMENSION, **extra}


def _parts(folder: Path, kind: str, tower: dict, **fields) -> None:
    _write_json(
        folder / "instemb_parts.json",
        {"format_version": 1, "kind": kind, "document_tower": tower, **fields, "training": {}},
    )


def write_layout(name: str, folder: Path, base: Path, tower_dir: Path) -> Path:
    """Write layout ``name`` (LAYOUTS) into ``folder`` (created), over the tiny Llama ``base`` and
    the tiny sentence encoder ``tower_dir``."""
    if name == "symmetric":
        return llm_checkpoint(folder, base, 10)
    if name == "blended":
        return llm_checkpoint(folder, base, 20, projection=_head(HIDDEN, TOWER_DIMENSION, 21, input_weight=0.5))
    if name in ("two_tower", "two_tower_anchored"):
        folder.mkdir(parents=True)
        anchor = {"query_anchor": True} if name == "two_tower_anchored" else {}
        entry = _tower_entry(folder, tower_dir, **anchor)
        return llm_checkpoint(folder, base, 30, projection=_head(HIDDEN, TOWER_DIMENSION, 31), tower=entry)
    folder.mkdir(parents=True)
    entry = _tower_entry(folder, tower_dir)
    llm_checkpoint(folder / "documents_llm", base, 40)
    if name == "two_spaces":
        llm_checkpoint(folder / "query_llm", base, 41)
        head_config, head_tensors = _head(HIDDEN, TOWER_DIMENSION, 42)
        (folder / "tower_head").mkdir()
        _save(head_tensors, folder / "tower_head" / "projection.safetensors")
        _save({"weight": _random(43, 1, HIDDEN, scale=1.0), "bias": _random(44, 1)}, folder / "gate.safetensors")
        gate = {"in_features": HIDDEN, "initial_weight": 0.6}
        _parts(folder, "two_spaces", entry, query_llm=True, tower_head=head_config, gate=gate, llm_weight=0.6)
    elif name == "two_spaces_fixed":
        _parts(folder, "two_spaces", entry, query_llm=False, tower_head=None, gate=None, llm_weight=0.7)
    elif name in ("effect", "effect_identity"):
        effect_map = None
        if name == "effect":
            rank = 4
            tensors = {
                "down.weight": _random(50, rank, HIDDEN, scale=0.3),
                "up.weight": _random(51, HIDDEN, rank, scale=0.3),
                "gain.weight": _random(52, 1, 2 * HIDDEN, scale=0.3),
                "gain.bias": _random(53, 1),
            }
            _save(tensors, folder / "effect_map.safetensors")
            effect_map = {"dimension": HIDDEN, "rank": rank}
        _parts(
            folder,
            "instruction_effect",
            entry,
            effect_map=effect_map,
            instruction_strength=2.0,
            reference_instruction="Find relevant passages.",
        )
    else:
        raise ValueError(f"unknown layout {name!r}")
    return folder


# What each layout embeds: documents, plain queries, instructed queries, and the query-time knob.
DOCUMENTS = [
    "the tent is light and durable in rain and wind",
    "the gas stove burner is compact for a camp trip",
    "this backpack frame and strap are heavy but durable",
]
QUERIES = ["light tent for rain", "compact stove", "heavy backpack frame"]
INSTRUCTIONS = ["focus on durability", None, "focus on packed size and weight"]


def embeddings(encoder) -> dict:
    """name -> float32 array: what the recording and the test compare."""
    vectors = {
        "documents": encoder.encode_documents(DOCUMENTS),
        "queries": encoder.encode_queries(QUERIES),
        "instructed": encoder.encode_queries(QUERIES, INSTRUCTIONS),
        "one_instruction": encoder.encode_queries(QUERIES[:1], INSTRUCTIONS[:1]),
    }
    if getattr(encoder, "takes_llm_weight", False):
        vectors["knob"] = encoder.encode_queries(QUERIES, INSTRUCTIONS, llm_weight=0.3)
    if getattr(encoder, "takes_instruction_strength", False):
        vectors["knob"] = encoder.encode_queries(QUERIES, INSTRUCTIONS, instruction_strength=4.0)
    return vectors
