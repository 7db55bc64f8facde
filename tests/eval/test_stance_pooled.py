"""perspectrum-stance and stance-pooled on data the tests write: the held-out rule, item ids,
per-set and per-label splits, and `instemb-rag compare` pairing the pooled results on item ids."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_eval_data import BagOfWordsEncoder
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.eval import EvalDataError, evaluate
from instemb_rag.eval.compare import CompareError, compare_results
from instemb_rag.eval.perspectrum import load_perspectrum, perspectrum_claims
from instemb_rag.eval.stance_pooled import POOLED_SETS, split_name

# The lexical encoder finds these words in the evaluation wordings: "... in favour of this ..."
# and "... argues against this ..." (PERSPECTRUM), "... evidence in favour of / against ..."
# (Climate-FEVER, NLI), so a sentence carrying one is ranked by the stance it names.
FAVOUR, AGAINST = "favour favour", "against against"


def _jsonl(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _perspective(claim_id, split, stance, text, claim=None) -> dict:
    claim = claim or f"the claim number {claim_id} holds for everyone"  # 30+ characters: seen.py matches it
    return {"claim_id": claim_id, "claim": claim, "split": split, "stance": stance, "perspective": text}


def write_perspectrum(root, flipped: bool = False) -> None:
    """Test claims 10..13 with known fates, train claims 1..2, a dev claim 3:

    10: two supporting perspectives and one undermining one: scored.
    11: its only undermining perspective also stands under train claim 1: not scored.
    12: a repeat of train claim 2's text: left out.
    13: only supporting perspectives: not scored.

    ``flipped``: each perspective names the other stance's word (every item goes the wrong way)."""
    supporting_word, undermining_word = (AGAINST, FAVOUR) if flipped else (FAVOUR, AGAINST)
    rows = [
        _perspective(1, "train", "SUPPORT", f"{supporting_word} train one"),
        _perspective(1, "train", "UNDERMINE", f"{undermining_word} shared reading"),
        _perspective(2, "train", "SUPPORT", f"{supporting_word} train two", claim="the repeated claim"),
        _perspective(3, "dev", "SUPPORT", f"{supporting_word} dev three"),
        _perspective(3, "dev", "UNDERMINE", f"{undermining_word} dev three"),
        _perspective(10, "test", "SUPPORT", f"{supporting_word} ten alpha"),
        _perspective(10, "test", "SUPPORT", f"{supporting_word} ten beta"),
        _perspective(10, "test", "UNDERMINE", f"{undermining_word} ten gamma"),
        _perspective(11, "test", "SUPPORT", f"{supporting_word} eleven"),
        _perspective(11, "test", "UNDERMINE", f"{undermining_word} shared reading"),
        _perspective(12, "test", "SUPPORT", f"{supporting_word} twelve", claim="the repeated claim"),
        _perspective(12, "test", "UNDERMINE", f"{undermining_word} twelve", claim="the repeated claim"),
        _perspective(13, "test", "SUPPORT", f"{supporting_word} thirteen"),
    ]
    _jsonl(root / "stance_args" / "perspectrum.jsonl", rows)


# ----------------------------------------------------------------------------- PERSPECTRUM
def test_perspectrum_rows_are_checked_and_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "p.jsonl"
    good = _perspective(1, "test", "SUPPORT", "a view")
    for broken, message in [
        (dict(good, stance="NEUTRAL"), r"p\.jsonl:2: field 'stance' must be one of SUPPORT, UNDERMINE"),
        (dict(good, split="valid"), r"p\.jsonl:2: field 'split' must be one of train, dev, test"),
        ({k: v for k, v in good.items() if k != "perspective"}, r"p\.jsonl:2: field 'perspective'"),
        (dict(good, claim="another claim"), r"p\.jsonl:2: claim_id 1 names two claims"),
    ]:
        _jsonl(path, [good, broken])
        with pytest.raises(EvalDataError, match=message):
            load_perspectrum(path)
    _jsonl(path, [])
    with pytest.raises(EvalDataError, match="holds no PERSPECTRUM rows"):
        load_perspectrum(path)


