"""Readers that turn each development set into distillation items (queries and passages).

Each reader takes the set's folder and a ``ReadContext`` (the held-out texts and groups of the
training builders' own split, and the seed) and returns the set's items plus how many it left out
because they belong to a held-out group. Items of one ``unit`` (a passage with its questions, one
subject's passages and queries) are kept together when the build is capped.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .contrast_sets import climate_evidence_text, medquad_query_text
from .embedding_items import EmbeddingItem
from .grouped import read_source_jsonl
from .instruction_templates import (
    FACET_WORDS,
    KINDS_WITHOUT_STANCE,
    facet_instruction,
    generic_instruction,
    stance_instruction,
)

CHUNK_MIN_WORDS, CHUNK_MAX_WORDS = 40, 120
MIN_PASSAGE_WORDS = 8  # shorter chunks are headers, dates, URLs
MEDQUAD_PASSAGE_WORDS = 120
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case and spacing ignored: the form every comparison (held-out, duplicates) uses."""
    return _SPACE.sub(" ", text).strip().lower()


def squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass
class HeldOut:
    """What the builders' split holds out: normalised texts and builder group keys."""

    texts: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)

    def has_text(self, text: str) -> bool:
        return normalise(text) in self.texts


@dataclass(frozen=True)
class ReadContext:
    heldout: HeldOut
    seed: int


ReadResult = tuple[list[EmbeddingItem], int]  # items, and how many units were left out as held-out


def _passage(source: str, key: str, text: str, unit: str, group: str | None = None) -> EmbeddingItem:
    return EmbeddingItem(id=f"{source}:{key}", role="passage", text=text, source=source, group=group, unit=unit)


def _query(source: str, key: str, text: str, unit: str, **fields) -> EmbeddingItem:
    return EmbeddingItem(id=f"{source}:{key}", role="query", text=text, source=source, unit=unit, **fields)


def _generic_query(source: str, key: str, text: str, unit: str, ctx: ReadContext, kinds=None, **fields):
    instruction = generic_instruction(f"{source}:{key}", ctx.seed, **({"kinds": kinds} if kinds else {}))
    return _query(source, key, squash(text), unit, instruction=instruction, **fields)


def _qrels(path: Path) -> dict[str, list[str]]:
    """query id -> relevant document ids, in file order."""
    relevant: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                relevant[row["query-id"]].append(row["corpus-id"])
    return relevant


# ---------------------------------------------------------------------------- chunks
_PARAGRAPH = re.compile(r"[^\n]+")
_SENTENCE = re.compile(r"[^.!?]*[.!?]+[\"')\]]*(?=\s|$)|[^.!?]+$")
_WORD = re.compile(r"\S+")


def _word_count(text: str, start: int, end: int) -> int:
    return len(_WORD.findall(text, start, end))


def _pieces(text: str, max_words: int) -> list[tuple[int, int, int]]:
    """(start, end, words) of paragraphs; a paragraph over ``max_words`` is cut at sentences,
    a sentence over it at words."""
    pieces = []
    for paragraph in _PARAGRAPH.finditer(text):
        words = _word_count(text, paragraph.start(), paragraph.end())
        if words == 0:
            continue
        if words <= max_words:
            pieces.append((paragraph.start(), paragraph.end(), words))
            continue
        for sentence in _SENTENCE.finditer(text, paragraph.start(), paragraph.end()):
            tokens = list(_WORD.finditer(text, sentence.start(), sentence.end()))
            for first in range(0, len(tokens), max_words):
                part = tokens[first : first + max_words]
                if part:
                    pieces.append((part[0].start(), part[-1].end(), len(part)))
    return pieces


