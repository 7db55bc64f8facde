"""Distillation texts (datasets/geometry_texts.py) built from a tiny data root in the real file
formats of ../shared/data: roles, positives, groups, held-out splits, duplicates, dev subjects,
missing sets, caps and determinism."""

import json
import re

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.datasets.builders import build_set
from instemb_rag.datasets.contrast_sets import FACET_EVAL_PHRASINGS, FACET_PHRASINGS, STANCE_EVAL_PHRASINGS
from instemb_rag.datasets.facet_groups import load_facet_groups
from instemb_rag.datasets.geometry_sources import chunk_spans, race_query_text
from instemb_rag.datasets.geometry_texts import build_geometry_texts, water_fill
from instemb_rag.datasets.instruction_templates import TEMPLATES, all_instructions, generic_instruction
from instemb_rag.errors import InstEmbError
from instemb_rag.eval.steering import HELD_OUT_FRACTION, HELD_OUT_SEED

WORDS = "amber birch cedar dune ember fjord grove heath inlet juniper".split()
SHARED_SENTENCE = "A brown dog is running through the tall wet grass."


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _tsv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("\t".join(map(str, row)) for row in [header, *rows]) + "\n")


def _sentence(n, topic):
    return f"The {WORDS[n % 10]} {topic} number {n} is described here in plain and simple words for readers."


def _msmarco(root):
    passages = [{"_id": str(100 + n), "title": "", "text": _sentence(n, "harbour")} for n in range(10)]
    passages.append({"_id": "999", "title": "", "text": _sentence(3, "harbour")})  # a copy of 103
    queries = [
        {"_id": str(n), "text": f"what is the {WORDS[n % 10]} harbour {n}", "answers": [f"It is {n}."]}
        for n in range(11)
    ]
    _jsonl(root / "msmarco_qa" / "corpus.jsonl", passages)
    _jsonl(root / "msmarco_qa" / "queries.jsonl", queries)
    qrels = [(n, 100 + n, 1) for n in range(10)] + [(10, 999, 1)]
    _tsv(root / "msmarco_qa" / "qrels.tsv", ("query-id", "corpus-id", "score"), qrels)


def _race(root):
    rows = []
    for n in range(10):
        article = "\n".join(_sentence(n * 10 + k, "village festival") for k in range(12))
        qas = [
            {
                "question": "The festival number is _ .",
                "options": [],
                "answer": "A",
                "answer_text": f"number {n * 10 + 11}",
            },
            {"question": "What is the best title of the passage?", "options": [], "answer": "B", "answer_text": "x"},
        ]
        rows.append({"split": "train", "level": "high", "id": f"high{n}.txt", "article": article, "qas": qas})
    _jsonl(root / "race" / "race_articles.jsonl", rows)


def _medquad(root):
    rows = []
    for n in range(10):
        focus = f"{WORDS[n].title()} syndrome"
        for k, qtype in enumerate(("symptoms", "treatment")):
            answer = f"{focus} {qtype}: " + _sentence(n * 2 + k, "clinical finding")
            rows.append(
                {
                    "collection": "1_X",
                    "doc_file": f"{n}.xml",
                    "qid": f"0-{k}",  # MedQuAD repeats qids across the documents of one collection
                    "focus": focus,
                    "qtype": qtype,
                    "question": f"What are the {qtype} of {focus} ?",
                    "answer": answer,
                }
            )
    _jsonl(root / "medquad" / "medquad_qa.jsonl", rows)


def _covid(root):
    paragraphs = []
    for doc in range(2):
        context = "\n".join(_sentence(doc * 20 + k, "coronavirus sample") for k in range(15))
        start = context.index(f"number {doc * 20 + 12}")
        qas = [
            {
                "question": f"Which sample is number {doc * 20 + 12}?",
                "id": doc,
                "is_impossible": False,
                "answers": [{"text": f"number {doc * 20 + 12}", "answer_start": start}],
            }
        ]
        paragraphs.append({"context": context, "document_id": doc, "qas": qas})
    (root / "covid_qa").mkdir(parents=True)
    (root / "covid_qa" / "covid_qa.json").write_text(json.dumps({"data": [{"paragraphs": paragraphs}]}))


