"""Loaders for evaluation data: BEIR retrieval folders, paired-instruction stance records, STS pairs.

Every malformed line raises :class:`EvalDataError` naming the file, the line and the field, so a
user can fix the file instead of guessing.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .. import jsonl
from ..errors import InstEmbError


class EvalDataError(InstEmbError):
    """An evaluation file is missing or malformed (the message names file, line and field)."""


@dataclass
class RetrievalData:
    """A BEIR-style retrieval set. ``instructions[qid]`` is None where a query has none."""

    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    instructions: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def instruction_for(self, query_id: str) -> str | None:
        return self.instructions.get(query_id)


@dataclass(frozen=True)
class StanceRecord:
    """A (claim, abstract) pair with the instruction its label matches and the one it does not."""

    claim_id: str
    claim: str
    doc_id: str
    label: str
    instruction_match: str
    instruction_mismatch: str


@dataclass(frozen=True)
class STSPair:
    sentence1: str
    sentence2: str
    score: float


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line; bad JSON names file and line."""
    return jsonl.read_jsonl(path, EvalDataError)


def _required_text(record: dict, key: str, path: Path, line_number: int, allow_empty: bool = False) -> str:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("id"):
        value = str(value)  # numeric ids are common in BEIR exports
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise EvalDataError(f"{path}:{line_number}: field '{key}' must be a non-empty string, got {value!r}.")
    return value


def _optional_text(record: dict, key: str, path: Path, line_number: int) -> str | None:
    value = record.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise EvalDataError(
            f"{path}:{line_number}: field '{key}' must be a string when present, got {type(value).__name__}."
        )
    return value


def document_text(title: str | None, text: str) -> str:
    """Title and body joined the way BEIR evaluations usually embed them."""
    return f"{title.strip()}\n{text}" if title and title.strip() else text


def load_corpus(path: Path) -> dict[str, str]:
    corpus: dict[str, str] = {}
    for line_number, record in read_jsonl(path):
        doc_id = _required_text(record, "_id", path, line_number)
        text = _required_text(record, "text", path, line_number, allow_empty=True)
        title = _optional_text(record, "title", path, line_number)
        if not (text.strip() or title):
            raise EvalDataError(f"{path}:{line_number}: document '{doc_id}' has neither text nor title.")
        if doc_id in corpus:
            raise EvalDataError(f"{path}:{line_number}: duplicate document id '{doc_id}'.")
        corpus[doc_id] = document_text(title, text)
    if not corpus:
        raise EvalDataError(f"{path} holds no documents.")
    return corpus


def load_queries(path: Path) -> tuple[dict[str, str], dict[str, str | None]]:
    """Queries and their optional per-query ``instruction`` field."""
    queries: dict[str, str] = {}
    instructions: dict[str, str | None] = {}
    for line_number, record in read_jsonl(path):
        query_id = _required_text(record, "_id", path, line_number)
        if query_id in queries:
            raise EvalDataError(f"{path}:{line_number}: duplicate query id '{query_id}'.")
        queries[query_id] = _required_text(record, "text", path, line_number)
        instructions[query_id] = _optional_text(record, "instruction", path, line_number)
    if not queries:
        raise EvalDataError(f"{path} holds no queries.")
    return queries, instructions


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels: a header line, then query-id<TAB>corpus-id<TAB>score."""
    if not path.is_file():
        raise EvalDataError(f"{path} does not exist; expected a TSV with query-id, corpus-id, score.")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        for line_number, row in enumerate(rows, start=1):
            if not row or not "".join(row).strip():
                continue
            if line_number == 1 and not row[-1].strip().lstrip("-").isdigit():
                continue  # the header
            if len(row) != 3:
                raise EvalDataError(
                    f"{path}:{line_number}: expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}."
                )
            query_id, doc_id, score = (cell.strip() for cell in row)
            try:
                relevance = int(score)
            except ValueError:
                raise EvalDataError(f"{path}:{line_number}: score '{score}' is not an integer.") from None
            qrels.setdefault(query_id, {})[doc_id] = relevance
    return qrels


def load_beir(folder: str | Path, instruction: str | None = None, name: str | None = None) -> RetrievalData:
    """A BEIR folder. ``instruction`` applies to every query that has no ``instruction`` field."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EvalDataError(f"{folder} is not a folder; a BEIR set needs corpus.jsonl, queries.jsonl and qrels.tsv.")
    corpus = load_corpus(folder / "corpus.jsonl")
    queries, instructions = load_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels.tsv"
    if not qrels_path.is_file() and (folder / "qrels" / "test.tsv").is_file():
        qrels_path = folder / "qrels" / "test.tsv"  # the layout BEIR downloads use
    qrels = load_qrels(qrels_path)
    unknown_docs = sorted({doc for judged in qrels.values() for doc in judged} - corpus.keys())
    if unknown_docs:
        raise EvalDataError(
            f"{qrels_path} judges {len(unknown_docs)} document ids absent from {folder / 'corpus.jsonl'} "
            f"(e.g. {unknown_docs[:3]}); fix the ids or add the documents."
        )
    # Only queries with at least one relevant judgement can be scored.
    judged = {qid for qid, docs in qrels.items() if any(score > 0 for score in docs.values())}
    queries = {qid: text for qid, text in queries.items() if qid in judged}
    if not queries:
        raise EvalDataError(f"No query in {folder / 'queries.jsonl'} has a relevant judgement in {qrels_path}.")
    merged = {qid: instructions.get(qid) or instruction for qid in queries}
    qrels = {qid: docs for qid, docs in qrels.items() if qid in queries}
    return RetrievalData(name or folder.name, corpus, queries, qrels, merged)


def load_stance(path: str | Path) -> list[StanceRecord]:
    """Paired-instruction records such as scifact/stance.jsonl."""
    path = Path(path)
    records = []
    for line_number, record in read_jsonl(path):
        fields = {
            key: _required_text(record, key, path, line_number)
            for key in ("claim_id", "claim", "doc_id", "label", "instruction_match", "instruction_mismatch")
        }
        if fields["instruction_match"].strip() == fields["instruction_mismatch"].strip():
            raise EvalDataError(f"{path}:{line_number}: instruction_match and instruction_mismatch are identical.")
        records.append(StanceRecord(**fields))
    if not records:
        raise EvalDataError(f"{path} holds no stance records.")
    return records


def load_sts(path: str | Path) -> list[STSPair]:
    """STS pairs: sentence1, sentence2, score (any numeric scale)."""
    path = Path(path)
    pairs = []
    for line_number, record in read_jsonl(path):
        first = _required_text(record, "sentence1", path, line_number)
        second = _required_text(record, "sentence2", path, line_number)
        score = record.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise EvalDataError(f"{path}:{line_number}: field 'score' must be a number, got {score!r}.")
        pairs.append(STSPair(first, second, float(score)))
    if len(pairs) < 2:
        raise EvalDataError(f"{path} needs at least two scored pairs for a correlation.")
    return pairs
