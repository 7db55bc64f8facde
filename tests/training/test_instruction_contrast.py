"""Instruction-contrast training: grouped micro-batches, the pooled retrieval loss and its masks,
content-word teacher targets, the contrast builders' splits, and the steering dev figures."""

import math
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from instemb_rag.datasets.records import TrainingRecord, read_records, write_records
from instemb_rag.eval.bootstrap import bootstrap_interval
from instemb_rag.eval.data import EvalDataError
from instemb_rag.eval.steering import medquad_focus_and_facet
from instemb_rag.losses import instruction_retrieval_loss, multiview_supcon_loss
from instemb_rag.training.batch_order import BatchOrder
from instemb_rag.training.lookahead.frozen_llm import content_words
from instemb_rag.training.lookahead.losses import shared_targets


# ---------------------------------------------------------------------------- data order
def test_a_group_lands_in_one_micro_batch_and_every_record_once_per_epoch():
    groups = [None] * 10 + ["a", "a", "b", "b", "b", "c", "c"]
    order = BatchOrder.records(groups, batch_size=6, micro_batches_per_step=1, seed=3)
    epoch = order.epoch(0)
    seen = Counter(i for batch in epoch for i in batch)
    assert sorted(seen) == list(range(len(groups))) and set(seen.values()) == {1}
    assert all(len(batch) <= 6 for batch in epoch)
    where = {i: number for number, batch in enumerate(epoch) for i in batch}
    for group in "abc":
        members = [i for i, g in enumerate(groups) if g == group]
        assert len({where[i] for i in members}) == 1, f"group {group} was split across micro-batches"
    # A pure function of (step, seed): a resumed run sees the same batches.
    again = BatchOrder.records(groups, batch_size=6, micro_batches_per_step=1, seed=3)
    assert [again.step(s) for s in range(8)] == [order.step(s) for s in range(8)]


def test_a_group_larger_than_half_a_batch_is_cut_into_units():
    order = BatchOrder.records(["g"] * 7, batch_size=4, micro_batches_per_step=2, seed=0)
    assert sorted(len(unit) for unit in order.units) == [1, 2, 2, 2]
    assert len(order.step(0)) == 2


# ---------------------------------------------------------------------------- losses
def test_retrieval_loss_by_hand_with_both_kinds_of_negative():
    torch.manual_seed(0)
    q, d = torch.randn(3, 5), torch.randn(3, 5)
    neg_docs, neg_queries = torch.randn(1, 5), torch.randn(2, 5)
    shared = torch.zeros(3, 3, dtype=torch.bool)
    loss = instruction_retrieval_loss(q, d, shared, 0.1, neg_docs, neg_queries)
    qn, dn = F.normalize(q, dim=-1), F.normalize(d, dim=-1)
    docs, queries = torch.cat([dn, F.normalize(neg_docs, dim=-1)]), torch.cat([qn, F.normalize(neg_queries, dim=-1)])
    by_hand = 0.0
    for i in range(3):
        forward = torch.exp(qn[i] @ docs.T / 0.1)
        backward = torch.exp(dn[i] @ queries.T / 0.1)
        by_hand += -math.log(forward[i] / forward.sum()) - math.log(backward[i] / backward.sum())
    assert loss.item() == pytest.approx(by_hand / 6, rel=1e-5)


def test_records_with_the_same_output_are_not_each_others_negatives():
    records = [
        TrainingRecord(text="Is the sky blue?", instruction="answer", output="Yes."),
        TrainingRecord(text="Is grass green?", instruction="answer", output=" yes. "),
        TrainingRecord(text="Is snow black?", instruction="answer", output="No."),
    ]
    shared = shared_targets(records, "cpu")
    assert shared.tolist() == [[True, True, False], [True, True, False], [False, False, True]]
    torch.manual_seed(0)
    q, d = F.normalize(torch.randn(3, 4), dim=-1), F.normalize(torch.randn(3, 4), dim=-1)
    masked = instruction_retrieval_loss(q, d, shared, 0.1)
    # By hand: records 0 and 1 ("Yes.") leave each other out of both directions' denominators.
    allowed = [[0, 2], [1, 2], [0, 1, 2]]
    by_hand = 0.0
    for i, keep in enumerate(allowed):
        by_hand -= torch.log_softmax(q[i] @ d[keep].T / 0.1, 0)[keep.index(i)].item()
        by_hand -= torch.log_softmax(d[i] @ q[keep].T / 0.1, 0)[keep.index(i)].item()
    assert masked.item() == pytest.approx(by_hand / 6, rel=1e-5)
    views = torch.randn(3, 2, 4)
    assert multiview_supcon_loss(views, 0.1, shared=shared).item() < multiview_supcon_loss(views, 0.1).item()


