"""The trainer on the tiny random Llama: loss goes down, exact resume, teacher cache, LoRA."""

import json
import random
import shutil

import pytest
import torch
from helpers import TINY_RECIPE, tiny_train_config
from safetensors.torch import load_file

from instemb_rag import InstEmbEncoder
from instemb_rag.datasets.records import TrainingRecord, read_records, write_records
from instemb_rag.errors import InstEmbError
from instemb_rag.training.args import load_config
from instemb_rag.training.lookahead.frozen_llm import LlmTargetCache, cache_key_fields, compute_llm_targets
from instemb_rag.training.lookahead.losses import compute_losses
from instemb_rag.training.student import load_student
from instemb_rag.training.trainer import train

WORDS = "the tent is light and durable for a camp trip in cold rain with water stove".split()


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    rng = random.Random(0)
    records = [
        TrainingRecord(
            text=" ".join(rng.choice(WORDS) for _ in range(10)),
            instruction=rng.choice(["what is the weight ?", "does it do well in rain ?", None]),
            output=" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))),
        )
        for _ in range(16)
    ]
    path = tmp_path_factory.mktemp("records") / "train.jsonl"
    write_records(path, records)
    return path


_config = tiny_train_config


def _metrics(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("distill_loss", ["mse", "kl"])
def test_training_lowers_the_loss_and_writes_a_loadable_checkpoint(tiny_model_dir, train_file, tmp_path, distill_loss):
    # No dropout view, so the loss on a fixed batch is deterministic before and after.
    views = ["student_input", "teacher_input", "student_output"]
    config = _config(
        tiny_model_dir,
        train_file,
        tmp_path / "run",
        **{
            "training.views": views,
            "training.max_steps": 8,
            "training.save_steps": 100,
            "training.distill_loss": distill_loss,
        },
    )
    records = read_records(train_file)[:4]

    def fixed_batch_loss(encoder):
        targets = compute_llm_targets(teacher, records, 4)
        with torch.no_grad():
            return compute_losses(encoder, records, targets, config)["loss"].item()

    teacher = load_student(config, torch.device("cpu"))
    before = fixed_batch_loss(teacher)
    final = train(config)
    trained = InstEmbEncoder.from_pretrained(final, device="cpu")
    after = fixed_batch_loss(trained)
    assert after < before * 0.9
    assert (tmp_path / "run" / "loss_curve.png").stat().st_size > 1000
    assert [row["step"] for row in _metrics(tmp_path / "run")] == list(range(1, 9))
    # The look-ahead vectors moved; the frozen bottom layer did not.
    assert not torch.equal(trained.lookahead.vectors, teacher.lookahead.vectors)
    bottom = "model.layers.0.mlp.down_proj.weight"
    assert torch.equal(dict(trained.model.named_parameters())[bottom], dict(teacher.model.named_parameters())[bottom])
    assert "model.layers.0.mlp.down_proj.weight" not in load_file(str(final / "adapted.safetensors"))


@pytest.mark.parametrize("memory", [0, 10])
def test_resume_after_interruption_matches_an_uninterrupted_run(tiny_model_dir, train_file, tmp_path, memory):
    # With a negative memory, steps 4-6 rank against the documents of steps 1-3: the resumed run
    # matches only if the checkpoint carried them.
    options = {"training.retrieval_weight": 1.0, "training.negative_memory": memory} if memory else {}
    full = tmp_path / "full"
    train(_config(tiny_model_dir, train_file, full, **{"training.save_total_limit": 5, **options}))
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    # An interruption right after step 3's checkpoint: only that checkpoint and its log exist.
    shutil.copytree(full / "checkpoint-3", interrupted / "checkpoint-3")
    (interrupted / "metrics.jsonl").write_text((full / "metrics.jsonl").read_text())
    train(_config(tiny_model_dir, train_file, interrupted, **{"training.resume": True, **options}))
    expected = load_file(str(full / "checkpoint-6" / "trainer_params.safetensors"))
    resumed = load_file(str(interrupted / "checkpoint-6" / "trainer_params.safetensors"))
    assert expected.keys() == resumed.keys()
    for name in expected:
        assert torch.allclose(expected[name], resumed[name], atol=1e-6), name
    # The log is rewound to the checkpoint and continues with the same losses.
    assert [r["loss"] for r in _metrics(interrupted)] == [r["loss"] for r in _metrics(full)]


def test_teacher_cache_is_keyed_by_teacher_and_input(tiny_model_dir, train_file, tmp_path):
    config = _config(
        tiny_model_dir, train_file, tmp_path / "a", **{"training.llm_target_cache_dir": str(tmp_path / "tc")}
    )
    encoder = load_student(config, torch.device("cpu"))
    records = read_records(train_file)
    fields = cache_key_fields(encoder, encoder.backbone.fingerprint, 4)
    first = LlmTargetCache(tmp_path / "tc", fields, 4, encoder.hidden_size)
    first.ensure(encoder, records, range(6))
    assert first.computed_last == 6
    again = LlmTargetCache(tmp_path / "tc", fields, 4, encoder.hidden_size)
    again.ensure(encoder, records, range(8))
    assert again.computed_last == 2  # only the two records not cached before
    assert torch.equal(again.targets.select(range(6)).lookahead, first.targets.select(range(6)).lookahead)
    direct = compute_llm_targets(encoder, records[:8], 4)
    assert torch.allclose(again.targets.select(range(8)).lookahead, direct.lookahead, atol=1e-6)
    # Keyed by input, not by data file: the same records in another file and order cost nothing.
    shuffled = records[::-1]
    other = LlmTargetCache(tmp_path / "tc", fields, 4, encoder.hidden_size)
    other.ensure(encoder, shuffled, range(8, 16))  # records 7..0
    assert other.computed_last == 0
    assert torch.equal(other.targets.select([15]).anchor, again.targets.select([0]).anchor)
    # A changed answer is another input; a changed teacher, L or template another key.
    edited = [records[0].model_copy(update={"output": records[0].output + " stove"})]
    other.ensure(encoder, edited, [0])
    assert other.computed_last == 1
    assert LlmTargetCache(tmp_path / "tc", {**fields, "lookahead_length": 3}, 3, 64).key != first.key
    assert LlmTargetCache(tmp_path / "tc", cache_key_fields(encoder, "another", 4), 4, 64).key != first.key
    # Short answers: mask marks exactly the answer tokens.
    mask = again.targets.select(range(8)).mask
    for index in range(8):
        answer_tokens = len(encoder.tokenizer(records[index].output, add_special_tokens=False).input_ids)
        assert int(mask[index].sum()) == min(4, answer_tokens)


def test_cached_and_uncached_teacher_give_the_same_first_loss(tiny_model_dir, train_file, tmp_path):
    common = {"training.max_steps": 1, "training.views": ["student_input", "teacher_input", "student_output"]}
    train(_config(tiny_model_dir, train_file, tmp_path / "cached", **common))
    train(_config(tiny_model_dir, train_file, tmp_path / "live", **common, **{"training.llm_target_cache": False}))
    assert _metrics(tmp_path / "cached")[0]["loss"] == pytest.approx(_metrics(tmp_path / "live")[0]["loss"], abs=1e-5)


def test_lora_checkpoint_merges_on_load_and_matches_the_trained_model(tiny_model_dir, train_file, tmp_path):
    config = _config(
        tiny_model_dir,
        train_file,
        tmp_path / "lora",
        **{"model.lora_rank": 4, "training.max_steps": 3, "training.learning_rate": 5e-2},
    )
    final = train(config)
    assert (final / "lora" / "adapter_model.safetensors").is_file()
    adapted = load_file(str(final / "adapted.safetensors"))
    assert set(adapted) == {"model.norm.weight"}  # LoRA weights live in lora/, not here
    loaded = InstEmbEncoder.from_pretrained(final, device="cpu")
    assert not any("lora" in name for name, _ in loaded.model.named_parameters())
    base = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
    top = "model.layers.1.self_attn.q_proj.weight"
    assert not torch.allclose(dict(loaded.model.named_parameters())[top], dict(base.model.named_parameters())[top])
    # The merged weight is W + (alpha / r) * B @ A with the adapter's saved A and B.
    lora = load_file(str(final / "lora" / "adapter_model.safetensors"))
    stem = "base_model.model.model.layers.1.self_attn.q_proj"
    delta = (32.0 / 4) * lora[f"{stem}.lora_B.weight"] @ lora[f"{stem}.lora_A.weight"]
    merged = dict(loaded.model.named_parameters())[top]
    assert torch.allclose(merged, dict(base.model.named_parameters())[top] + delta, atol=1e-6)
    # ...and equals peft's own merge of the same adapter, for every weight.
    from peft import PeftModel

    from instemb_rag.encoder.modules.lora import peft_wrapping

    with peft_wrapping():
        reference = PeftModel.from_pretrained(base.model, str(final / "lora")).merge_and_unload()
    ours = dict(loaded.model.named_parameters())
    for name, weight in reference.named_parameters():
        if name != "model.norm.weight":  # the norm was trained fully, outside the adapter
            assert torch.allclose(ours[name], weight, atol=1e-6), name


def test_bfloat16_checkpoints_are_about_half_the_size(tiny_model_dir, train_file, tmp_path):
    sizes = {}
    for dtype in ("float32", "bfloat16"):
        final = train(
            _config(
                tiny_model_dir, train_file, tmp_path / dtype, **{"training.max_steps": 1, "training.save_dtype": dtype}
            )
        )
        sizes[dtype] = (final / "adapted.safetensors").stat().st_size
        InstEmbEncoder.from_pretrained(final, device="cpu")  # loads either way
    assert sizes["bfloat16"] < 0.6 * sizes["float32"]


def test_bad_config_is_rejected_with_the_field_named(tiny_model_dir, train_file, tmp_path):
    with pytest.raises(InstEmbError, match="distill_loss"):
        _config(tiny_model_dir, train_file, tmp_path, **{"training.distill_loss": "cosine"})
    with pytest.raises(InstEmbError, match="Unknown training option 'max_stepz'"):
        _config(tiny_model_dir, train_file, tmp_path, max_stepz=3)
    with pytest.raises(InstEmbError, match="two views"):
        _config(tiny_model_dir, train_file, tmp_path, **{"training.views": ["student_input"]})


def _check_teacher_aligns_with_student(encoder, records, length):
    """At the initial weights the teacher's |x| state is the student's (causal attention: the
    look-ahead slots after |x| cannot change it), and the first look-ahead slot sees the same
    prefix as the teacher's first answer token."""
    targets = compute_llm_targets(encoder, records, length)
    ids = [encoder.build_ids(r.text, r.instruction, length) for r in records]
    batch = encoder.collate(ids)
    with torch.no_grad():
        hidden = encoder.hidden_states(batch)
    from instemb_rag.encoder.modules.pooling import anchor_positions

    input_last, _ = anchor_positions(batch["attention_mask"], length)
    student_anchor = hidden[torch.arange(len(records)), input_last]
    assert torch.allclose(student_anchor, targets.anchor, atol=1e-4)
    assert targets.mask[:, 0].all()


def test_teacher_targets_align_with_student_positions(tiny_encoder, train_file):
    _check_teacher_aligns_with_student(tiny_encoder, read_records(train_file)[:5], tiny_encoder.lookahead.length)


@pytest.mark.slow
def test_real_model_losses_are_finite_and_teacher_aligned(default_encoder):
    records = [
        TrainingRecord(
            text="The tent weighs 1.9 kg and packs small.", instruction="How heavy is it?", output="1.9 kg."
        ),
        TrainingRecord(
            text="Spiders inject venom into other animals.",
            instruction="Do spiders eat animals?",
            output="Yes, spiders eat other animals.",
        ),
    ]
    _check_teacher_aligns_with_student(default_encoder, records, default_encoder.lookahead.length)
    config = load_config(TINY_RECIPE, {"training.batch_size": 2})
    targets = compute_llm_targets(default_encoder, records, default_encoder.lookahead.length)
    with torch.no_grad():
        terms = compute_losses(default_encoder, records, targets, config)
    assert all(torch.isfinite(value) for value in terms.values())
    assert 0 < terms["distill"].item() and 0 < terms["contrastive"].item()


@pytest.mark.parametrize(
    "field, value", [("negative_instruction", "is it heavy ?"), ("negative_outputs", ("cold rain water stove",))]
)
def test_a_hard_negative_joins_the_pooled_retrieval_loss_and_gets_gradient(
    tiny_model_dir, train_file, tmp_path, field, value
):
    views = ["student_input", "teacher_input", "student_output"]
    config = _config(
        tiny_model_dir, train_file, tmp_path / "run", **{"training.views": views, "training.retrieval_weight": 1.0}
    )
    encoder = load_student(config, torch.device("cpu"))
    plain = read_records(train_file)[:4]
    flipped = [plain[0].model_copy(update={field: value}), *plain[1:]]
    targets = compute_llm_targets(encoder, plain, 4)  # the teacher never reads the negative
    without = compute_losses(encoder, plain, targets, config)["retrieval"]
    with_negative = compute_losses(encoder, flipped, targets, config)["retrieval"]
    # One more candidate in a denominator: the retrieval loss can only grow.
    assert with_negative.item() > without.item()

    def gradient(loss):
        encoder.zero_grad()
        loss.backward()
        return encoder.model.get_input_embeddings().weight.grad.clone()

    # The negative's own forward pass is in the graph: it changes the gradient, not only the value.
    assert not torch.allclose(gradient(with_negative), gradient(without))


def test_hard_negatives_without_the_retrieval_loss_are_refused(tiny_model_dir, train_file, tmp_path):
    records = read_records(train_file)
    records[0] = records[0].model_copy(update={"negative_instruction": "is it heavy ?"})
    path = tmp_path / "with_negatives.jsonl"
    write_records(path, records)
    config = _config(tiny_model_dir, path, tmp_path / "run", **{"training.retrieval_weight": 0.0})
    with pytest.raises(InstEmbError, match="retrieval_weight is 0"):
        train(config)


def test_frozen_lookahead_vectors_stay_put_and_leave_the_optimizer(tiny_model_dir, train_file, tmp_path):
    config = _config(
        tiny_model_dir,
        train_file,
        tmp_path / "run",
        **{"model.train_lookahead": False, "training.max_steps": 2, "training.learning_rate": 1e-2},
    )
    start = load_student(config, torch.device("cpu"))
    final = train(config)
    trained = InstEmbEncoder.from_pretrained(final, device="cpu")
    assert torch.equal(trained.lookahead.vectors.detach(), start.lookahead.vectors.detach())
    # The top layer still trained, so the embeddings moved.
    texts = ["a light tent for rain"]
    assert trained.encode_queries(texts) != pytest.approx(start.encode_queries(texts), abs=1e-4)


@pytest.mark.parametrize("lora_rank", [4, 0])
def test_training_on_from_a_checkpoint_keeps_what_it_had_learned(tiny_model_dir, train_file, tmp_path, lora_rank):
    common = {"model.lora_rank": lora_rank, "training.learning_rate": 5e-2}
    first = train(_config(tiny_model_dir, train_file, tmp_path / "first", **common, **{"training.max_steps": 3}))
    # Continue from the first checkpoint with nothing left to learn (zero learning rates): the
    # second checkpoint must be the first model, not the backbone plus an empty update.
    second = train(
        _config(
            tiny_model_dir,
            train_file,
            tmp_path / "second",
            **{
                **common,
                "model.model_name_or_path": str(first),
                "training.max_steps": 1,
                "training.learning_rate": 0.0,
                "training.lookahead_learning_rate": 0.0,
            },
        )
    )
    texts = ["a light tent for rain", "the stove is heavy"]
    before = InstEmbEncoder.from_pretrained(first, device="cpu").encode_queries(texts, "what is the weight ?")
    after = InstEmbEncoder.from_pretrained(second, device="cpu").encode_queries(texts, "what is the weight ?")
    assert after == pytest.approx(before, abs=1e-5)


def test_continuing_a_lora_checkpoint_with_other_lora_settings_is_refused_before_any_work(
    tiny_model_dir, train_file, tmp_path
):
    first = train(
        _config(tiny_model_dir, train_file, tmp_path / "first", **{"model.lora_rank": 4, "training.max_steps": 1})
    )
    for rank, message in [(0, "model.lora_rank=4"), (8, "r: LLM folder 4, this run 8")]:
        config = _config(
            tiny_model_dir,
            train_file,
            tmp_path / f"again-{rank}",
            **{"model.model_name_or_path": str(first), "model.lora_rank": rank, "training.max_steps": 1},
        )
        with pytest.raises(InstEmbError, match=message):
            train(config)
        # Refused on loading, before teacher targets are computed.
        assert not (tmp_path / f"again-{rank}" / "teacher_cache").exists()


def test_a_retrieval_only_run_skips_the_teacher_and_still_learns(tiny_model_dir, train_file, tmp_path):
    # No loss term reads the teacher: no cache is computed, and the pooled ranking still trains.
    config = _config(
        tiny_model_dir,
        train_file,
        tmp_path / "run",
        **{
            "training.distill_weight": 0.0,
            "training.contrastive_weight": 0.0,
            "training.retrieval_weight": 1.0,
            "training.max_steps": 8,
            "training.save_steps": 100,
        },
    )
    records = read_records(train_file)[:4]

    def fixed_batch_loss(encoder):
        with torch.no_grad():
            return compute_losses(encoder, records, None, config)["loss"].item()

    before = fixed_batch_loss(load_student(config, torch.device("cpu")))
    final = train(config)
    info = json.loads((tmp_path / "run" / "run_info.json").read_text())
    assert "skipped" in info["teacher_cache"]
    assert not (tmp_path / "run" / "teacher_cache").exists()
    assert fixed_batch_loss(InstEmbEncoder.from_pretrained(final, device="cpu")) < before