def _pubmedqa(root):
    rows = [
        {
            "_id": str(900 + n),
            "question": f"Does enzyme {WORDS[n]} slow tissue repair?",
            "contexts": [_sentence(n, "enzyme trial"), _sentence(n + 20, "repair measure")],
            "long_answer": f"Enzyme {WORDS[n]} " + _sentence(n + 40, "repair result"),
            "final_decision": "yes",
        }
        for n in range(10)
    ]
    _jsonl(root / "pubmedqa" / "pqal.jsonl", rows)


def _scifact(root):
    corpus = [{"_id": str(500 + n), "title": f"Study {n}", "text": _sentence(n, "cell assay")} for n in range(8)]
    _jsonl(root / "scifact" / "corpus.jsonl", corpus)
    claims = [{"_id": str(n), "text": f"Gene {WORDS[n]} raises the rate of {n} cells."} for n in range(8)]
    _jsonl(root / "scifact" / "queries.jsonl", claims)
    _tsv(root / "scifact" / "qrels.tsv", ("query-id", "corpus-id", "score"), [(n, 500 + n, 1) for n in range(8)])
    stance = [
        {
            "claim_id": str(n),
            "claim": claims[n]["text"],
            "doc_id": str(500 + n),
            "label": "SUPPORT" if n % 2 else "CONTRADICT",
            "instruction_match": "Find a study whose findings support this claim.",
            "instruction_mismatch": "Find a study whose findings contradict this claim.",
        }
        for n in range(6)  # claims 6 and 7 have no stance pair: never queried, their abstracts left out
    ]
    _jsonl(root / "scifact" / "stance.jsonl", stance)


def _vaswani(root):
    _jsonl(
        root / "vaswani" / "corpus.jsonl",
        [{"_id": str(n), "title": "", "text": _sentence(n, "microwave")} for n in range(3)],
    )
    _jsonl(root / "vaswani" / "queries.jsonl", [{"_id": "1", "text": "microwave measurement of liquids"}])
    _tsv(root / "vaswani" / "qrels.tsv", ("query-id", "corpus-id", "score"), [(1, 2, 1)])


def _climate(root):
    rows = []
    for n in range(4):
        evidences = [
            {
                "evidence_id": f"A:{n}{k}",
                "evidence_label": label,
                "article": "Arctic ice",
                "evidence": _sentence(n * 3 + k, f"ice report {label.lower()}"),
            }
            for k, label in enumerate(("SUPPORTS", "REFUTES", "NOT_ENOUGH_INFO"))
        ]
        rows.append(
            {
                "claim_id": str(n),
                "claim": f"Arctic {WORDS[n]} ice shrank {n} percent.",
                "claim_label": "SUPPORTS",
                "evidences": evidences,
            }
        )
    _jsonl(root / "climate_fever" / "climate-fever.jsonl", rows)


def _condaqa(root):
    rows = []
    for n in range(3):
        original = _sentence(n, "lake law")
        for edit, text in enumerate((original, original.replace("plain", "not plain"))):
            rows.append(
                {
                    "QuestionID": f"q{n}",
                    "PassageEditID": edit,
                    "original cue": "not",
                    "original passage": original,
                    "sentence1": text,
                    "sentence2": "Is it plain?",
                    "label": "YES",
                }
            )
    _jsonl(root / "condaqa" / "dev.jsonl", rows)


def _nli(root):
    header = ("pair_ID", "sentence_A", "sentence_B", "entailment_label", "relatedness_score", "SemEval_set")
    rows = [
        (n, f"A {WORDS[n]} man is playing a guitar {n}.", f"A man is playing music {n}.", "ENTAILMENT", 4.5, "TRAIN")
        for n in range(10)
    ]
    rows.append((10, SHARED_SENTENCE, "A dog runs.", "ENTAILMENT", 4.0, "TRAIN"))
    _tsv(root / "sick" / "SICK.txt", header, rows)
    for name in ("MNLI.txt", "SNLI.txt", "RTE.txt"):
        _tsv(
            root / "negation_nli" / name,
            ("index", "Text", "Hypothesis", "gold_label"),
            [(0, f"{name} text is here.", "It is not.", "contradiction")],
        )


