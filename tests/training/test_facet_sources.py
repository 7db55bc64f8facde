"""Facet groups from general-domain data (datasets/facet_sources/): the splits that keep dev
subjects and the held-out source unread, passages as users index them, and varied wordings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from instemb_rag.datasets.facet_groups import load_facet_groups
from instemb_rag.datasets.facet_sources.build import build_facet_groups, is_dev_subject
from instemb_rag.datasets.facet_sources.passages import cut, join, sentence_around
from instemb_rag.datasets.facet_sources.reviews import absa_aspect
from instemb_rag.errors import InstEmbError

MAN_SECTIONS = {
    "DESCRIPTION": "The {s} command copies data from one place to another place in blocks.",
    "RETURN VALUE": "On success {s} returns zero; on failure it returns minus one and sets errno.",
    "ERRORS": "EINVAL is set when an argument of {s} is out of range; EIO on a read failure.",
    "LIBRARY": "Standard C library (libc, -lc).",
}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _data_root(tmp_path: Path, pages: int = 30) -> Path:
    root = tmp_path / "data"
    facets = root / "facets_general"
    _write(
        facets / "manpages.jsonl",
        [
            {"subject": f"cmd{n}.1", "summary": "", "facet": facet, "passage": text.format(s=f"cmd{n}")}
            for n in range(pages)
            for facet, text in MAN_SECTIONS.items()
        ],
    )
    absa = []
    for review in range(4):
        for category, sentence in [
            ("FOOD#QUALITY", "The pasta was cooked perfectly and the sauce was rich."),
            ("SERVICE#GENERAL", "Our waiter was attentive and brought water without asking."),
            ("AMBIENCE#GENERAL", "Candles and soft jazz made the room feel calm and cosy."),
            ("RESTAURANT#GENERAL", "Overall a place we will return to soon enough."),
            ("FOOD#QUALITY", "Great food and great service from start to end."),
            ("SERVICE#GENERAL", "Great food and great service from start to end."),
        ]:
            absa.append({"subject": f"r{review}", "review": f"r{review}", "domain": "restaurants",
                         "facet": category, "polarity": "positive", "passage": sentence})  # fmt: skip
    _write(facets / "absa16_restaurants_laptops.jsonl", absa)
    _write(
        facets / "factbook_fields.jsonl",
        [
            {"subject": country, "section": "x", "facet": field, "passage": f"{field} of {country}: {text}"}
            for country in ("Atlantis", "Utopia", "Erewhon")
            for field, text in [
                ("Climate", "mild winters and hot, dry summers along the coast"),
                ("Languages", "the official language is spoken by most of the people"),
                ("Capital", "the capital city lies on the northern river delta"),
            ]
        ],
    )
    perspectrum = []
    for claim_id, split in [(1, "train"), (2, "train"), (3, "test")]:
        for stance, text in [("SUPPORT", "It keeps people safe from harm."), ("UNDERMINE", "It costs too much.")]:
            perspectrum.append({"claim_id": claim_id, "claim": f"Claim number {claim_id} should be law",
                                "split": split, "stance": stance, "perspective": text})  # fmt: skip
    _write(root / "stance_args" / "perspectrum.jsonl", perspectrum)
    return root


def _build(tmp_path, **options):
    out = tmp_path / "facets"
    summary = build_facet_groups(out, _data_root(tmp_path), dev_groups_path=None, log=lambda _: None, **options)
    return out, summary


def test_dev_subjects_and_the_heldout_source_are_never_in_training(tmp_path):
    out, summary = _build(tmp_path, dev_fraction=0.3)
    train = load_facet_groups(out / "train.jsonl")
    dev = load_facet_groups(out / "dev_subjects.jsonl")
    heldout = load_facet_groups(out / "dev_factbook.jsonl")
    assert {g.subject for g in train}.isdisjoint({g.subject for g in dev})
    assert not any("Atlantis" in json.dumps(g.__dict__, default=str) for g in train)
    assert {g.subject for g in heldout} == {"factbook:Atlantis", "factbook:Utopia", "factbook:Erewhon"}
    assert summary.skipped.keys() == {"subjqa", "numpy_scipy", "powershell", "argkp", "fnc1"}  # files absent
    # the split is a property of the subject, not of the run: a subject's side never changes
    for group in train:
        source, subject = group.subject.split(":", 1)
        assert not is_dev_subject(source, subject, 0.3)


def test_perspectrum_reads_only_the_training_split_as_stance_groups(tmp_path):
    out, _ = _build(tmp_path, dev_fraction=0.0)
    stance = [g for g in load_facet_groups(out / "train.jsonl") if g.kind == "stance"]
    assert sorted(g.query for g in stance) == ["Claim number 1 should be law", "Claim number 2 should be law"]
    for group in stance:
        assert {p.facet for p in group.passages} == {"support", "undermine"}
        support = group.passages[group.target_of(next(i for i in group.instructions if i.facet == "support"))]
        assert support.text == "It keeps people safe from harm."


def test_absa_drops_catch_all_categories_and_sentences_filed_under_two_aspects(tmp_path):
    out, _ = _build(tmp_path, dev_fraction=0.0)
    reviews = [g for g in load_facet_groups(out / "train.jsonl") if g.domain == "restaurants"]
    assert len(reviews) == 4
    for group in reviews:
        assert {p.facet for p in group.passages} == {"food", "service", "ambience"}
        texts = " ".join(p.text for p in group.passages)
        assert "Great food and great service" not in texts  # it would answer two instructions
        assert "Overall a place" not in texts  # RESTAURANT#GENERAL says nothing specific
    assert absa_aspect("LAPTOP#PRICE") == "prices" and absa_aspect("LAPTOP#GENERAL") is None


def test_man_pages_keep_real_sections_and_instructions_are_worded_not_labels(tmp_path):
    out, _ = _build(tmp_path, dev_fraction=0.0)
    pages = [g for g in load_facet_groups(out / "train.jsonl") if g.subject.startswith("manpages:")]
    assert len(pages) == 30
    assert all({p.facet for p in g.passages} == {"DESCRIPTION", "RETURN VALUE", "ERRORS"} for g in pages)
    wordings = [i.text for g in pages for i in g.instructions]
    with_label = [text for text in wordings if any(label in text.lower() for label in ("return value", "description"))]
    assert len(with_label) < len(wordings) / 3  # most name the aspect in other words
    assert len(set(wordings)) > 20  # many wordings, not one per label
    assert any(g.query == g.subject.split(":")[1].rsplit(".", 1)[0] for g in pages)  # some queries are the bare name


def test_the_build_is_reproducible_and_rejects_unknown_sources(tmp_path):
    first, _ = _build(tmp_path / "a")
    second, _ = _build(tmp_path / "b")
    assert (first / "train.jsonl").read_text() == (second / "train.jsonl").read_text()
    with pytest.raises(InstEmbError, match="Unknown facet source"):
        build_facet_groups(tmp_path / "x", tmp_path / "data", sources=["hotels"], log=lambda _: None)


def test_no_data_at_all_is_a_clear_error(tmp_path):
    with pytest.raises(InstEmbError, match="No training groups built"):
        build_facet_groups(tmp_path / "x", tmp_path / "nowhere", dev_groups_path=None, log=lambda _: None)


def test_passages_are_cut_at_sentences_and_joined_without_repeats():
    long = " ".join(f"Sentence {n} has exactly six words." for n in range(50))
    assert cut(long, 20).endswith("words.") and len(cut(long, 20).split()) <= 20
    assert join(["A b c.", "A  b c.", "D e f."]) == "A b c. D e f."
    text = "First one here. The battery lasts ten hours. Last one."
    assert sentence_around(text, "lasts ten hours", neighbours=0) == "The battery lasts ten hours."
    assert sentence_around(text, "not there") is None


def test_the_command_writes_the_files_and_refuses_an_unknown_source(tmp_path):
    from typer.testing import CliRunner

    from instemb_rag.cli import app

    root, out = _data_root(tmp_path), tmp_path / "out"
    result = CliRunner().invoke(app, ["build-facet-groups", "--data-root", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["heldout_source"] == {"factbook": 3}
    assert {path.name for path in out.glob("*.jsonl")} >= {"train.jsonl", "dev_factbook.jsonl"}
    result = CliRunner().invoke(app, ["build-facet-groups", "--data-root", str(root), "--source", "hotels"])
    assert result.exit_code == 2 and "hotels" in result.output


def test_groups_naming_a_hand_written_dev_subject_are_dropped(tmp_path):
    root = _data_root(tmp_path)
    dev = tmp_path / "dev.jsonl"
    passages = [{"id": f"d-p{n}", "facet": f"f{n}", "text": "x y z"} for n in range(2)]
    dev.write_text(json.dumps({"group": "d", "domain": "software", "subject": "cmd7", "query": "cmd7?",
                               "passages": passages,
                               "instructions": [{"facet": f"f{n}", "text": "ask"} for n in range(2)]}) + "\n")  # fmt: skip
    summary = build_facet_groups(tmp_path / "out", root, dev_fraction=0.0, dev_groups_path=dev, log=lambda _: None)
    train = load_facet_groups(tmp_path / "out" / "train.jsonl")
    assert summary.dropped_dev_names == 1
    assert "manpages:cmd7.1" not in {g.subject for g in train} and "manpages:cmd8.1" in {g.subject for g in train}
