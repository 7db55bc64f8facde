"""Geometry distillation (training/geometry.py) on a tiny Llama student and a tiny BERT teacher:
the frozen-prefix cache is exact, the head is saved and loaded, a resumed run equals an
uninterrupted one and reuses the cache without rebuilding it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import build_tiny_teacher_folder
from testing import build_tiny_model_folder

from instemb_rag.errors import InstEmbError

pytest.importorskip("sentence_transformers")

QUERIES = [
    ("light tent for rain", "focus on durability", "g1", "p1"),
    ("light tent for rain", "focus on the zipper and pole", "g1", "p2"),
    ("compact stove", "a camp trip", None, "p3"),
    ("heavy backpack frame", None, None, None),
    ("warm nylon tent", "a great review", "g2", "p5"),
    ("warm nylon tent", "cold night", "g2", "p6"),
]
PASSAGES = [
    ("p1", "the tent is light and durable in rain and wind", "g1"),
    ("p2", "the pole and zipper of the tent floor", "g1"),
    ("p3", "the gas stove burner is compact for a camp trip", None),
    ("p4", "this backpack frame and strap are heavy but durable", None),
    ("p5", "a great review of a warm nylon tent", "g2"),
    ("p6", "a cold night in the nylon tent with poor water", "g2"),
]


def write_items(path: Path) -> Path:
    rows = [
        {"id": f"q{n}", "role": "query", "text": t, "instruction": i, "group": g, "positive": p, "source": "test"}
        for n, (t, i, g, p) in enumerate(QUERIES)
    ]
    rows += [
        {"id": pid, "role": "passage", "text": t, "instruction": None, "group": g, "positive": None, "source": "test"}
        for pid, t, g in PASSAGES
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    root = tmp_path_factory.mktemp("geometry")
    return {
        "student": build_tiny_model_folder(root / "student", layers=3),
        "teacher": build_tiny_teacher_folder(root / "teacher"),
        "items": write_items(root / "items.jsonl"),
    }


def geometry_config(setting, tmp_path: Path, **overrides):
    from instemb_rag.training.args import load_config

    values = {
        "model.model_name_or_path": str(setting["student"]),
        "model.max_length": 48,
        "model.lookahead_length": 2,
        "model.trainable_top_layers": 1,
        "model.train_lookahead": False,
        "model.lora_rank": 4,
        "geometry.teacher_encoder": str(setting["teacher"]),
        "geometry.texts_file": str(setting["items"]),
        "geometry.prefix_cache_dir": str(tmp_path / "prefix"),
        "geometry.teacher_embedding_dir": str(tmp_path / "teacher_cache"),
        "geometry.prefix_cache_dtype": "float32",
        "geometry.relational_weight": 0.5,
        "geometry.group_weight": 0.5,
        "training.output_dir": str(tmp_path / "run"),
        "training.batch_size": 6,
        "training.max_steps": 4,
        "training.save_steps": 2,
        "training.save_total_limit": 5,
        "training.warmup_steps": 1,
        "training.learning_rate": 1e-2,
        "training.contrastive_weight": 0.0,
        "training.distill_weight": 0.0,
        "training.show_progress": False,
        **overrides,
    }
    return load_config(None, values)


def test_prefix_cache_gives_the_full_forward_losses_and_gradients(setting, tmp_path):
    from instemb_rag.datasets.embedding_items import read_items
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.training.geometry.terms import student_embeddings
    from instemb_rag.training.prefix_cache import PrefixCache
    from instemb_rag.training.student import load_student, make_trainable

    config = geometry_config(setting, tmp_path)
    student = load_student(config, torch.device("cpu"))
    parts = make_trainable(student, config)
    torch.manual_seed(0)
    student = student.with_projection(Projection(student.hidden_size, 24))
    items = read_items(setting["items"])
    cache = PrefixCache(tmp_path / "prefix", student, 1, torch.float32)
    cache.build([item.student_input for item in items], log=lambda _: None)
    batch = list(range(len(items)))
    target = torch.randn(len(items), 24)

    def loss_and_grads(embeddings):
        loss = (embeddings - target).pow(2).mean()
        grads = torch.autograd.grad(loss, list(parts.named.values()))
        return loss.detach(), grads

    cached_loss, cached_grads = loss_and_grads(student_embeddings(student, cache, items, batch))
    for side in ("left", "right"):  # the full pass pools from the attention mask on either side
        ids = [student.build_ids(*item.student_input) for item in items]
        full_loss, full_grads = loss_and_grads(student(student.collate(ids, padding_side=side)))
        assert torch.allclose(cached_loss, full_loss, atol=1e-6)
        for cached, full in zip(cached_grads, full_grads):
            assert torch.allclose(cached, full, atol=1e-5, rtol=1e-4)


def test_geometry_run_saves_a_headed_checkpoint(setting, tmp_path):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.training.trainer import train

    final = train(geometry_config(setting, tmp_path), log=lambda _: None)
    encoder = InstEmbEncoder.from_pretrained(final, device="cpu")
    assert encoder.dimension == 24 and encoder.hidden_size == 64
    vectors = encoder.encode_queries(["light tent for rain"] * 2, ["focus on durability", "cold night"])
    assert vectors.shape == (2, 24)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    bare = encoder.with_projection(None)
    assert bare.dimension == 64 and bare.fingerprint != encoder.fingerprint
    # The saved head is what shapes the embedding: a checkpoint without its head file refuses to load.
    (final / "projection.safetensors").unlink()
    with pytest.raises(InstEmbError, match="projection.safetensors"):
        InstEmbEncoder.from_pretrained(final, device="cpu")


def test_resumed_geometry_run_equals_uninterrupted_and_reuses_the_cache(setting, tmp_path):
    from safetensors.torch import load_file

    from instemb_rag.training.trainer import train

    whole = train(geometry_config(setting, tmp_path / "a"), log=lambda _: None)
    # An interrupted run: only its step-2 checkpoint survived (same prefix cache folder).
    resumed_dir = tmp_path / "b" / "run"
    resumed_dir.mkdir(parents=True)
    shutil.copytree(tmp_path / "a" / "run" / "checkpoint-2", resumed_dir / "checkpoint-2")
    shutil.copytree(tmp_path / "a" / "prefix", tmp_path / "b" / "prefix")
    shutil.copytree(tmp_path / "a" / "teacher_cache", tmp_path / "b" / "teacher_cache")
    logged: list[str] = []
    resumed = train(geometry_config(setting, tmp_path / "b", **{"training.resume": True}), log=logged.append)
    assert not any("to add under" in line for line in logged), logged  # no prefix state computed again
    for name in ("projection.safetensors", "lora/adapter_model.safetensors"):
        first, second = load_file(str(whole / name)), load_file(str(resumed / name))
        assert first.keys() == second.keys()
        for key in first:
            assert torch.allclose(first[key], second[key], atol=1e-6), (name, key)
    history = json.loads((resumed_dir / "run_info.json").read_text())
    assert history["resumed_at_step"] == 2


def test_geometry_config_is_checked_before_any_work(setting, tmp_path):
    with pytest.raises(InstEmbError, match="texts_file"):
        geometry_config(setting, tmp_path, **{"geometry.texts_file": None})
    with pytest.raises(InstEmbError, match="train_lookahead"):
        geometry_config(setting, tmp_path, **{"model.train_lookahead": True})


def test_items_file_errors_name_the_line_and_field(tmp_path):
    from instemb_rag.datasets.embedding_items import read_items

    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "a", "role": "answer", "text": "x"}) + "\n")
    with pytest.raises(InstEmbError, match=r"line 1: role must be one of"):
        read_items(path)
    with pytest.raises(InstEmbError, match="build-distill-texts"):
        read_items(tmp_path / "missing.jsonl")


def test_batches_keep_groups_together_and_cover_every_item():
    from instemb_rag.datasets.embedding_items import EmbeddingItem
    from instemb_rag.training.batch_order import item_epoch

    items = [EmbeddingItem(f"i{n}", "passage", "x", None, f"g{n // 3}" if n < 9 else None, None) for n in range(20)]
    items[19] = EmbeddingItem("i19", "query", "q", "an instruction", None, "i12")  # a pair: query and its positive
    lengths = [n % 7 + 1 for n in range(20)]
    batches = item_epoch(items, lengths, batch_size=6, seed=1, epoch=0)
    assert sorted(i for batch in batches for i in batch) == list(range(20))
    for group in ("g0", "g1", "g2"):
        holding = {b for b, batch in enumerate(batches) for i in batch if items[i].group == group}
        assert len(holding) == 1
    assert any(12 in batch and 19 in batch for batch in batches)
    assert batches == item_epoch(items, lengths, batch_size=6, seed=1, epoch=0)
    assert batches != item_epoch(items, lengths, batch_size=6, seed=1, epoch=1)


def test_order_walks_epochs_of_different_batch_counts():
    from instemb_rag.datasets.embedding_items import EmbeddingItem
    from instemb_rag.training.batch_order import BatchOrder, item_epoch

    # Groups of uneven size pack into a different number of batches from one epoch to the next.
    items = [EmbeddingItem(f"i{n}", "passage", "x", None, f"g{n % 13}" if n % 3 else None, None) for n in range(90)]
    lengths = [n % 11 + 1 for n in range(90)]
    epochs = [item_epoch(items, lengths, batch_size=8, seed=3, epoch=e) for e in range(4)]
    assert len({len(batches) for batches in epochs}) > 1  # the case this test is about
    order = BatchOrder.items(items, lengths, batch_size=8, seed=3)
    flat = [batch for batches in epochs for batch in batches]
    assert [order.step(step) for step in range(len(flat))] == flat


CONTRAST_RECORDS = [
    # one claim, two stances: the same text under opposite instructions wants different passages
    (
        "tents keep rain out",
        "find a passage that supports this",
        "the tent stayed dry in heavy rain",
        "find a passage that refutes this",
        "c1",
    ),
    (
        "tents keep rain out",
        "find a passage that refutes this",
        "water leaked through the tent seams",
        "find a passage that supports this",
        "c1",
    ),
    (
        "stoves are compact",
        "find a passage that supports this",
        "the stove folds to the size of a fist",
        "find a passage that refutes this",
        "c2",
    ),
    (
        "stoves are compact",
        "find a passage that refutes this",
        "the stove is bulky and heavy to carry",
        "find a passage that supports this",
        "c2",
    ),
    ("nylon is warm", "what follows from this", "the fabric holds heat", None, "c3"),
    ("nylon is warm", "what cannot be true if this is", "the fabric is always cold", None, "c3"),
]


def write_contrast_records(path: Path) -> Path:
    rows = [
        {"text": t, "instruction": i, "output": o, "negative_instruction": n, "group": g, "source": f"stance_test:{k}"}
        for k, (t, i, o, n, g) in enumerate(CONTRAST_RECORDS)
    ]
    rows.append({"text": "a camp trip", "instruction": None, "output": "bring a stove", "source": "other_set:0"})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def contrast_overrides(tmp_path: Path) -> dict:
    return {
        "geometry.contrast_file": str(write_contrast_records(tmp_path / "contrast.jsonl")),
        "geometry.contrast_sets": ["stance_test"],
        "geometry.contrast_batch_size": 4,
        "geometry.contrast_weight": 1.0,
        "geometry.anchor_weight": 1.0,
        "geometry.train_input_weight": 0.25,
    }


def test_anchor_is_the_starting_checkpoint_and_contrast_ranks_the_shipped_blend(setting, tmp_path):
    from instemb_rag.datasets.embedding_items import read_items
    from instemb_rag.encoder.modules.projection import Projection
    from instemb_rag.training.geometry.objective import _anchors, _contrast_batches
    from instemb_rag.training.geometry.terms import compute_terms, prepare_prefix_cache, shipped_head
    from instemb_rag.training.student import load_student, make_trainable

    config = geometry_config(setting, tmp_path, **contrast_overrides(tmp_path))
    items = read_items(setting["items"])
    encoder = load_student(config, torch.device("cpu"))
    make_trainable(encoder, config)
    contrast = _contrast_batches(config)
    assert {r.source.split(":")[0] for r in contrast.records} == {"stance_test"}  # other sets left out
    cache = prepare_prefix_cache(config, encoder, items, lambda _: None, contrast.inputs())
    lengths = [cache.index[input_key_of(item)][2] for item in items]
    (tmp_path / "run").mkdir()
    info = {"data_sha256": "x"}
    anchors = _anchors(encoder, cache, items, lengths, info, tmp_path / "run", lambda _: None)
    assert anchors.shape == (len(items), 64)
    head = Projection(64, 24)
    targets = torch.randn(len(items), 24)
    terms = compute_terms(
        encoder,
        head,
        shipped_head(head, config),
        cache,
        items,
        [0, 1, 6, 7],
        targets,
        config,
        anchors,
        contrast.step(0),
    )
    # Before any step the student is the starting LLM: the anchor has nothing to pull.
    assert float(terms["anchor"].detach()) == pytest.approx(0.0, abs=1e-6)
    assert float(terms["contrast"].detach()) > 0 and terms["contrast"].requires_grad
    # The anchor targets are kept for the run; other inputs in the same folder are refused.
    again = _anchors(encoder, cache, items, lengths, info, tmp_path / "run", lambda _: None)
    assert torch.equal(again, anchors)
    with pytest.raises(InstEmbError, match="other inputs"):
        _anchors(encoder, cache, items, lengths, {"data_sha256": "y"}, tmp_path / "run", lambda _: None)


def input_key_of(item):
    from instemb_rag.training.prefix_cache import input_key

    return input_key(*item.student_input)


def test_contrast_run_learns_the_stance_and_resumes_batch_for_batch(setting, tmp_path):
    from safetensors.torch import load_file

    from instemb_rag.training.trainer import train

    # All six records each step (one batch an epoch), so the contrast term of step 1 and step 6 compare.
    overrides = {
        **contrast_overrides(tmp_path),
        "geometry.contrast_batch_size": 6,
        "training.max_steps": 6,
        "training.save_steps": 3,
    }
    whole = train(geometry_config(setting, tmp_path / "a", **overrides), log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "a" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all("contrast" in row and "anchor" in row for row in rows)
    assert rows[-1]["contrast"] < rows[0]["contrast"]  # the labelled stance is being learned
    resumed_dir = tmp_path / "b" / "run"
    resumed_dir.mkdir(parents=True)
    shutil.copytree(tmp_path / "a" / "run" / "checkpoint-3", resumed_dir / "checkpoint-3")
    shutil.copy(tmp_path / "a" / "run" / "anchor_targets.safetensors", resumed_dir)
    resumed = train(
        geometry_config(setting, tmp_path / "b", **overrides, **{"training.resume": True}), log=lambda _: None
    )
    first, second = load_file(str(whole / "projection.safetensors")), load_file(str(resumed / "projection.safetensors"))
    for key in first:
        assert torch.allclose(first[key], second[key], atol=1e-6), key


def test_contrast_order_keeps_groups_together_and_errors_name_the_fix(tmp_path):
    from instemb_rag.training.geometry.contrast import load_contrast_order

    path = write_contrast_records(tmp_path / "records.jsonl")
    assert len(load_contrast_order(str(path), None, None, 2, seed=3).records) == 7  # None: every set
    order = load_contrast_order(str(path), ["stance_test"], None, 2, seed=3)
    assert order.per_epoch == 3 and all(len(order.step(s)) == 2 for s in range(7))
    again = load_contrast_order(str(path), ["stance_test"], None, 2, seed=3)
    assert [r.output for r in order.step(4)] == [r.output for r in again.step(4)]  # a resumed run reads the same
    groups = [r.group for s in range(order.per_epoch) for r in order.step(s)]
    for group in ("c1", "c2", "c3"):
        where = [n for n, g in enumerate(groups) if g == group]
        assert where == list(range(where[0], where[0] + 2)), groups  # a group's records sit together
    with pytest.raises(InstEmbError, match="no_such_set"):
        load_contrast_order(str(path), ["no_such_set"], None, 2, 0)
    with pytest.raises(InstEmbError, match="contrast_batch_size"):
        load_contrast_order(str(path), ["stance_test"], 2, 4, 0)  # one whole group of two fits


def test_contrast_settings_are_checked_before_any_work(setting, tmp_path):
    with pytest.raises(InstEmbError, match="contrast_file and contrast_weight"):
        geometry_config(setting, tmp_path, **{"geometry.contrast_weight": 1.0})
    with pytest.raises(InstEmbError, match="train_input_weight"):
        geometry_config(setting, tmp_path, **{"geometry.train_input_weight": 1.0})