# ---------------------------------------------------------------------------- teacher targets
def test_content_words_drop_stopwords_but_keep_an_all_stopword_answer():
    assert content_words("The findings of the study support the claim.") == "findings study support claim."
    assert content_words("No.") == "No."


def test_records_round_trip_the_contrast_fields(tmp_path):
    record = TrainingRecord(
        text="Glaucoma",
        instruction="What are the symptoms?",
        output="Vision loss ...",
        negative_outputs=("Eye drops ...",),
        group="medquad:glaucoma",
    )
    path = tmp_path / "r.jsonl"
    write_records(path, [record, TrainingRecord(text="a", output="b")])
    lines = path.read_text().splitlines()
    assert '"group"' in lines[0] and '"group"' not in lines[1] and "negative_outputs" not in lines[1]
    assert read_records(path)[0] == record


# ---------------------------------------------------------------------------- builders on the real data
def test_medquad_facets_split_by_focus_and_eval_wordings_are_unseen(shared_data_dir_or_skip):
    from instemb_rag.datasets.builders import build_set
    from instemb_rag.datasets.contrast_sets import FACET_EVAL_PHRASINGS, FACET_PHRASINGS

    train, heldout = build_set("medquad_facets", shared_data_dir_or_skip, 0.1, 0)
    assert {r.group for r in train}.isdisjoint({r.group for r in heldout})
    assert all(r.instruction in FACET_PHRASINGS[medquad_focus_and_facet(r.source)[1]] for r in train[:500])
    assert not set(FACET_EVAL_PHRASINGS.values()) & {p for ps in FACET_PHRASINGS.values() for p in ps}
    per_group = Counter(r.group for r in train)
    assert min(per_group.values()) >= 2  # a focus with one facet has nothing to steer between


def test_climate_fever_claims_with_both_stances_share_a_group(shared_data_dir_or_skip):
    from instemb_rag.datasets.builders import build_set

    train, heldout = build_set("climate_fever_stance", shared_data_dir_or_skip, 0.1, 0)
    assert {r.group for r in train}.isdisjoint({r.group for r in heldout})
    labels: dict[str, set] = {}
    for record in heldout:
        labels.setdefault(record.group, set()).add(record.source.split(":")[2])
    assert sum(1 for found in labels.values() if found == {"SUPPORTS", "REFUTES"}) >= 30
    assert all(r.negative_instruction and r.negative_instruction != r.instruction for r in train)


def test_negate_sentence_puts_not_after_the_first_auxiliary_and_skips_negated_ones():
    from instemb_rag.datasets.contrast_sets import negate_sentence

    assert negate_sentence("A man is playing a guitar.") == "A man is not playing a guitar."
    assert negate_sentence("The dogs can swim") == "The dogs can not swim"
    assert negate_sentence("There is no dog here.") is None
    assert negate_sentence("A woman slices an onion.") is None


