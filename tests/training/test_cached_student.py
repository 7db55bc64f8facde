"""The main trainer over the frozen-prefix cache (model.frozen_prefix): exact, resumable, refused
where it cannot apply; length-bucketed data order; training threads."""

import json
import random
import shutil

import pytest
import torch
from helpers import tiny_train_config
from safetensors.torch import load_file
from testing import build_tiny_model_folder

from instemb_rag.datasets.records import TrainingRecord, write_records
from instemb_rag.errors import InstEmbError

WORDS = "the tent is light and durable for a camp trip in cold rain with water stove".split()
# Every view, the retrieval term and its two kinds of hard negative; no randomness (view dropout
# 0), so a cached run and a full run must agree to rounding.
EXACT = {
    "model.train_lookahead": False,
    "model.frozen_prefix_dtype": "float32",
    "training.views": ["student_input", "student_input_dropout", "teacher_input", "student_output"],
    "training.view_dropout": 0.0,
    "training.retrieval_weight": 1.0,
    "training.save_total_limit": 5,
}


def _phrase(rng, low, high):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    rng = random.Random(1)
    records = [
        TrainingRecord(
            text=_phrase(rng, 4, 14),
            instruction=rng.choice(["what is the weight ?", "does it do well in rain ?", None]),
            output=_phrase(rng, 2, 8),
            negative_instruction="is it heavy ?" if n % 3 == 0 else None,
            negative_outputs=[_phrase(rng, 2, 6)] if n % 4 == 1 else [],
        )
        for n in range(16)
    ]
    root = tmp_path_factory.mktemp("cached_student")
    write_records(root / "train.jsonl", records)
    return {"model": build_tiny_model_folder(root / "model", layers=3), "train": root / "train.jsonl"}


def _config(setting, tmp_path, folder: str, **overrides):
    values = {"training.frozen_prefix_dir": str(tmp_path / "prefix"), **EXACT, **overrides}
    return tiny_train_config(setting["model"], setting["train"], tmp_path / folder, **values)