def chunk_spans(text: str, min_words: int = CHUNK_MIN_WORDS, max_words: int = CHUNK_MAX_WORDS) -> list[tuple[int, int]]:
    """(start, end) character spans of ``text`` in chunks of about min..max words: paragraphs
    packed greedily up to ``max_words``; a short last chunk joins the one before when the two
    stay under 1.5 x ``max_words``."""
    chunks: list[list[int]] = []  # [start, end, words]
    for start, end, words in _pieces(text, max_words):
        if chunks and chunks[-1][2] + words <= max_words:
            chunks[-1][1], chunks[-1][2] = end, chunks[-1][2] + words
        else:
            chunks.append([start, end, words])
    if len(chunks) > 1 and chunks[-1][2] < min_words and chunks[-2][2] + chunks[-1][2] <= 1.5 * max_words:
        last = chunks.pop()
        chunks[-1][1], chunks[-1][2] = last[1], chunks[-1][2] + last[2]
    return [(start, end) for start, end, words in chunks if words >= MIN_PASSAGE_WORDS]


def first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])


# ---------------------------------------------------------------------------- readers
def read_msmarco(folder: Path, ctx: ReadContext) -> ReadResult:
    relevant = _qrels(folder / "qrels.tsv")
    items = [
        _passage("msmarco", f"p{row['_id']}", squash(row["text"]), unit=row["_id"])
        for row in read_source_jsonl(folder / "corpus.jsonl")
    ]
    known = {item.id for item in items}
    for row in read_source_jsonl(folder / "queries.jsonl"):
        passage_id = next(
            (f"msmarco:p{doc}" for doc in relevant.get(row["_id"], []) if f"msmarco:p{doc}" in known), None
        )
        unit = passage_id.removeprefix("msmarco:p") if passage_id else f"q{row['_id']}"
        items.append(_generic_query("msmarco", f"q{row['_id']}", row["text"], unit, ctx, positive=passage_id))
    return items, 0


# RACE asks many questions about the passage itself ("What is the best title?"): as search
# queries they mean nothing outside the exam, so they are left out.
_RACE_META = re.compile(
    r"\b(passage|paragraph|the text|this text|the article|the story|the author|the writer|the following|best title)\b",
    re.IGNORECASE,
)
_BLANK = re.compile(r"_+")


def race_query_text(question: str, answer: str) -> str | None:
    """The question, a cloze ("Many Americans _ .") with its blank filled by the answer, so it
    reads as a statement; None for questions about the exam text itself."""
    if _RACE_META.search(question):
        return None
    if _BLANK.search(question):
        question = _BLANK.sub(lambda _: answer.rstrip("."), question, count=1)
        question = re.sub(r"\s+([.,;:?!])", r"\1", question)
    text = squash(question)
    return text if len(text.split()) >= 4 else None


_STOPWORDS = frozenset(
    "the and for with from are was were been its this that these those his her their our your not but what "
    "which who whom why how when where does did have has had can could will would should may might must than "
    "then such there here about into over after before more most some any all".split()
)
OVERLAP_MIN, OVERLAP_MARGIN = 0.5, 0.2


def _content_words(text: str) -> set[str]:
    return {word for word in re.findall(r"[a-z]+", text.lower()) if len(word) > 2 and word not in _STOPWORDS}


def _chunk_holding(question: str, answer: str, chunks: list[EmbeddingItem]) -> str | None:
    """The chunk that holds the answer: the first holding it verbatim (case and spacing
    ignored), else the one sharing clearly the most content words with question and answer (at
    least half of them, 0.2 more than the runner-up: on the RACE questions both rules answer,
    they agree 96 % of the time). None where neither finds one."""
    needle = normalise(answer).rstrip(".")
    if len(needle) >= 8:  # "yes", "two": found anywhere, proves nothing
        verbatim = next((chunk.id for chunk in chunks if needle in normalise(chunk.text)), None)
        if verbatim:
            return verbatim
    wanted = _content_words(f"{question} {answer}")
    if not wanted or len(chunks) < 2:
        return chunks[0].id if len(chunks) == 1 else None
    shares = sorted(((len(wanted & _content_words(c.text)) / len(wanted), c.id) for c in chunks), reverse=True)
    (best, best_id), (runner_up, _) = shares[0], shares[1]
    return best_id if best >= OVERLAP_MIN and best - runner_up >= OVERLAP_MARGIN else None