def _write_nli_root(root):
    """SICK and the three negation NLI files in their real formats, a few rows each."""
    (root / "sick").mkdir(parents=True)
    (root / "negation_nli").mkdir()
    sick = ["pair_ID\tsentence_A\tsentence_B\tentailment_label"]
    sick += [
        "1\tA man is playing a guitar\tA person is playing an instrument\tENTAILMENT",
        "2\tA man is playing a guitar\tNobody is playing a guitar\tCONTRADICTION",
        "3\tTwo dogs are running\tAnimals are running\tENTAILMENT",
        "4\tA cat sleeps\tA cat rests\tENTAILMENT",
        "5\tA child is eating\tA child is at home\tNEUTRAL",
    ]
    (root / "sick" / "SICK.txt").write_text("\n".join(sick) + "\n", encoding="utf-8")
    for name in ("MNLI.txt", "SNLI.txt", "RTE.txt"):
        (root / "negation_nli" / name).write_text("index\tText\tHypothesis\tgold_label\n", encoding="utf-8")


def test_stance_pairs_give_each_premise_both_stances_in_one_group(tmp_path):
    from instemb_rag.datasets.contrast_sets import STANCE_PHRASINGS, build_stance_pairs, contrast_label

    _write_nli_root(tmp_path)
    records = [grouped.record for grouped in build_stance_pairs(tmp_path)]
    by_premise: dict[str, dict[str, str]] = {}
    for record in records:
        _, label = contrast_label(record.source)
        assert record.instruction in STANCE_PHRASINGS[label]
        assert record.negative_instruction in STANCE_PHRASINGS["REFUTES" if label == "SUPPORTS" else "SUPPORTS"]
        by_premise.setdefault(record.group, {})[label] = record.output
    # The natural contradiction is preferred; a premise with none gets its entailed sentence
    # negated; one whose entailed sentence has no auxiliary to negate ("A cat rests") is left out.
    assert by_premise == {
        "stance_pairs:A man is playing a guitar": {
            "SUPPORTS": "A person is playing an instrument",
            "REFUTES": "Nobody is playing a guitar",
        },
        "stance_pairs:Two dogs are running": {"SUPPORTS": "Animals are running", "REFUTES": "Animals are not running"},
    }


def test_nli_stance_held_out_premises_share_no_sentence_with_training(shared_data_dir_or_skip):
    from instemb_rag.eval.steering import _split_records, nli_stance_premises

    by_premise, texts, left_out = nli_stance_premises(shared_data_dir_or_skip, "heldout")
    trained = _split_records("stance_pairs", shared_data_dir_or_skip, "train")
    read = {r.text for r in trained} | {r.output for r in trained}
    assert left_out > 0 and len(by_premise) > 100  # SICK reuses sentences: some must go
    assert not any(texts[group] in read for group in by_premise)
    assert not any(s in read for labels in by_premise.values() for sentences in labels.values() for s in sentences)


def test_counterfactual_claims_flip_the_instruction(shared_data_dir_or_skip):
    from instemb_rag.datasets.builders import build_set

    train, _ = build_set("scifact_stance_counterfactual", shared_data_dir_or_skip, 0.1, 0)
    original, negated = train[0], train[1]
    assert negated.text.startswith("It is not true that") and negated.output == original.output
    assert (negated.instruction, negated.negative_instruction) == (original.negative_instruction, original.instruction)


# ---------------------------------------------------------------------------- steering figures
def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_items():
    rng = np.random.default_rng(0)
    few, many = rng.random(30), rng.random(3000)
    low, high = bootstrap_interval(few)
    assert low < few.mean() < high
    low_many, high_many = bootstrap_interval(many)
    assert high_many - low_many < (high - low) / 4
    assert bootstrap_interval(few) == [low, high]  # seeded


@pytest.mark.parametrize("task", ["medquad-facets", "climate-fever-stance", "nli-stance"])
def test_steering_tasks_score_held_out_groups_with_intervals(tiny_encoder, shared_data_dir_or_skip, task):
    from instemb_rag.eval.tasks import evaluate

    result = evaluate(tiny_encoder, task, max_queries=6, data_root=shared_data_dir_or_skip, cache=False)
    main = result["metrics"][result["main_metric"]]
    low, high = result["intervals"][result["main_metric"]]
    assert 0 <= low <= main <= high <= 1
    if task == "medquad-facets":
        assert result["counts"]["foci"] == 6
        assert 0 < result["metrics"]["random_steering_accuracy"] <= 0.5
    else:
        assert result["counts"]["claims"] == 6 and result["counts"]["queries"] == 12
        metrics = result["metrics"]
        assert {"pairwise_accuracy_supports", "pairwise_accuracy_refutes"} <= set(metrics)
        both = metrics["pairwise_accuracy_supports"] + metrics["pairwise_accuracy_refutes"] - 1
        assert metrics["instruction_effect"] == pytest.approx(both)
        low, high = result["intervals"]["instruction_effect"]
        assert -1 <= low <= metrics["instruction_effect"] <= high <= 1


