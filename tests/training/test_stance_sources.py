"""ArgKP and FNC-1 as stance facet sources (datasets/facet_sources/argkp.py, fnc1.py), on tiny
hand-written rows: the two sides, what is left out, the caps, and whole topics / stories held out."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from instemb_rag.datasets.contrast_sets import STANCE_EVAL_PHRASINGS
from instemb_rag.datasets.facet_groups import load_facet_groups
from instemb_rag.datasets.facet_sources import argkp
from instemb_rag.datasets.facet_sources.argkp import read_argkp
from instemb_rag.datasets.facet_sources.build import build_facet_groups, is_dev_subject
from instemb_rag.datasets.facet_sources.fnc1 import REPORT_ASPECTS, lead, read_fnc1
from instemb_rag.datasets.facet_sources.wording import instruction
from instemb_rag.errors import InstEmbError
from instemb_rag.eval.perspectrum import EVAL_PHRASINGS

TOPICS = [f"We should ban gadget number {n}" for n in range(12)]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _argkp_rows() -> list[dict]:
    rows = []
    for topic in [*TOPICS, "We should legalize cannabis"]:  # the last debates a PERSPECTRUM test claim
        for n in range(3):
            rows.append({"topic": topic, "stance": 1, "argument": f"`gadget {n} harms children and the planet alike",
                         "key_point": "k", "match": int(n == 2), "split": "train"})  # fmt: skip
            rows.append({"topic": topic, "stance": -1, "argument": f"gadget {n} brings joy and useful jobs to many",
                         "key_point": "k", "match": 0, "split": "dev"})  # fmt: skip
        rows.append({"topic": topic, "stance": 1, "argument": "Too short.", "key_point": "k", "match": 1})
        for stance in (1, -1):  # labelled both ways: neither side may use it
            rows.append({"topic": topic, "stance": stance, "argument": "It depends on the gadget entirely.",
                         "key_point": "k", "match": 1})  # fmt: skip
    return rows


def _fnc1(folder: Path) -> None:
    long_body = "Sentence one is here. Sentence two follows. Sentence three ends the lead. Sentence four is cut."
    bodies = {
        "1": "Officials confirmed the werewolf adoption on Tuesday. " + "More detail. " * 80,
        "2": "The werewolf story is a hoax, experts said. " + long_body,
        "3": long_body,
        "4": "Witnesses confirmed the second story in full detail.",
        "5": "Police denied every claim made in the second story.",
        "6": "This body only discusses the matter at some length.",
    }
    _write(folder / "fnc1_bodies.jsonl", [{"body_id": key, "body": text} for key, text in bodies.items()])
    stances = [
        ("President adopts boy to end werewolf curse", "1", "agree"),
        ("President adopts boy to end werewolf curse", "2", "disagree"),
        ("President adopts boy to end werewolf curse", "6", "discuss"),
        ("Werewolf adoption story was invented", "2", "agree"),  # the same bodies, the other way round
        ("Werewolf adoption story was invented", "1", "disagree"),
        ("Second story happened", "4", "agree"),
        ("Second story happened", "5", "disagree"),
        ("Second story happened", "3", "unrelated"),
        ("Only agreeing coverage here", "4", "agree"),
    ]
    _write(folder / "fnc1_stances.jsonl", [{"headline": h, "body_id": b, "stance": s} for h, b, s in stances])


def test_argkp_pairs_the_two_sides_of_a_topic_and_leaves_out_what_would_mislead(tmp_path, monkeypatch):
    folder = tmp_path / "stance_args"
    _write(folder / "argkp.jsonl", _argkp_rows())
    monkeypatch.setattr(argkp, "ARGUMENTS_PER_STANCE", 2)
    drafts = read_argkp(folder)
    assert {d.name for d in drafts} == set(TOPICS)  # the topic overlapping PERSPECTRUM's test split is out
    assert len(drafts) == 2 * len(TOPICS)  # capped: two subjects a topic though three arguments a side
    for draft in drafts:
        assert draft.kind == "stance" and draft.holdout_key == draft.name and draft.subject.startswith(draft.name)
        assert "harms" in draft.passages["support"] and "joy" in draft.passages["undermine"]
        assert not draft.passages["support"].startswith("`") and draft.passages["support"][0].isupper()
    texts = {text for d in drafts for text in d.passages.values()}
    assert not {"Too short.", "It depends on the gadget entirely."} & texts
    first = [d for d in drafts if d.name == TOPICS[0]]
    assert "Gadget 2 harms" in {d.passages["support"][:14] for d in first}  # a key point matched it: kept first


def test_fnc1_keeps_headlines_with_both_sides_leads_only_and_no_body_twice(tmp_path):
    folder = tmp_path / "stance_args"
    _fnc1(folder)
    drafts = read_fnc1(folder)
    names = sorted(d.name for d in drafts)
    # the two werewolf headlines share bodies 1 and 2: only one of them gets them
    assert len(names) == 2 and "Second story happened" in names and "Only agreeing coverage here" not in names
    werewolf = next(d for d in drafts if d.name != "Second story happened")
    other = next(d for d in drafts if d.name == "Second story happened")
    assert werewolf.holdout_key != other.holdout_key  # two stories
    texts = [text for d in drafts for text in d.passages.values()]
    assert len(texts) == len(set(texts)) and all(len(text) <= 400 for text in texts)
    assert other.passages == {"agree": "Witnesses confirmed the second story in full detail.",
                              "disagree": "Police denied every claim made in the second story."}  # fmt: skip
    (folder / "fnc1_bodies.jsonl").unlink()
    with pytest.raises(InstEmbError, match="fnc1_bodies.jsonl"):
        read_fnc1(folder)


def test_a_lead_is_three_sentences_at_most_and_about_400_characters():
    text = "Sentence one is here. Sentence two follows!  Sentence three ends it? Sentence four is cut."
    assert lead(text) == "Sentence one is here. Sentence two follows! Sentence three ends it?"
    assert lead('He said "it is true." Then he left. More.', sentences=2) == 'He said "it is true." Then he left.'
    assert lead("word " * 200).endswith("word") and len(lead("word " * 200)) <= 400
    long_second = "Short first. " + "x" * 500 + "."
    assert lead(long_second) == "Short first."


def test_build_holds_out_whole_topics_and_instructions_never_use_the_eval_wordings(tmp_path):
    root = tmp_path / "data"
    _write(root / "stance_args" / "argkp.jsonl", _argkp_rows())
    _fnc1(root / "stance_args")
    out = tmp_path / "facets"
    summary = build_facet_groups(
        out,
        root,
        sources=["argkp", "fnc1"],
        heldout_source=None,
        dev_fraction=0.5,
        dev_groups_path=None,
        log=lambda _: None,
    )
    train, dev = load_facet_groups(out / "train.jsonl"), load_facet_groups(out / "dev_subjects.jsonl")
    assert summary.train["argkp"] and summary.dev_subjects["argkp"]
    assert {g.query for g in train}.isdisjoint({g.query for g in dev})  # no topic on both sides
    for group in train:
        assert group.kind == "stance" and len(group.passages) == 2
        if group.subject.startswith("argkp:"):
            assert not is_dev_subject("argkp", group.query, 0.5)
    eval_wordings = {*EVAL_PHRASINGS.values(), *STANCE_EVAL_PHRASINGS.values()}
    rng = random.Random(0)
    aspects = [*argkp.ARGUMENT_ASPECTS.values(), *REPORT_ASPECTS.values()]
    drawn = {instruction(aspect, rng) for aspect in aspects for _ in range(200)}
    assert len(drawn) > 60 and not drawn & eval_wordings