def read_race(folder: Path, ctx: ReadContext) -> ReadResult:
    items, held = [], 0
    for row in read_source_jsonl(folder / "race_articles.jsonl"):
        unit = f"race:{row.get('split', '')}:{row['id']}"  # the builders' group key
        if unit in ctx.heldout.groups:
            held += 1
            continue
        article = row.get("article", "")
        key = f"{row.get('split', '')}/{row['id']}"
        chunks = [
            _passage("race", f"{key}:c{n}", squash(article[start:end]), unit, group=unit)
            for n, (start, end) in enumerate(chunk_spans(article))
        ]
        items += chunks
        for position, qa in enumerate(row.get("qas", [])):
            answer = str(qa.get("answer_text", "")).strip()
            text = race_query_text(qa.get("question", ""), answer)
            if text and answer:
                positive = _chunk_holding(text, answer, chunks)
                items.append(
                    _generic_query("race", f"{key}:q{position}", text, unit, ctx, group=unit, positive=positive)
                )
    return items, held


def read_medquad(folder: Path, ctx: ReadContext) -> ReadResult:
    """Answers (first ~120 words) as passages; each question with its answer as positive; and
    for a focus with several question types, the focus alone under an instruction naming each
    type (the same query, different instructions, different passages: real in-group data)."""
    by_focus: dict[str, list[dict]] = defaultdict(list)
    for row in read_source_jsonl(folder / "medquad_qa.jsonl"):
        focus, answer = row.get("focus", "").strip(), squash(row.get("answer", ""))
        if focus and len(answer.split()) >= MIN_PASSAGE_WORDS and row.get("question", "").strip():
            by_focus[focus].append(row)
    items, held = [], 0
    for focus, rows in by_focus.items():
        group = f"medquad:{focus.lower()}"  # the builders' group key
        # Template answers recur across foci: one a held-out focus owns is held out everywhere.
        kept = [row for row in rows if not ctx.heldout.has_text(row["answer"])]
        if group in ctx.heldout.groups or not kept:
            held += 1
            continue
        first_of_type: dict[str, str] = {}
        for row in kept:
            # qids repeat across collections and across the documents of one collection
            key = f"{row.get('collection', '')}/{row.get('doc_file', '')}/{row['qid']}"
            passage = _passage("medquad", key, first_words(row["answer"], MEDQUAD_PASSAGE_WORDS), focus, group)
            items.append(passage)
            items.append(
                _generic_query("medquad", f"{key}:q", row["question"], focus, ctx, group=group, positive=passage.id)
            )
            if row.get("qtype") in FACET_WORDS:
                first_of_type.setdefault(row["qtype"], passage.id)
        if len(first_of_type) >= 2:
            for facet, passage_id in sorted(first_of_type.items()):
                key = f"{focus}:{facet}"
                instruction = facet_instruction(f"medquad:{key}", ctx.seed, facet)
                text = medquad_query_text(focus)
                items.append(
                    _query("medquad", key, text, focus, instruction=instruction, group=group, positive=passage_id)
                )
    return items, held