def test_perspectrum_held_out_rule_is_the_test_split_less_what_training_reads(tmp_path):
    write_perspectrum(tmp_path)
    path = tmp_path / "stance_args" / "perspectrum.jsonl"
    by_claim, texts, notes = perspectrum_claims(path, "heldout")
    assert by_claim == {
        "10": {"SUPPORTS": [f"{FAVOUR} ten alpha", f"{FAVOUR} ten beta"], "REFUTES": [f"{AGAINST} ten gamma"]},
        "11": {"SUPPORTS": [f"{FAVOUR} eleven"]},  # its undermining perspective is a train claim's
        "13": {"SUPPORTS": [f"{FAVOUR} thirteen"]},
    }
    assert "12" not in texts and texts["10"] == "the claim number 10 holds for everyone"
    assert notes == [
        "PERSPECTRUM test split: 1 claims and 1 perspectives left out (their text occurs in the train split)"
    ]
    train, _, train_notes = perspectrum_claims(path, "train")  # the fit diagnostic leaves nothing out
    assert set(train) == {"1", "2"} and train_notes == []


def test_perspectrum_stance_scores_one_pair_per_claim_by_label(tmp_path):
    write_perspectrum(tmp_path)
    result = evaluate(BagOfWordsEncoder(), "perspectrum-stance", data_root=tmp_path, cache=False)
    # Only claim 10 has an unread perspective of each stance: one item per instruction.
    assert result["item_ids"]["pairwise_accuracy"] == ["perspectrum:10:support", "perspectrum:10:refute"]
    assert result["counts"] == {"queries": 2, "documents": 2, "claims": 1}
    assert result["metrics"] == {
        "pairwise_accuracy": 1.0,
        "pairwise_accuracy_supports": 1.0,
        "pairwise_accuracy_refutes": 1.0,
        "instruction_effect": 1.0,
    }
    # Each perspective now names the other stance: every comparison flips, the effect is -1.
    write_perspectrum(tmp_path, flipped=True)
    flipped = evaluate(BagOfWordsEncoder(), "perspectrum-stance", data_root=tmp_path, cache=False)["metrics"]
    assert (flipped["pairwise_accuracy_supports"], flipped["pairwise_accuracy_refutes"]) == (0.0, 0.0)
    assert flipped["instruction_effect"] == -1.0


def test_perspectrum_exclude_seen_drops_claims_a_training_file_holds(tmp_path):
    write_perspectrum(tmp_path)
    assert evaluate(BagOfWordsEncoder(), "perspectrum-stance", data_root=tmp_path, cache=False)["counts"]["claims"] == 1
    records = tmp_path / "train.jsonl"
    text = "Is it so? The claim number 10 holds for everyone."  # claim 10, the only scored one
    _jsonl(records, [{"text": text, "instruction": "Find arguments that support this claim.", "output": "yes"}])
    with pytest.raises(EvalDataError, match="No held-out PERSPECTRUM claims have both stances"):
        evaluate(BagOfWordsEncoder(), "perspectrum-stance", data_root=tmp_path, cache=False, exclude_seen=records)


# ----------------------------------------------------------------------------- stance-pooled
SCIFACT_RECORDS = [
    ("1", "tents keep the rain out on every night", "s1", "SUPPORT", "support"),
    ("2", "stoves burn no fuel at all in the cold", "s2", "CONTRADICT", "contradict"),
    ("3", "poles never bend in the strong mountain wind", "s3", "SUPPORT", "support"),
]
OTHER = {"support": "contradict", "contradict": "support"}


def write_pooled_root(root, flipped_perspectrum: bool = False) -> None:
    """All four sets, small, in their real formats. Each SciFact abstract names its own label's
    instruction word, each Climate-FEVER / NLI sentence and PERSPECTRUM perspective its stance's."""
    _jsonl(
        root / "scifact" / "stance.jsonl",
        [
            {
                "claim_id": cid,
                "claim": claim,
                "doc_id": doc,
                "label": label,
                "instruction_match": f"find a study that would {word}",
                "instruction_mismatch": f"find a study that would {OTHER[word]}",
            }
            for cid, claim, doc, label, word in SCIFACT_RECORDS
        ],
    )
    _jsonl(
        root / "scifact" / "corpus.jsonl",
        [{"_id": d, "text": f"{w} {w} abstract"} for _, _, d, _, w in SCIFACT_RECORDS],
    )
    claims = []
    for n in range(20):
        evidences = [
            {"evidence": f"{FAVOUR} climate{n} up", "evidence_label": "SUPPORTS", "article": ""},
            {"evidence": f"{AGAINST} climate{n} down", "evidence_label": "REFUTES", "article": ""},
            {"evidence": f"{AGAINST} climate{n} other", "evidence_label": "REFUTES", "article": ""},
        ]
        claims.append(
            {"claim_id": str(n), "claim": f"arctic claim {n}", "claim_label": "DISPUTED", "evidences": evidences}
        )
    _jsonl(root / "climate_fever" / "climate-fever.jsonl", claims)
    sick = ["pair_ID\tsentence_A\tsentence_B\tentailment_label"]
    for n in range(20):
        sick += [f"{2 * n}\tpremise{n} holds\t{FAVOUR} nli{n}\tENTAILMENT"]
        sick += [f"{2 * n + 1}\tpremise{n} holds\t{AGAINST} nli{n}\tCONTRADICTION"]
    (root / "sick").mkdir()
    (root / "sick" / "SICK.txt").write_text("\n".join(sick) + "\n")
    (root / "negation_nli").mkdir()
    for name in ("MNLI.txt", "SNLI.txt", "RTE.txt"):
        (root / "negation_nli" / name).write_text("index\tText\tHypothesis\tgold_label\n")
    write_perspectrum(root, flipped_perspectrum)