def test_medquad_facets_leaves_out_foci_whose_passage_training_read(tiny_encoder, shared_data_dir_or_skip, tmp_path):
    """MedQuAD repeats template passages across foci; a held-out focus holding one that a training
    record contains is not scored when the run's records are passed as exclude_seen."""
    from instemb_rag.eval import steering
    from instemb_rag.eval.tasks import evaluate

    heldout = steering._split_records("medquad_facets", shared_data_dir_or_skip, "heldout")
    read = next(r for r in heldout if len(r.output) > 100)
    records = tmp_path / "train.jsonl"
    write_records(records, [TrainingRecord(text="a training query", instruction=None, output=read.output)])
    owners = {steering.medquad_focus_and_facet(r.source)[0] for r in heldout if r.output == read.output}

    result = evaluate(
        tiny_encoder, "medquad-facets", data_root=shared_data_dir_or_skip, cache=False, exclude_seen=records
    )
    all_foci = len({steering.medquad_focus_and_facet(r.source)[0] for r in heldout})
    assert result["counts"]["foci"] == all_foci - len(owners)
    assert any(f"{len(owners)} of {all_foci} foci (a passage) left out" in note for note in result["notes"])


def test_instruction_effect_is_zero_when_the_instruction_changes_nothing():
    """A ranking fixed by the documents alone (a, then 1 - a under the opposite instruction) has no
    effect however lopsided; flipping the right way is +1, the wrong way -1."""
    from instemb_rag.eval.steering import instruction_effect

    assert instruction_effect([1.0, 0.0, 0.75], [0.0, 1.0, 0.25]) == [0.0, 0.0, 0.0]
    assert instruction_effect([1.0, 1.0], [1.0, 0.0]) == [1.0, 0.0]
    assert instruction_effect([0.0], [0.0]) == [-1.0]
    with pytest.raises(ValueError, match="one accuracy per group"):
        instruction_effect([1.0], [])


def test_steering_train_split_scores_training_groups_and_says_so(tiny_encoder, shared_data_dir_or_skip):
    """The fit diagnostic reads the builders' training groups, never the held-out ones, and its
    result cannot be mistaken for a dev figure."""
    from instemb_rag.datasets.builders import build_set
    from instemb_rag.eval import steering
    from instemb_rag.eval.tasks import evaluate

    train, heldout = build_set(
        "medquad_facets", shared_data_dir_or_skip, steering.HELD_OUT_FRACTION, steering.HELD_OUT_SEED
    )
    train_foci = {medquad_focus_and_facet(r.source)[0] for r in train}
    heldout_foci = {medquad_focus_and_facet(r.source)[0] for r in heldout}
    assert train_foci and heldout_foci and not train_foci & heldout_foci
    records = steering._split_records("medquad_facets", shared_data_dir_or_skip, "train")
    assert {medquad_focus_and_facet(r.source)[0] for r in records} == train_foci
    result = evaluate(
        tiny_encoder,
        "medquad-facets",
        max_queries=4,
        data_root=shared_data_dir_or_skip,
        cache=False,
        steering_split="train",
    )
    assert result["limits"]["split"] == "train"
    assert any("TRAINING" in note for note in result["notes"])
    assert medquad_focus_and_facet("medquad_facets:mody: type 2:considerations") == ("mody: type 2", "considerations")
    with pytest.raises(EvalDataError, match="Unknown split 'dev'"):
        steering._split_records("medquad_facets", shared_data_dir_or_skip, "dev")