def read_covid_qa(folder: Path, ctx: ReadContext) -> ReadResult:
    data = json.loads((folder / "covid_qa.json").read_text(encoding="utf-8"))
    items, held = [], 0
    for article in data.get("data", []):
        for paragraph in article.get("paragraphs", []):
            group = f"covid_qa:{paragraph.get('document_id', '')}"  # the builders' group key
            if group in ctx.heldout.groups:
                held += 1
                continue
            context = paragraph.get("context", "")
            spans = chunk_spans(context)
            doc = paragraph.get("document_id", "")
            chunks = [
                _passage("covid_qa", f"{doc}:c{n}", squash(context[s:e]), f"{doc}:c{n}", group)
                for n, (s, e) in enumerate(spans)
            ]
            items += chunks
            for qa in paragraph.get("qas", []):
                answers = [a for a in qa.get("answers", []) if a.get("text", "").strip()]
                if not qa.get("question", "").strip():
                    continue
                start = int(answers[0].get("answer_start", -1)) if answers else -1
                holder = next((n for n, (s, e) in enumerate(spans) if s <= start < e), None)
                positive = chunks[holder].id if holder is not None else None
                unit = positive.removeprefix("covid_qa:") if positive else f"q{qa.get('id')}"
                items.append(
                    _generic_query(
                        "covid_qa", f"q{qa.get('id')}", qa["question"], unit, ctx, group=group, positive=positive
                    )
                )
    return items, held


def read_pubmedqa(folder: Path, ctx: ReadContext) -> ReadResult:
    """Whole abstracts (their context paragraphs joined, ~200-400 words), not chunks: the long
    single-document regime of a scientific corpus, which the chunked sets never show the student.
    Each question (with a generic instruction) points to its abstract; the long answer is a passage too."""
    items, held = [], 0
    for row in read_source_jsonl(folder / "pqal.jsonl"):
        abstract = squash(" ".join(row.get("contexts", [])))
        if not abstract or ctx.heldout.has_text(abstract):
            held += 1
            continue
        key = row["_id"]
        items.append(_passage("pubmedqa", f"a{key}", abstract, key))
        answer = squash(row.get("long_answer", ""))
        if len(answer.split()) >= MIN_PASSAGE_WORDS:
            items.append(_passage("pubmedqa", f"l{key}", answer, key))
        if row.get("question", "").strip():
            items.append(_generic_query("pubmedqa", f"q{key}", row["question"], key, ctx, positive=f"pubmedqa:a{key}"))
    return items, held


def read_scifact(folder: Path, ctx: ReadContext) -> ReadResult:
    """Only the claims on the training side of the stance split become queries (a claim the
    split holds out, or one the stance file lacks, stays unread for the held-out claims figure),
    and the abstracts those other claims cite are left out too."""
    stance = list(read_source_jsonl(folder / "stance.jsonl"))
    claims = {row["claim_id"]: row["claim"] for row in stance if not ctx.heldout.has_text(row["claim"])}
    relevant = _qrels(folder / "qrels.tsv")
    cited_by_unread = {doc for claim, docs in relevant.items() if claim not in claims for doc in docs}
    items, abstracts = [], {}
    for row in read_source_jsonl(folder / "corpus.jsonl"):
        if row["_id"] not in cited_by_unread:
            abstracts[row["_id"]] = squash(f"{row.get('title', '')}\n{row['text']}")
    unit_of = {doc: f"claim{claim}" for claim in claims for doc in relevant.get(claim, [])}
    items += [_passage("scifact", f"d{doc}", text, unit_of.get(doc, f"d{doc}")) for doc, text in abstracts.items()]
    for claim_id, claim in claims.items():
        group, unit = f"scifact:{claim_id}", f"claim{claim_id}"
        cited = [doc for doc in relevant.get(claim_id, []) if doc in abstracts]
        first = f"scifact:d{cited[0]}" if cited else None
        items.append(
            _generic_query(
                "scifact", f"c{claim_id}", claim, unit, ctx, KINDS_WITHOUT_STANCE, group=group, positive=first
            )
        )
    for row in stance:
        if row["claim_id"] in claims and row["doc_id"] in abstracts:
            key = f"c{row['claim_id']}:{row['doc_id']}"
            instruction = stance_instruction(f"scifact:{key}", ctx.seed, row["label"] == "SUPPORT")
            fields = {
                "instruction": instruction,
                "group": f"scifact:{row['claim_id']}",
                "positive": f"scifact:d{row['doc_id']}",
            }
            items.append(_query("scifact", key, squash(row["claim"]), f"claim{row['claim_id']}", **fields))
    return items, len({row["claim_id"] for row in stance}) - len(claims)