def _metrics(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def _trained(folder, step):
    return load_file(str(folder / f"checkpoint-{step}" / "trainer_params.safetensors"))


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_cached_and_full_runs_give_the_same_losses_and_gradients(setting, tmp_path, lora_rank):
    from instemb_rag.training.trainer import train

    common = {"model.lora_rank": lora_rank, "training.max_steps": 4, "training.save_steps": 4}
    train(_config(setting, tmp_path, "full", **common))
    train(_config(setting, tmp_path, "cached", **{"model.frozen_prefix": True, **common}))
    full, cached = _metrics(tmp_path / "full"), _metrics(tmp_path / "cached")
    assert len(full) == len(cached) == 4
    for one, other in zip(full, cached):
        for term in ("loss", "distill", "contrastive", "retrieval", "grad_norm"):
            assert other[term] == pytest.approx(one[term], rel=1e-4, abs=1e-5), (one["step"], term)
    full_params, cached_params = _trained(tmp_path / "full", 4), _trained(tmp_path / "cached", 4)
    assert full_params.keys() == cached_params.keys() and full_params
    # Adam divides each gradient entry by its own running scale, so a rounding-sized difference
    # in a near-zero gradient entry can move that weight by a visible fraction of the learning
    # rate (1e-3 here; one entry of 8192 moved 1.6e-5 after 4 steps). A wrong cached state would
    # move every weight by up to lr per step, so 1e-4 still tells exact from wrong; the losses
    # and gradient norms above are compared at 1e-5.
    for name in full_params:
        assert torch.allclose(full_params[name], cached_params[name], atol=1e-4), name
    assert (tmp_path / "prefix").is_dir() and not (tmp_path / "full" / "prefix_cache").exists()


def test_training_on_from_a_lora_checkpoint_cached_equals_full(setting, tmp_path):
    """The recipes that can use the cache train on from a checkpoint whose LoRA adapter runs live."""
    from instemb_rag.training.trainer import train

    lora = {"model.lora_rank": 4, "training.max_steps": 2, "training.save_steps": 2}
    first = train(_config(setting, tmp_path, "first", **{**lora, "training.learning_rate": 5e-2}))
    again = {**lora, "model.model_name_or_path": str(first)}
    train(_config(setting, tmp_path, "full", **again))
    train(_config(setting, tmp_path, "cached", **{**again, "model.frozen_prefix": True}))
    for one, other in zip(_metrics(tmp_path / "full"), _metrics(tmp_path / "cached")):
        assert other["loss"] == pytest.approx(one["loss"], rel=1e-4, abs=1e-5)
        assert other["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4, abs=1e-5)
    full_params, cached_params = _trained(tmp_path / "full", 2), _trained(tmp_path / "cached", 2)
    for name in full_params:
        assert torch.allclose(full_params[name], cached_params[name], atol=1e-5), name


def test_each_loss_term_and_its_gradients_match_the_full_pass(setting, tmp_path):
    from instemb_rag.datasets.records import read_records
    from instemb_rag.training.batch_order import BatchOrder
    from instemb_rag.training.lookahead.cached_student import prepare_student
    from instemb_rag.training.lookahead.frozen_llm import compute_llm_targets
    from instemb_rag.training.lookahead.losses import compute_losses
    from instemb_rag.training.parallel import SINGLE_PROCESS
    from instemb_rag.training.student import load_student, make_trainable

    config = _config(setting, tmp_path, "run", **{"model.frozen_prefix": True})
    records = read_records(setting["train"])
    encoder = load_student(config, torch.device("cpu"))
    targets = compute_llm_targets(encoder, records[:8], 4)
    parts = make_trainable(encoder, config)
    order = BatchOrder.records([None] * len(records), 8, 1, 0)
    student = prepare_student(config, encoder, records, order, {}, SINGLE_PROCESS, log=lambda _: None)
    params = list(parts.named.values())

    def terms_and_grads(runner):
        terms = compute_losses(encoder, records[:8], targets, config, student=runner)
        return {k: v.detach() for k, v in terms.items()}, torch.autograd.grad(terms["loss"], params)

    full_terms, full_grads = terms_and_grads(None)
    cached_terms, cached_grads = terms_and_grads(student)
    assert set(full_terms) == {"loss", "distill", "contrastive", "retrieval"}
    for name, value in full_terms.items():
        assert torch.allclose(cached_terms[name], value, atol=1e-5), name
    for name, full, cached in zip(parts.named, full_grads, cached_grads):
        assert full.abs().sum() > 0, name
        assert torch.allclose(cached, full, atol=1e-5, rtol=1e-4), name
    # The dropout view's dropout acts on the cached states entering the trainable layers: it changes the view.
    plain = student.input_last_with_dropout(records[:4], 0.0)
    dropped = student.input_last_with_dropout(records[:4], 0.5)
    assert plain.shape == dropped.shape and not torch.allclose(plain, dropped)


def test_a_resumed_run_reuses_the_prefix_cache_and_matches_the_whole_run(setting, tmp_path, capsys):
    from instemb_rag.training.trainer import train

    cached = {"model.frozen_prefix": True, "training.save_steps": 3}
    train(_config(setting, tmp_path, "whole", **cached))
    assert "to add under" in capsys.readouterr().out  # the first run built the cache
    shards = sorted((tmp_path / "prefix").rglob("shard-*.safetensors"))
    stamps = [path.stat().st_mtime_ns for path in shards]
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(tmp_path / "whole" / "checkpoint-3", resumed / "checkpoint-3")
    (resumed / "metrics.jsonl").write_text((tmp_path / "whole" / "metrics.jsonl").read_text())
    train(_config(setting, tmp_path, "resumed", **{**cached, "training.resume": True}))
    assert "to add under" not in capsys.readouterr().out  # nothing computed again
    assert sorted((tmp_path / "prefix").rglob("shard-*.safetensors")) == shards
    assert [path.stat().st_mtime_ns for path in shards] == stamps
    expected, got = _trained(tmp_path / "whole", 6), _trained(resumed, 6)
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name


def test_another_k_gets_its_own_cache_and_says_why(setting, tmp_path):
    from instemb_rag.datasets.records import read_records
    from instemb_rag.training.batch_order import BatchOrder
    from instemb_rag.training.lookahead.cached_student import prepare_student
    from instemb_rag.training.parallel import SINGLE_PROCESS
    from instemb_rag.training.student import load_student

    records = read_records(setting["train"])
    order = BatchOrder.records([None] * len(records), 4, 1, 0)
    folders = []
    for top in (1, 2):
        config = _config(setting, tmp_path, "run", **{"model.frozen_prefix": True, "model.trainable_top_layers": top})
        logged: list[str] = []
        info: dict = {}
        prepare_student(
            config, load_student(config, torch.device("cpu")), records, order, info, SINGLE_PROCESS, logged.append
        )
        folders.append(info["prefix_cache"]["path"])
        assert info["prefix_cache"]["split"] == 3 - top and info["prefix_cache"]["computed_inputs"] > 0
    assert folders[0] != folders[1]
    assert any("trainable_top_layers" in line for line in logged), logged
    config = _config(setting, tmp_path, "run", **{"model.frozen_prefix": True, "model.trainable_top_layers": 3})
    with pytest.raises(InstEmbError, match="trainable_top_layers < 3"):
        prepare_student(config, load_student(config, torch.device("cpu")), records, order, {}, SINGLE_PROCESS)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"model.train_lookahead": True}, "train_lookahead"),
        ({"model.lora_rank": 4, "model.lora_all_layers": True}, "lora_all_layers"),
        ({"model.trainable_top_layers": 0}, "trainable_top_layers >= 1"),
        ({"model.frozen_prefix_dtype": "int8"}, "frozen_prefix_dtype"),
    ],
)
def test_configs_the_cache_cannot_serve_are_refused_with_the_reason(setting, tmp_path, overrides, named):
    with pytest.raises(InstEmbError, match=named):
        _config(setting, tmp_path, "run", **{"model.frozen_prefix": True, **overrides})


