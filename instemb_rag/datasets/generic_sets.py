"""Generic (text, question, answer) records at scale, the bulk that keeps general retrieval
from paying for instruction steering:

    race        English exam articles, a question, the correct option's text (~98k questions;
                the questions of one article share a group and so a micro-batch: the same text
                under different questions wants different answers)
    covid_qa    a window of a scientific paper around the answer, the question, the answer span
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .grouped import GroupedRecord, read_source_jsonl, require_files
from .records import TrainingRecord

COVID_WINDOW_CHARS = 700  # paper text kept around the answer: the whole paper would be truncated away


def build_race(folder: Path) -> list[GroupedRecord]:
    require_files(folder, "race_articles.jsonl")
    grouped = []
    for row in read_source_jsonl(folder / "race_articles.jsonl"):
        article = " ".join(row.get("article", "").split())
        group = f"race:{row.get('split', '')}:{row['id']}"
        for position, qa in enumerate(row.get("qas", [])):
            question, answer = qa.get("question", "").strip(), str(qa.get("answer_text", "")).strip()
            # Cloze questions ("... _ .") read as fragments; the answer alone is still the target.
            if not article or not question or not answer:
                continue
            record = TrainingRecord(
                text=article, instruction=question, output=answer, group=group, source=f"race:{row['id']}:{position}"
            )
            grouped.append(GroupedRecord(group, record))
    return grouped


def _window(context: str, start: int, answer: str) -> str:
    """About COVID_WINDOW_CHARS of the paper around the answer, cut at whitespace."""
    half = COVID_WINDOW_CHARS // 2
    left = max(0, start - half)
    right = min(len(context), start + len(answer) + half)
    piece = context[left:right]
    if left > 0:
        piece = piece.split(" ", 1)[-1]
    if right < len(context):
        piece = piece.rsplit(" ", 1)[0]
    return re.sub(r"\s+", " ", piece).strip()


def build_covid_qa(folder: Path) -> list[GroupedRecord]:
    require_files(folder, "covid_qa.json")
    data = json.loads((folder / "covid_qa.json").read_text(encoding="utf-8"))
    grouped = []
    for article in data.get("data", []):
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context", "")
            group = f"covid_qa:{paragraph.get('document_id', '')}"
            for qa in paragraph.get("qas", []):
                answers = [a for a in qa.get("answers", []) if a.get("text", "").strip()]
                if qa.get("is_impossible") or not answers or not qa.get("question", "").strip():
                    continue
                answer = answers[0]
                record = TrainingRecord(
                    text=_window(context, int(answer.get("answer_start", 0)), answer["text"]),
                    instruction=qa["question"].strip(),
                    output=answer["text"].strip(),
                    group=group,
                    source=f"covid_qa:{qa.get('id', '')}",
                )
                grouped.append(GroupedRecord(group, record))
    return grouped