def read_vaswani(folder: Path, ctx: ReadContext) -> ReadResult:
    relevant = _qrels(folder / "qrels.tsv")
    items = [
        _passage("vaswani", f"d{row['_id']}", squash(row["text"]), f"d{row['_id']}")
        for row in read_source_jsonl(folder / "corpus.jsonl")
    ]
    known = {item.id for item in items}
    for row in read_source_jsonl(folder / "queries.jsonl"):
        positive = next((f"vaswani:d{doc}" for doc in relevant.get(row["_id"], []) if f"vaswani:d{doc}" in known), None)
        unit = positive.removeprefix("vaswani:") if positive else f"q{row['_id']}"
        items.append(_generic_query("vaswani", f"q{row['_id']}", row["text"], unit, ctx, positive=positive))
    return items, 0


def read_climate_fever(folder: Path, ctx: ReadContext) -> ReadResult:
    """Evidence sentences as passages; each claim plain (positive: its first labelled evidence)
    and under each stance it has evidence for (positive: that stance's first sentence)."""
    items, held = [], 0
    for row in read_source_jsonl(folder / "climate-fever.jsonl"):
        claim_id = str(row["claim_id"])
        group = f"climate_fever:{claim_id}"  # the builders' group key
        if group in ctx.heldout.groups:
            held += 1
            continue
        first_of: dict[str, str] = {}
        for n, evidence in enumerate(row.get("evidences", [])):
            if evidence.get("evidence", "").strip():
                passage = _passage(
                    "climate_fever", f"{claim_id}:e{n}", squash(climate_evidence_text(evidence)), group, group
                )
                items.append(passage)
                first_of.setdefault(evidence.get("evidence_label", ""), passage.id)
        labelled = first_of.get("SUPPORTS") or first_of.get("REFUTES")
        claim = row["claim"]
        items.append(
            _generic_query(
                "climate_fever", claim_id, claim, group, ctx, KINDS_WITHOUT_STANCE, group=group, positive=labelled
            )
        )
        for label in ("SUPPORTS", "REFUTES"):
            if label in first_of:
                key = f"{claim_id}:{label.lower()}"
                instruction = stance_instruction(f"climate_fever:{key}", ctx.seed, label == "SUPPORTS")
                items.append(
                    _query(
                        "climate_fever",
                        key,
                        squash(claim),
                        group,
                        instruction=instruction,
                        group=group,
                        positive=first_of[label],
                    )
                )
    return items, held


def read_condaqa(folder: Path, ctx: ReadContext) -> ReadResult:
    """The dev passages the builders read, originals with their negation-edited versions
    grouped (each the other's hard negative)."""
    items, seen = [], set()
    for row in read_source_jsonl(folder / "dev.jsonl"):
        text = squash(row["sentence1"])
        if text not in seen:
            seen.add(text)
            group = "condaqa:" + hashlib.sha1(row["original passage"].encode()).hexdigest()[:12]
            items.append(_passage("condaqa", f"p{len(items)}", text, group, group))
    return items, 0


def _sentence_passages(source: str, sentences) -> list[EmbeddingItem]:
    unique = dict.fromkeys(squash(sentence) for sentence in sentences if sentence.strip())
    return [_passage(source, f"s{n}", text, f"s{n}") for n, text in enumerate(unique)]


def read_sick(folder: Path, ctx: ReadContext) -> ReadResult:
    with open(folder / "SICK.txt", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return _sentence_passages("sick", (s for row in rows for s in (row["sentence_A"], row["sentence_B"]))), 0


def read_stsb(folder: Path, ctx: ReadContext) -> ReadResult:
    """train and dev only: test is the STS-B evaluation."""
    rows = [row for name in ("train.jsonl", "dev.jsonl") for row in read_source_jsonl(folder / name)]
    return _sentence_passages("stsb", (s for row in rows for s in (row["sentence1"], row["sentence2"]))), 0