# ---------------------------------------------------------------------------- data order, threads
def _padding(batches, lengths):
    return sum(len(batch) * max(lengths[i] for i in batch) - sum(lengths[i] for i in batch) for batch in batches)


def test_length_buckets_cut_padding_and_keep_groups_whole():
    from instemb_rag.training.batch_order import BatchOrder

    rng = random.Random(0)
    groups = [None] * 300 + [f"g{n // 3}" for n in range(90)]
    lengths = [rng.randint(5, 400) for _ in groups]
    plain = BatchOrder.records(groups, 8, 1, seed=5).epoch(0)
    bucketed_order = BatchOrder.records(groups, 8, 1, seed=5, lengths=lengths)
    bucketed = bucketed_order.epoch(0)
    seen = sorted(i for batch in bucketed for i in batch)
    assert seen == list(range(len(groups)))  # every record once per epoch
    assert sum(len(batch) < 8 for batch in bucketed) <= 1  # full batches but maybe one
    where = {i: number for number, batch in enumerate(bucketed) for i in batch}
    for group in {g for g in groups if g}:
        assert len({where[i] for i, g in enumerate(groups) if g == group}) == 1, group
    assert _padding(bucketed, lengths) < 0.3 * _padding(plain, lengths)
    # A pure function of (step, seed, lengths): a resumed run sees the same batches; epochs differ.
    again = BatchOrder.records(groups, 8, 1, seed=5, lengths=lengths)
    assert [again.step(s) for s in range(60)] == [bucketed_order.step(s) for s in range(60)]
    assert bucketed_order.epoch(1) != bucketed


def test_training_threads_follow_the_physical_cores_unless_omp_num_threads_is_set(monkeypatch):
    from instemb_rag.training.cpu_threads import physical_cores, set_training_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert set_training_threads("cpu") == physical_cores() == torch.get_num_threads() >= 1
        torch.set_num_threads(1)
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert set_training_threads("cpu") is None
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_training_threads("cuda") is None and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
