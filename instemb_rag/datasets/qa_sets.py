"""Record builders of the question-answering and stance sets (registered in registry.py).

msmarco_qa      passage, question, free-form answer
msmarco_passages  the question -> its passage (no instruction)
pubmedqa        joined context paragraphs, question, long answer
condaqa         passage, question, label (YES / NO / DON'T KNOW or a span)
scifact_stance  title + abstract, stance instruction + claim, stance sentence
scifact_stance_query  claim, stance instruction, the title + abstract with that stance
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Iterator

from .grouped import GroupedRecord
from .grouped import read_source_jsonl as _read_jsonl
from .grouped import require_files as _require
from .records import TrainingRecord


def build_msmarco_qa(folder: Path) -> list[GroupedRecord]:
    _require(folder, "queries.jsonl", "corpus.jsonl", "qrels.tsv")
    passages = {row["_id"]: row["text"] for row in _read_jsonl(folder / "corpus.jsonl")}
    passage_of: dict[str, str] = {}
    with open(folder / "qrels.tsv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                passage_of.setdefault(row["query-id"], row["corpus-id"])
    grouped = []
    for query in _read_jsonl(folder / "queries.jsonl"):
        answers = [a for a in query.get("answers", []) if a.strip() and a.strip() != "No Answer Present."]
        passage = passages.get(passage_of.get(query["_id"], ""))
        if not answers or not passage:
            continue
        record = TrainingRecord(
            text=passage, instruction=query["text"], output=answers[0], source=f"msmarco_qa:{query['_id']}"
        )
        grouped.append(GroupedRecord(passage_of[query["_id"]], record))
    return grouped


def build_msmarco_passages(folder: Path) -> list[GroupedRecord]:
    """The retrieval direction of MS MARCO: the question -> its passage (no instruction), so
    plain question-to-passage search is trained beside the instruction sets."""
    return [
        GroupedRecord(
            item.group,
            TrainingRecord(
                text=item.record.instruction or "",
                output=item.record.text,
                source=item.record.source.replace("msmarco_qa", "msmarco_passages"),
            ),
        )
        for item in build_msmarco_qa(folder)
    ]


def build_pubmedqa(folder: Path) -> list[GroupedRecord]:
    _require(folder, "pqal.jsonl")
    grouped = []
    for row in _read_jsonl(folder / "pqal.jsonl"):
        record = TrainingRecord(
            text=" ".join(row["contexts"]),
            instruction=row["question"],
            output=row["long_answer"],
            source=f"pubmedqa:{row['_id']}",
        )
        grouped.append(GroupedRecord(row["_id"], record))
    return grouped


def build_condaqa(folder: Path, split_file: str = "dev.jsonl") -> list[GroupedRecord]:
    """CondaQA's edited passages differ from the original by a negation cue: keep all edits
    of one original passage in the same split."""
    _require(folder, split_file)
    grouped = []
    for row in _read_jsonl(folder / split_file):
        label = str(row["label"]).strip()
        if not label:
            continue
        output = {"YES": "Yes.", "NO": "No.", "DON'T KNOW": "The passage does not say."}.get(label, label)
        record = TrainingRecord(
            text=row["sentence1"],
            instruction=row["sentence2"],
            output=output,
            source=f"condaqa:{row['QuestionID']}:{row['PassageEditID']}",
        )
        group = hashlib.sha1(row["original passage"].encode()).hexdigest()
        grouped.append(GroupedRecord(group, record))
    return grouped


def scifact_stance_rows(folder: Path) -> Iterator[tuple[str, dict, str]]:
    """(group, stance row, title + abstract) for each stance pair whose abstract is present.

    One claim cites several abstracts and one abstract serves several claims: the group is the
    connected component, so neither a claim nor an abstract crosses the split, and both stance
    builders put the same claims on the held-out side."""
    _require(folder, "stance.jsonl", "corpus.jsonl")
    rows = list(_read_jsonl(folder / "stance.jsonl"))
    needed = {row["doc_id"] for row in rows}
    abstracts = {
        row["_id"]: f"{row.get('title', '')}\n{row['text']}".strip()
        for row in _read_jsonl(folder / "corpus.jsonl")
        if row["_id"] in needed
    }
    component = _connected_components([(f"claim:{r['claim_id']}", f"doc:{r['doc_id']}") for r in rows])
    for row in rows:
        abstract = abstracts.get(row["doc_id"])
        if abstract:
            yield component[f"claim:{row['claim_id']}"], row, abstract


def build_scifact_stance(folder: Path) -> list[GroupedRecord]:
    """The abstract reads the claim: text = abstract, the answer states its stance."""
    grouped = []
    for group, row, abstract in scifact_stance_rows(folder):
        verb = "support" if row["label"] == "SUPPORT" else "contradict"
        record = TrainingRecord(
            text=abstract,
            instruction=f"{row['instruction_match']} Claim: {row['claim']}",
            output=f"The findings {verb} the claim: {row['claim']}",
            source=f"scifact_stance:{row['claim_id']}:{row['doc_id']}",
        )
        grouped.append(GroupedRecord(group, record))
    return grouped


def build_scifact_stance_query(folder: Path) -> list[GroupedRecord]:
    """The query direction, as retrieval sees it: text = claim, instruction = the stance asked
    for, answer = the abstract with that stance. The claim under the opposite stance is the
    record's hard negative: the same words, one changed, and the abstract must not match it."""
    return [
        GroupedRecord(
            group,
            TrainingRecord(
                text=row["claim"],
                instruction=row["instruction_match"],
                output=abstract,
                source=f"scifact_stance_query:{row['claim_id']}:{row['doc_id']}",
                negative_instruction=row["instruction_mismatch"],
            ),
        )
        for group, row, abstract in scifact_stance_rows(folder)
    ]


def _connected_components(edges: list[tuple[str, str]]) -> dict[str, str]:
    """Union-find over the edges: node -> a representative of its component."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for left, right in edges:
        parent[root(left)] = root(right)
    return {node: root(node) for node in parent}