def _expected_group_ids(root) -> set[str]:
    """The held-out groups of the three group sets, from the builders' own split."""
    from instemb_rag.eval.steering import climate_claims, nli_stance_premises

    climate, _ = climate_claims(root, "heldout")
    nli, _, _ = nli_stance_premises(root, "heldout")
    groups = [("climate-fever", c) for c in climate] + [("nli", p) for p in nli] + [("perspectrum", "10")]
    return {f"{name}:{group}:{label}" for name, group in groups for label in ("support", "refute")}


def test_stance_pooled_items_ids_and_splits(tmp_path):
    write_pooled_root(tmp_path)
    result = evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False)
    ids, values = result["item_ids"]["pairwise_accuracy"], result["per_item"]["pairwise_accuracy"]
    scifact = {"scifact:1/s1:support", "scifact:2/s2:refute", "scifact:3/s3:support"}
    assert set(ids) == scifact | _expected_group_ids(tmp_path) and len(ids) == len(set(ids))
    assert set(values) == {1.0}  # every item a single 1/0 comparison the lexical encoder gets right
    # Per set and per label: each split partitions the pooled items, its mean is its metric.
    set_ids = [item for name in POOLED_SETS for item in result["item_ids"][split_name(name)]]
    assert sorted(set_ids) == sorted(ids)
    label_ids = result["item_ids"]["pairwise_accuracy_support"] + result["item_ids"]["pairwise_accuracy_refute"]
    assert sorted(label_ids) == sorted(ids)
    assert all(item.endswith(":refute") for item in result["item_ids"]["pairwise_accuracy_refute"])
    for metric, scores in result["per_item"].items():
        assert result["metrics"][metric] == pytest.approx(np.mean(scores))
    assert result["counts"]["scifact"] == 3 and result["counts"]["perspectrum"] == 2
    assert result["counts"]["queries"] == len(ids)
    assert result["main_metric"] == "pairwise_accuracy" and "pairwise_accuracy" in result["intervals"]


def test_stance_pooled_splits_show_which_set_goes_the_wrong_way(tmp_path):
    # PERSPECTRUM's perspectives name the other stance: its two items fail, every other set's
    # pass, and each label split loses exactly one item.
    write_pooled_root(tmp_path, flipped_perspectrum=True)
    result = evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False)
    values = dict(zip(result["item_ids"]["pairwise_accuracy"], result["per_item"]["pairwise_accuracy"]))
    assert sorted(key for key, value in values.items() if value == 0.0) == [
        "perspectrum:10:refute",
        "perspectrum:10:support",
    ]
    metrics = result["metrics"]
    assert metrics[split_name("perspectrum")] == 0.0
    assert metrics[split_name("climate-fever")] == metrics[split_name("nli")] == metrics[split_name("scifact")] == 1.0
    for label in ("support", "refute"):
        items = len(result["per_item"][f"pairwise_accuracy_{label}"])
        assert metrics[f"pairwise_accuracy_{label}"] == pytest.approx(1 - 1 / items)
    assert metrics["pairwise_accuracy"] == pytest.approx(1 - 2 / len(values))


