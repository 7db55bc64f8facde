"""Facet groups (instemb_rag/datasets/facet_groups.py: the format; eval/facet_groups.py, facet_runs.py: the
scoring): the loader's errors, the metrics on a hand-built set whose right answers are known,
the paired bootstrap, BM25 and a teacher in the same harness, and `instemb-rag eval
facet-groups` on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import build_tiny_teacher_folder
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.datasets.facet_groups import DEV_GROUPS, checkout_root, leaked_subjects
from instemb_rag.eval.bootstrap import clustered_interval, paired_gain
from instemb_rag.eval.data import EvalDataError
from instemb_rag.eval.facet_groups import load_facet_groups, resolve_groups_path, score_embedder, score_matrix
from instemb_rag.eval.facet_runs import bm25_ranker, run_facet_groups, teacher_ranker

# The checkout's hand-written training groups (research/, not in the wheel: the package names no default).
TRAIN_GROUPS = checkout_root() / "research" / "data" / "facet_groups_train.jsonl"


def group(gid: str, domain: str, kind: str, query: str, facets: dict[str, tuple[str, str]]) -> dict:
    """facets: facet -> (passage text, instruction text)."""
    return {
        "group": gid,
        "domain": domain,
        "kind": kind,
        "subject": query,
        "query": query,
        "passages": [{"id": f"{gid}-p{n}", "facet": f, "text": t} for n, (f, (t, _)) in enumerate(facets.items())],
        "instructions": [{"facet": f, "text": i} for f, (_, i) in facets.items()],
    }


# Words from the tiny model's vocabulary; each instruction shares words with its passage only,
# so BM25 gets every one right.
TINY_GROUPS = [
    group(
        "t1",
        "gear",
        "aspect",
        "tent review",
        {
            "weight": ("the tent is light with a small packed size", "focus on weight and packed size"),
            "durability": ("the nylon floor and seam hold in rain and wind", "does it hold in rain and wind"),
            "poles": ("a pole and zipper of the frame", "what about the pole and zipper"),
        },
    ),
    group(
        "t2",
        "gear",
        "aspect",
        "stove review",
        {
            "fuel": ("the stove burner uses gas fuel", "which gas fuel does it use"),
            "size": ("the stove is compact for a camp trip", "is it compact for a trip"),
        },
    ),
    group(
        "t3",
        "camp",
        "stance",
        "backpack review",
        {
            "pros": ("good : a great backpack frame and strap", "what is good and great"),
            "cons": ("bad : a heavy backpack with a poor zipper", "what is bad and poor"),
        },
    ),
]


def write_groups(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


# ------------------------------------------------------------------------------------ loader errors
def broken(change) -> dict:
    record = json.loads(json.dumps(TINY_GROUPS[0]))
    change(record)
    return record


@pytest.mark.parametrize(
    "record, message",
    [
        (broken(lambda r: r.pop("query")), "field 'query' must be a non-empty string, got None"),
        (broken(lambda r: r.update(kind="opinion")), "field 'kind' must be one of aspect, stance"),
        (broken(lambda r: r.update(passages="three")), "field 'passages' must be a list of at least 2 objects"),
        (broken(lambda r: r["passages"][1].pop("text")), "field 'passages[1].text' must be a non-empty string"),
        (broken(lambda r: r["passages"].__setitem__(2, 7)), "field 'passages[2]' must be an object"),
        (broken(lambda r: r["instructions"][0].update(facet="price")), "asks for facet 'price', which no passage has"),
        (broken(lambda r: r["passages"][1].update(facet="weight")), "two passages share the facet 'weight'"),
        (broken(lambda r: r["instructions"].pop()), "exactly one instruction per passage facet; check facet 'poles'"),
        (broken(lambda r: r.update(group="t2")), "group id 't2' repeats line 1"),
        (broken(lambda r: r["passages"][0].update(id="t2-p0")), "passage id 't2-p0' repeats line 1"),
    ],
)
def test_loader_names_file_line_and_field(tmp_path, record, message):
    path = write_groups(tmp_path / "groups.jsonl", [TINY_GROUPS[1], record])
    with pytest.raises(EvalDataError) as error:
        load_facet_groups(path)
    assert f"{path}:2: " in str(error.value) and message in str(error.value)


def test_loader_refuses_bad_json_an_empty_file_and_a_missing_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(TINY_GROUPS[0]) + "\n{not json\n")
    with pytest.raises(EvalDataError, match=r"bad.jsonl:2: not valid JSON"):
        load_facet_groups(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(EvalDataError, match="holds no facet groups"):
        load_facet_groups(empty)
    with pytest.raises(EvalDataError, match=r"absent.jsonl does not exist; pass --groups FILE"):
        resolve_groups_path(tmp_path / "absent.jsonl")


# ------------------------------------------------------------------------------------ the dev set
def test_the_dev_set_meets_its_rules():
    """eval_sets/README.md: >= 48 groups over >= 12 domains, 3-4 passages of similar length,
    stance groups among them, every instruction different."""
    groups = load_facet_groups(resolve_groups_path())
    assert resolve_groups_path() == DEV_GROUPS
    assert len(groups) >= 48 and len({g.domain for g in groups}) >= 12
    assert sum(g.kind == "stance" for g in groups) >= 8
    for item in groups:
        assert 3 <= len(item.passages) <= 4, item.group
        lengths = [len(passage.text.split()) for passage in item.passages]
        assert max(lengths) <= 1.4 * min(lengths), (item.group, lengths)
    instructions = [instruction.text for g in groups for instruction in g.instructions]
    assert len(set(instructions)) == len(instructions)


def test_no_training_group_reads_a_dev_subject():
    if not TRAIN_GROUPS.is_file():
        pytest.skip(f"{TRAIN_GROUPS} is absent")
    assert leaked_subjects(TRAIN_GROUPS.read_text().splitlines(), load_facet_groups(DEV_GROUPS)) == []


def test_leaked_subjects_finds_a_subject_inside_other_text(tmp_path):
    groups = load_facet_groups(write_groups(tmp_path / "g.jsonl", TINY_GROUPS))
    assert leaked_subjects(["An old Tent Review from 2019", "nothing here"], groups) == ["tent review"]


# ------------------------------------------------------------------------------------ metrics
def one_hot(position: int, size: int = 8) -> np.ndarray:
    vector = np.zeros(size, dtype=np.float32)
    vector[position] = 1.0
    return vector


def known_answers_embedder():
    """Passages are basis vectors; each instruction maps to a chosen vector, so every rank is known:
    t1 weight right everywhere; t1 durability right in its group but beaten in the pool by t3's
    pros passage; t1 poles wrong (top: weight); t2 both right; t3 both asks pick pros."""
    passage_vectors = {text: one_hot(i) for i, text in enumerate(p["text"] for g in TINY_GROUPS for p in g["passages"])}
    beaten_in_pool = 0.6 * one_hot(1) + 0.8 * one_hot(5)
    instruction_vectors = {
        "focus on weight and packed size": one_hot(0),
        "does it hold in rain and wind": beaten_in_pool,
        "what about the pole and zipper": one_hot(0),
        "which gas fuel does it use": one_hot(3),
        "is it compact for a trip": one_hot(4),
        "what is good and great": one_hot(5),
        "what is bad and poor": one_hot(5),
    }
    asked: list[tuple[str, str]] = []

    def embed_queries(queries, instructions):
        asked.extend(zip(queries, instructions))
        return np.stack([instruction_vectors[text] for text in instructions])

    def embed_passages(texts):
        return np.stack([passage_vectors[text] for text in texts])

    return embed_queries, embed_passages, asked


def test_metrics_on_a_set_with_known_answers(tmp_path):
    groups = load_facet_groups(write_groups(tmp_path / "g.jsonl", TINY_GROUPS))
    embed_queries, embed_passages, asked = known_answers_embedder()
    scores = score_embedder(groups, embed_queries, embed_passages)
    assert asked[:2] == [
        ("tent review", "focus on weight and packed size"),
        ("tent review", "does it hold in rain and wind"),
    ]
    assert scores.per_item == {
        "first_in_pool": [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0],
        "first_in_group": [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0],
        "all_right": [0.0, 1.0, 0.0],
        "distinct_top": [2 / 3, 1.0, 0.0],  # t1 tops: weight, durability, weight; t3: pros twice
    }
    metrics = scores.metrics
    assert metrics["first_in_group"] == pytest.approx(5 / 7) and metrics["first_in_pool"] == pytest.approx(4 / 7)
    assert metrics["random_first_in_group"] == pytest.approx((3 * (1 / 3) + 4 * (1 / 2)) / 7)
    assert scores.by_domain() == {
        "camp": {"first_in_group": 0.5, "instructions": 2, "groups": 1},
        "gear": {"first_in_group": 0.8, "instructions": 5, "groups": 2},
    }
    stance = scores.by_kind()["stance"]
    assert stance["distinct_top"] == 0.0 and stance["all_right"] == 0.0 and stance["first_in_group"] == 0.5
    intervals = scores.intervals(seed=0)
    assert set(intervals) == set(scores.per_item)
    assert all(low <= metrics[name] <= high for name, (low, high) in intervals.items())


def test_equal_scores_choose_nothing(tmp_path):
    """A ranker that scores every passage alike gets no instruction right and no distinct tops."""
    groups = load_facet_groups(write_groups(tmp_path / "g.jsonl", TINY_GROUPS))
    scores = score_matrix(groups, np.zeros((7, 7)))
    assert scores.metrics["first_in_group"] == 0.0 and scores.metrics["distinct_top"] == 0.0
    with pytest.raises(ValueError, match=r"\[asks, passages\] = \(7, 7\)"):
        score_matrix(groups, np.zeros((7, 6)))


def test_dense_embedders_must_return_normalised_rows(tmp_path):
    groups = load_facet_groups(write_groups(tmp_path / "g.jsonl", TINY_GROUPS))
    embed_queries, embed_passages, _ = known_answers_embedder()
    with pytest.raises(ValueError, match="embed_passages must return L2-normalised rows"):
        score_embedder(groups, embed_queries, lambda texts: 2 * embed_passages(texts))


# ------------------------------------------------------------------------------------ bootstrap
def test_paired_gain_sees_a_small_steady_gain_that_unpaired_intervals_hide():
    rng = np.random.default_rng(0)
    baseline = rng.uniform(0, 1, 60)
    candidate = baseline + 0.05
    gain = paired_gain(candidate, baseline, seed=0)
    assert gain["gain"] == pytest.approx(0.05) and gain["interval"] == pytest.approx([0.05, 0.05])
    assert gain["above_zero"] and gain["share_not_above_zero"] == 0.0
    low_candidate, _ = clustered_interval(candidate)
    _, high_baseline = clustered_interval(baseline)
    assert low_candidate < high_baseline  # alone, the two intervals overlap
    same = paired_gain(baseline, baseline)
    assert same["gain"] == 0.0 and not same["above_zero"] and same["share_not_above_zero"] == 1.0
    with pytest.raises(ValueError, match="same items"):
        paired_gain(candidate, baseline[:-1])


def test_resampling_whole_groups_widens_the_interval_of_correlated_items():
    """Five groups of ten items, each group all right or all wrong: the items are not 50
    independent draws, and the group bootstrap says so."""
    values = np.repeat([1.0, 0.0, 1.0, 1.0, 0.0], 10)
    clusters = np.repeat(np.arange(5), 10)
    item_low, item_high = clustered_interval(values)
    group_low, group_high = clustered_interval(values, clusters)
    assert group_high - group_low > 1.5 * (item_high - item_low)
    with pytest.raises(ValueError, match="one cluster label per item"):
        clustered_interval(values, clusters[:-1])


# ------------------------------------------------------------------------------------ rankers
def test_bm25_and_a_teacher_run_in_the_same_harness(tmp_path):
    groups = load_facet_groups(write_groups(tmp_path / "g.jsonl", TINY_GROUPS))
    teacher_dir = build_tiny_teacher_folder(tmp_path / "teacher")
    run = run_facet_groups(groups, [bm25_ranker(), teacher_ranker(str(teacher_dir))], "tiny.jsonl", seed=0)
    bm25, teacher = run.results
    assert bm25["encoder"]["label"] == "bm25" and teacher["encoder"]["label"] == "teacher:teacher"
    assert bm25["metrics"]["first_in_group"] == 1.0 and bm25["metrics"]["all_right"] == 1.0
    assert bm25["counts"] == {"queries": 7, "documents": 7, "groups": 3}
    assert 0.0 <= teacher["metrics"]["first_in_group"] <= 1.0
    [comparison] = run.comparisons
    assert (comparison["candidate"], comparison["baseline"]) == ("bm25", "teacher:teacher")
    expected = bm25["metrics"]["first_in_group"] - teacher["metrics"]["first_in_group"]
    assert comparison["gains"]["first_in_group"]["gain"] == pytest.approx(expected, abs=1e-4)
    assert run.details[0]["per_item"]["first_in_group"] == [1.0] * 7


def test_evaluate_scores_the_dev_set_for_the_python_api(tiny_encoder):
    from instemb_rag.eval import evaluate

    result = evaluate(tiny_encoder, "facet-groups", label="tiny")
    groups = load_facet_groups(DEV_GROUPS)
    assert result["task"] == "facet-groups" and result["encoder"]["label"] == "tiny"
    assert result["counts"]["groups"] == len(groups) and set(result["intervals"]) >= {"first_in_group", "all_right"}


# ------------------------------------------------------------------------------------ command line
def test_cli_scores_the_model_beside_bm25(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    groups = write_groups(tmp_path / "groups.jsonl", TINY_GROUPS)
    output = tmp_path / "facets.json"
    args = ["eval", "facet-groups", "--model", str(tiny_model_dir), "--groups", str(groups), "--baseline", "bm25"]
    args += ["--device", "cpu", "--no-progress", "--json", str(output)]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "first_in_group" in result.output and "bm25" in result.output and "paired gains" in result.output
    document = json.loads(output.read_text())
    labels = [entry["encoder"]["label"] for entry in document["results"]]
    assert labels == [f"instemb {tiny_model_dir}", "bm25"]
    assert document["results"][1]["metrics"]["first_in_group"] == 1.0
    [comparison] = document["facet_groups"]["comparisons"]
    assert comparison["baseline"] == "bm25" and comparison["gains"]["first_in_group"]["gain"] <= 0
    assert [detail["label"] for detail in document["facet_groups"]["details"]] == labels


def test_cli_refuses_a_missing_groups_file_and_facet_options_without_the_task(tmp_path, tiny_model_dir):
    missing = CliRunner().invoke(
        app, ["eval", "facet-groups", "--model", str(tiny_model_dir), "--groups", str(tmp_path / "none.jsonl")]
    )
    assert missing.exit_code == 2 and "none.jsonl does not exist" in missing.output
    stray = CliRunner().invoke(app, ["eval", "scifact", "--model", str(tiny_model_dir), "--baseline", "bm25"])
    assert stray.exit_code == 2 and "--baseline only apply to the facet-groups task" in stray.output