def _stsb(root):
    _jsonl(
        root / "stsb" / "train.jsonl",
        [{"sentence1": SHARED_SENTENCE, "sentence2": "A cat sleeps on a warm mat.", "score": 1.0}],
    )
    _jsonl(
        root / "stsb" / "dev.jsonl",
        [{"sentence1": "Two kids fly a red kite.", "sentence2": "Children fly a kite.", "score": 4.0}],
    )
    _jsonl(
        root / "stsb" / "test.jsonl",
        [{"sentence1": "Two kids fly a red kite.", "sentence2": "A plane lands.", "score": 0.5}],
    )


GROUPS = [
    {
        "group": "t001",
        "domain": "products",
        "subject": "Osprey Lantern 300",
        "query": "Is the Osprey Lantern 300 any good?",
        "passages": [
            {"id": "t001-p1", "facet": "battery", "text": "The Osprey Lantern 300 runs for nine hours on one charge."},
            {"id": "t001-p2", "facet": "brightness", "text": "At full power the Osprey Lantern 300 throws 300 lumens."},
        ],
        "instructions": [
            {"facet": "battery", "text": "Only battery life matters."},
            {"facet": "brightness", "text": "How bright is it?"},
        ],
    },
]


def _dev_group(gid, subject):
    """A dev facet group (eval_sets/ format) about ``subject``."""
    passages = [{"id": f"{gid}-p{n}", "facet": facet, "text": f"{subject}: {facet}."} for n, facet in enumerate("ab")]
    instructions = [{"facet": facet, "text": f"Only {facet}."} for facet in "ab"]
    return GROUPS[0] | {"group": gid, "subject": subject, "passages": passages, "instructions": instructions}


@pytest.fixture()
def data_root(tmp_path):
    root = tmp_path / "data"
    for write in (_msmarco, _race, _medquad, _covid, _pubmedqa, _scifact, _vaswani, _climate, _condaqa, _nli, _stsb):
        write(root)
    return root


@pytest.fixture()
def groups_file(tmp_path):
    _jsonl(tmp_path / "groups.jsonl", GROUPS)
    return tmp_path / "groups.jsonl"


def _build(tmp_path, data_root, groups_file, name="texts.jsonl", dev=None, **options):
    lines = []
    summary = build_geometry_texts(
        tmp_path / name, data_root, groups_path=groups_file, dev_groups_path=dev, log=lines.append, **options
    )
    items = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
    return summary, items, lines


def test_every_item_has_a_role_and_every_positive_is_a_passage_in_the_file(tmp_path, data_root, groups_file):
    summary, items, _ = _build(tmp_path, data_root, groups_file)
    by_id = {item["id"]: item for item in items}
    assert len(by_id) == len(items)
    assert {item["role"] for item in items} == {"query", "passage"}
    assert set(summary.counts) == {item["source"] for item in items}
    for item in items:
        assert set(item) == {"id", "role", "text", "instruction", "group", "positive", "source"}
        if item["positive"] is not None:
            assert item["role"] == "query" and by_id[item["positive"]]["role"] == "passage"
    assert by_id["msmarco:q2"]["positive"] == "msmarco:p102"
    # RACE: the cloze is filled, the exam-text question left out, the chunk holding the answer found.
    race = [item for item in items if item["source"] == "race" and item["role"] == "query"]
    assert race and all("_" not in q["text"] and "title" not in q["text"] for q in race)
    assert all(
        q["positive"] and f"number {q['text'].rsplit('number ', 1)[1].rstrip('.')}" in by_id[q["positive"]]["text"]
        for q in race
    )
    covid = [item for item in items if item["source"] == "covid_qa" and item["role"] == "query"]
    assert covid and all(q["text"].split()[-1].rstrip("?") in by_id[q["positive"]]["text"] for q in covid)


def test_in_group_queries_point_to_their_facet_passage(tmp_path, data_root, groups_file):
    _, items, _ = _build(tmp_path, data_root, groups_file)
    by_id = {item["id"]: item for item in items}
    group = [item for item in items if item["group"] == "t001"]
    instructed = {q["instruction"]: by_id[q["positive"]]["text"] for q in group if q["instruction"]}
    assert "nine hours" in instructed["Only battery life matters."]
    assert "300 lumens" in instructed["How bright is it?"]
    assert any(q["role"] == "query" and q["instruction"] is None and q["positive"] is None for q in group)
    # MedQuAD: the focus alone under two facet instructions, each pointing to its own facet's answer.
    facet_queries = [
        i for i in items if i["source"] == "medquad" and i["role"] == "query" and i["text"].endswith("syndrome")
    ]
    by_focus = {}
    for query in facet_queries:
        by_focus.setdefault(query["group"], []).append(query)
    assert by_focus and all(len({q["positive"] for q in queries}) == 2 for queries in by_focus.values())
    stance = [i for i in items if i["source"] == "climate_fever" and i["id"].endswith(("supports", "refutes"))]
    for query in stance:
        label = query["id"].rsplit(":", 1)[1]
        assert f"ice report {label}" in by_id[query["positive"]]["text"]