def test_stance_pooled_caps_items_per_set_keeps_exclude_seen_and_refuses_the_train_split(tmp_path):
    write_pooled_root(tmp_path)
    capped = evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False, max_queries=2)
    assert all(capped["counts"][name] <= 2 for name in POOLED_SETS)
    records = tmp_path / "train.jsonl"
    seen_claim = (
        "Claim: poles never bend in the strong mountain wind"  # SciFact record 3's claim, as the builders write it
    )
    _jsonl(records, [{"text": seen_claim, "instruction": "Find a study.", "output": "an abstract"}])
    unseen = evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False, exclude_seen=records)
    assert "scifact:3/s3:support" not in unseen["item_ids"]["pairwise_accuracy"]
    assert unseen["counts"]["scifact"] == 2
    assert any(note.startswith("scifact: 1 of 3 stance records left out") for note in unseen["notes"])
    with pytest.raises(EvalDataError, match="held-out items only"):
        evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False, steering_split="train")
    (tmp_path / "climate_fever" / "climate-fever.jsonl").unlink()
    (tmp_path / "climate_fever").rmdir()
    with pytest.raises(EvalDataError, match="'stance-pooled' needs .*climate_fever, which is absent"):
        evaluate(BagOfWordsEncoder(), "stance-pooled", data_root=tmp_path, cache=False)


# ----------------------------------------------------------------------------- compare
def _eval_pooled(tmp_path, model_dir, root, name: str, pooling: str):
    output = tmp_path / f"{name}.json"
    args = ["eval", "stance-pooled", "--model", str(model_dir), "--lookahead", "2", "--pooling", pooling]
    args += ["--data-root", str(root), "--device", "cpu", "--no-progress", "--no-cache", "-o", str(output)]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    return output


def test_compare_pairs_pooled_results_on_item_ids(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    root = tmp_path / "root"
    write_pooled_root(root)
    first = _eval_pooled(tmp_path, tiny_model_dir, root, "daap", "daap")
    second = _eval_pooled(tmp_path, tiny_model_dir, root, "last", "input_last")
    out = tmp_path / "paired.json"
    compared = CliRunner().invoke(app, ["compare", str(first), str(second), "-o", str(out)], terminal_width=200)
    assert compared.exit_code == 0, compared.output
    rows = {row["metric"]: row for row in json.loads(out.read_text())["rows"]}
    splits = [split_name(name) for name in POOLED_SETS] + ["pairwise_accuracy_support", "pairwise_accuracy_refute"]
    assert set(rows) == {"pairwise_accuracy", *splits}
    mine = json.loads(first.read_text())["results"][0]
    theirs = json.loads(second.read_text())["results"][0]
    for metric, row in rows.items():
        gain = np.mean(mine["per_item"][metric]) - np.mean(theirs["per_item"][metric])
        assert row["gain"] == pytest.approx(gain, abs=1e-4) and row["items"] == len(mine["per_item"][metric])

    # The baseline's items in another order pair with the same items: the same gains.
    reordered = json.loads(second.read_text())
    result = reordered["results"][0]
    for metric in result["per_item"]:
        result["per_item"][metric].reverse()
        result["item_ids"][metric].reverse()
    paired, _ = compare_results([mine], [result])
    assert {row["metric"]: row["gain"] for row in paired} == {metric: row["gain"] for metric, row in rows.items()}
    # Paired on ids, an item that differs is named, not silently paired with another one.
    result["item_ids"]["pairwise_accuracy"][0] = "scifact:99/s9:support"
    with pytest.raises(CompareError, match=r"different items \(1 only in the candidate.*scifact:99/s9:support"):
        compare_results([mine], [result])


def test_one_per_stance_is_seeded_per_group_and_independent_of_the_others():
    from instemb_rag.eval.steering import one_per_stance

    groups = {
        f"g{n}": {"SUPPORTS": [f"s{n}.{k}" for k in range(5)], "REFUTES": [f"r{n}.{k}" for k in range(5)]}
        for n in range(8)
    }
    chosen = one_per_stance(groups, seed=0)
    assert all(len(sentences) == 1 for labels in chosen.values() for sentences in labels.values())
    assert all(chosen[g][label][0] in groups[g][label] for g in groups for label in ("SUPPORTS", "REFUTES"))
    assert one_per_stance({"g3": groups["g3"]}, seed=0) == {"g3": chosen["g3"]}  # alone, the same choice
    reseeded = one_per_stance(groups, seed=1)
    assert any(reseeded[g] != chosen[g] for g in groups)  # the seed does choose
