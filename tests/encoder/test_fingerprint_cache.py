"""The LLM's fingerprint remembered by its files' identity (hashing.py's FingerprintCache,
encoder/weights_origin.py): a second load reads it instead of hashing every weight, a changed file
or an in-place change of the weights takes it afresh, and a damaged cache file is ignored and
rewritten. Tiny models built here; each test has an INSTEMB_HOME of its own.

A cache hit is told apart from a fresh hash by writing another (well-formed) fingerprint into the
entry: a load that answers with it read the cache, one that answers with the real one hashed."""

from __future__ import annotations

import json
import os
import time

import pytest
import torch
from testing import build_tiny_model_folder

from instemb_rag import InstEmbEncoder, hashing
from instemb_rag.encoder.backbone import weights_fingerprint

PLANTED = "0123456789abcdef0123456789abcdef"


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    # The model folders are written by the test a moment before they load: remembered all the same
    # (test_a_file_changed_just_now_is_not_remembered checks the rule this lifts).
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 0.0)
    return tmp_path / "home"


@pytest.fixture()
def model_dir(tmp_path):
    return build_tiny_model_folder(tmp_path / "tiny")


def load(folder) -> InstEmbEncoder:
    return InstEmbEncoder.from_pretrained(folder, device="cpu", lookahead_length=4, max_length=64)


def cache_file(home):
    return home / hashing.FINGERPRINT_CACHE_FILE


def entries(home) -> dict:
    return json.loads(cache_file(home).read_text())["entries"]


def plant(home, fingerprint: str, only: str | None = None) -> None:
    """Write ``fingerprint`` into every entry (or the one whose value is ``only``)."""
    content = json.loads(cache_file(home).read_text())
    for entry in content["entries"].values():
        if only is None or entry["fingerprint"] == only:
            entry["fingerprint"] = fingerprint
    cache_file(home).write_text(json.dumps(content))


def test_a_second_load_reads_the_fingerprint_it_remembered(home, model_dir):
    first = load(model_dir).fingerprint
    assert len(entries(home)) == 2  # the backbone's weight files, and the encoder's
    assert load(model_dir).fingerprint == first  # the remembered value is the hashed one
    plant(home, PLANTED, only=first)
    assert load(model_dir).fingerprint == PLANTED  # read, not hashed


def test_other_settings_are_another_entry(home, model_dir):
    first = load(model_dir).fingerprint
    plant(home, PLANTED, only=first)
    other = InstEmbEncoder.from_pretrained(model_dir, device="cpu", lookahead_length=4, max_length=32)
    assert other.fingerprint not in (PLANTED, first)


def test_a_changed_weight_file_is_hashed_afresh(home, model_dir):
    first = load(model_dir).fingerprint
    plant(home, PLANTED)
    weights = model_dir / "model.safetensors"
    # The same bytes, touched: another identity, so the entry no longer applies.
    later = time.time_ns() + 5_000_000_000
    os.utime(weights, ns=(later, later))
    assert load(model_dir).fingerprint == first
    # Other bytes: another fingerprint.
    build_tiny_model_folder(model_dir, seed=1)
    assert load(model_dir).fingerprint != first


def test_weights_changed_in_memory_are_hashed_as_they_are(home, model_dir):
    encoder = load(model_dir)
    first = encoder.fingerprint
    plant(home, PLANTED, only=first)
    with torch.no_grad():
        encoder.model.model.norm.weight.add_(1.0)
    encoder.eval()  # the fingerprint is taken afresh (model.py: train())
    changed = encoder.fingerprint
    assert changed not in (first, PLANTED)
    with torch.no_grad():
        encoder.model.model.norm.weight.sub_(1.0)
    encoder.eval()
    assert encoder.fingerprint == first  # hashed (the weights are as loaded again, but not as read)


@pytest.mark.parametrize(
    "damage",
    ["{not json", "", "[]", '{"format": 99, "entries": {}}', '{"format": 1, "entries": []}', "\udcff"],
)
def test_a_damaged_cache_file_is_ignored_and_rewritten(home, model_dir, damage):
    home.mkdir(parents=True, exist_ok=True)
    cache_file(home).write_bytes(damage.encode("utf-8", "surrogateescape"))
    first = load(model_dir).fingerprint
    assert first in {entry["fingerprint"] for entry in entries(home).values()}
    assert load(model_dir).fingerprint == first


def test_a_wrong_entry_is_not_trusted(home, model_dir):
    first = load(model_dir).fingerprint
    plant(home, "not a fingerprint!", only=first)  # not what this module writes
    assert load(model_dir).fingerprint == first
    content = json.loads(cache_file(home).read_text())
    for entry in content["entries"].values():
        entry["files"][0][1] += 1  # an entry whose files are not these (a key it does not match)
        entry["fingerprint"] = PLANTED
    cache_file(home).write_text(json.dumps(content))
    assert load(model_dir).fingerprint == first


def test_a_checkpoint_remembers_its_own_files(home, model_dir, tmp_path):
    encoder = load(model_dir)
    checkpoint = tmp_path / "checkpoint"
    encoder.save(checkpoint, trained=["model.norm.weight"])
    loaded = InstEmbEncoder.from_pretrained(checkpoint, device="cpu")
    assert loaded.fingerprint == encoder.fingerprint  # as saved
    plant(home, PLANTED, only=encoder.fingerprint)
    assert InstEmbEncoder.from_pretrained(checkpoint, device="cpu").fingerprint == PLANTED
    # Saved again with another norm: new files (the folder is swapped in whole), another fingerprint.
    with torch.no_grad():
        encoder.model.model.norm.weight.mul_(2.0)
    encoder.save(checkpoint, trained=["model.norm.weight"])
    assert InstEmbEncoder.from_pretrained(checkpoint, device="cpu").fingerprint not in (PLANTED, loaded.fingerprint)


def test_backbone_weights_fingerprint_is_remembered_too(home, model_dir):
    first = weights_fingerprint(model_dir)
    plant(home, PLANTED, only=first)
    assert weights_fingerprint(model_dir) == PLANTED
    cache_file(home).write_text("garbage")
    assert weights_fingerprint(model_dir) == first


def test_a_read_only_home_still_answers(home, model_dir):
    home.mkdir(parents=True, exist_ok=True)
    cache_file(home).mkdir()  # a folder where the file would go: neither read nor written
    assert load(model_dir).fingerprint == load(model_dir).fingerprint


def test_a_file_changed_just_now_is_not_remembered(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"w")
    identity = hashing.file_identity(path)
    changed = max(identity[2], identity[3])
    assert not hashing.settled([identity], now_ns=changed + 1_000_000)
    assert hashing.settled([identity], now_ns=changed + int(hashing.SETTLED_SECONDS * 1e9))
    cache = hashing.FingerprintCache(tmp_path / "cache.json")
    assert cache.fingerprint([path], {}, lambda: "a" * 32) == "a" * 32
    assert not (tmp_path / "cache.json").exists()  # too fresh to be remembered