def test_builders_held_out_groups_and_eval_texts_are_never_read(tmp_path, data_root, groups_file):
    summary, items, _ = _build(tmp_path, data_root, groups_file)
    texts = " ".join(item["text"] for item in items)
    _, medquad_heldout = build_set("medquad_facets", data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    _, climate_heldout = build_set("climate_fever_stance", data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    _, scifact_heldout = build_set("scifact_stance_query", data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    assert medquad_heldout and climate_heldout and scifact_heldout
    for record in medquad_heldout + climate_heldout + scifact_heldout:
        assert record.text not in texts
    assert summary.counts["medquad"].heldout >= 1 and summary.counts["climate_fever"].heldout >= 1
    # Claims without a stance pair stay unread, and so do the abstracts they cite.
    assert "Gene " + WORDS[6] not in texts and "Study 6" not in texts
    assert "Two kids fly a red kite." not in texts  # an STS-B test sentence (the STS-B evaluation)


def test_pubmedqa_gives_whole_abstracts_its_questions_point_to_and_skips_held_out_ones(
    tmp_path, data_root, groups_file
):
    summary, items, _ = _build(tmp_path, data_root, groups_file)
    by_id = {item["id"]: item for item in items}
    abstracts = [item for item in items if item["id"].startswith("pubmedqa:a")]
    questions = [item for item in items if item["source"] == "pubmedqa" and item["role"] == "query"]
    assert abstracts and questions
    for abstract in abstracts:  # both context paragraphs, joined: one whole abstract per passage
        assert "enzyme trial" in abstract["text"] and "repair measure" in abstract["text"]
    for question in questions:
        assert by_id[question["positive"]]["id"].startswith("pubmedqa:a")
    _, heldout = build_set("pubmedqa", data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    assert heldout
    texts = " ".join(item["text"] for item in items)
    for record in heldout:  # the steering evaluation's held-out abstracts, questions and answers
        assert record.text not in texts and record.instruction not in texts and record.output not in texts
    assert summary.counts["pubmedqa"].heldout == len(heldout)


def test_duplicates_are_written_once_and_their_queries_repointed(tmp_path, data_root, groups_file):
    summary, items, _ = _build(tmp_path, data_root, groups_file)
    assert sum(item["text"] == SHARED_SENTENCE for item in items) == 1  # in SICK and in STS-B
    assert summary.counts["stsb"].duplicates == 1
    by_id = {item["id"]: item for item in items}
    assert "msmarco:p999" not in by_id and by_id["msmarco:q10"]["positive"] == "msmarco:p103"


def test_items_naming_a_dev_subject_are_dropped(tmp_path, data_root, groups_file):
    dev = tmp_path / "dev.jsonl"
    _jsonl(dev, [_dev_group("d001", "CEDAR HARBOUR"), _dev_group("d002", "osprey lantern")])
    summary, items, lines = _build(tmp_path, data_root, groups_file, dev=dev)
    assert not [
        item for item in items if "cedar harbour" in item["text"].lower() or "osprey lantern" in item["text"].lower()
    ]
    assert summary.counts["facet_groups"].dev_subject == len(GROUPS[0]["passages"]) + 1 + len(GROUPS[0]["instructions"])
    assert summary.counts["msmarco"].dev_subject >= 1
    assert any("dropped" in line and "2 dev subjects" in line for line in lines)


def test_a_missing_set_is_skipped_with_a_message_naming_it(tmp_path, data_root, groups_file):
    (data_root / "vaswani" / "qrels.tsv").unlink()
    summary, items, lines = _build(tmp_path, data_root, groups_file)
    assert "vaswani" in summary.skipped and "qrels.tsv" in summary.skipped["vaswani"]
    assert any(line.startswith("skipped vaswani") for line in lines)
    assert not [item for item in items if item["source"] == "vaswani"] and items


def test_same_seed_same_file_other_seed_other_instructions(tmp_path, data_root, groups_file):
    _build(tmp_path, data_root, groups_file, "a.jsonl", seed=1)
    _build(tmp_path, data_root, groups_file, "b.jsonl", seed=1)
    _, other, _ = _build(tmp_path, data_root, groups_file, "c.jsonl", seed=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    first = {i["id"]: i["instruction"] for i in map(json.loads, (tmp_path / "a.jsonl").read_text().splitlines())}
    assert first != {item["id"]: item["instruction"] for item in other}


def test_cap_spreads_over_sources_keeps_query_share_and_positives(tmp_path, data_root, groups_file):
    summary, items, _ = _build(tmp_path, data_root, groups_file, max_items=60, query_share=0.5)
    ids = {item["id"] for item in items}
    assert 58 <= len(items) <= 62 and summary.total == len(items)
    assert 25 <= sum(item["role"] == "query" for item in items) <= 31
    assert all(item["positive"] in ids for item in items if item["positive"])
    assert len({item["source"] for item in items}) >= 8
    assert water_fill({"small": 2, "big": 100, "mid": 10}, 30) == {"small": 2, "mid": 10, "big": 18}


def test_unknown_source_and_bad_groups_file_are_explained(tmp_path, data_root, groups_file):
    with pytest.raises(InstEmbError, match="Unknown source"):
        build_geometry_texts(tmp_path / "x.jsonl", data_root, ["wikipedia"], log=lambda _: None)
    bad = dict(GROUPS[0], instructions=[{"facet": "weight", "text": "How heavy?"}, GROUPS[0]["instructions"][0]])
    _jsonl(
        tmp_path / "bad.jsonl",
        [GROUPS[0] | {"group": "t000", "passages": [dict(p, id="x" + p["id"]) for p in GROUPS[0]["passages"]]}, bad],
    )
    with pytest.raises(InstEmbError, match=r"bad.jsonl:2.*'weight'"):
        load_facet_groups(tmp_path / "bad.jsonl")


def test_cli_writes_the_file_and_prints_counts(tmp_path, data_root, groups_file):
    out = tmp_path / "cli.jsonl"
    args = ["build-distill-texts", "--out", str(out), "--data-root", str(data_root), "--groups", str(groups_file)]
    result = CliRunner().invoke(app, [*args, "--source", "msmarco", "--source", "facet_groups", "--max-items", "20"])
    assert result.exit_code == 0, result.output
    assert "msmarco" in result.output and f"Wrote {len(out.read_text().splitlines())} items" in result.output
    assert CliRunner().invoke(app, [*args, "--source", "nope"]).exit_code == 2


def test_templates_are_many_varied_and_never_the_evaluation_wordings():
    assert set(TEMPLATES) == {"aspect", "purpose", "audience", "stance", "format", "exclusion"}
    assert sum(len(templates) for templates in TEMPLATES.values()) >= 60
    wordings = all_instructions()
    assert not wordings & (set(FACET_EVAL_PHRASINGS.values()) | set(STANCE_EVAL_PHRASINGS.values()))
    # Nor a near copy: the body of an evaluation wording inside one of ours (the builders' own
    # training phrasings, which already say "What are the symptoms?", are not ours to change).
    ours = {w.lower() for w in wordings - {p for ps in FACET_PHRASINGS.values() for p in ps}}
    for phrasing in [*FACET_EVAL_PHRASINGS.values(), *STANCE_EVAL_PHRASINGS.values()]:
        body = re.sub(r"^(tell me|show me|explain) ", "", phrasing.lower()).rstrip(".")
        assert not [w for w in ours if body in w], body
    drawn = [generic_instruction(f"k{n}", 0) for n in range(400)]
    assert 40 < drawn.count(None) < 120 and len(set(drawn)) > 150
    assert set(drawn) - {None} <= wordings


def test_chunks_stay_within_their_word_limits_and_cloze_questions_are_filled():
    text = "\n".join(" ".join(["word"] * size) + "." for size in (30, 30, 200, 10))
    sizes = [len(text[start:end].split()) for start, end in chunk_spans(text)]
    assert sum(sizes) == 270 and all(size <= 120 for size in sizes[:-1]) and max(sizes) <= 180
    assert race_query_text("Many Americans _ .", "were worried.") == "Many Americans were worried."
    assert race_query_text("What does the author think?", "x") is None
