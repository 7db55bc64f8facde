"""Fake News Challenge FNC-1: news headlines paired with article bodies that agree with, disagree
with, discuss or are unrelated to them (viral stories of 2014-15: a werewolf curse, a third breast).

A subject is one headline with an agreeing and a disagreeing body (discuss and unrelated are left
out); the query is the headline, the instruction asks for one side. A body is cut to its lead
(``lead``: up to three sentences, about 400 characters: an LLM embeds every passage, and a news
lead states the article's take).

Many headlines of one story share its bodies, and two passages with one text under two ids would
rank each other as negatives; so every lead serves one group only (``assign``), and the dev split
takes whole stories (``holdout_key``: the headlines and bodies linked by a related pair)."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

from ...errors import InstEmbError
from ...jsonl import read_jsonl
from .drafts import SubjectDraft
from .passages import long_enough, squash
from .wording import Aspect

BODIES_FILE = "fnc1_bodies.jsonl"
LEAD_SENTENCES = 3
LEAD_CHARS = 400
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’])\s+")
_RELATED = ("agree", "disagree", "discuss")
REPORT_ASPECTS = {
    "agree": Aspect(
        "agree",
        ("reports that confirm it", "coverage backing the headline up", "articles that agree with it",
         "confirmation of the story", "sources that say it is true"),
        ("Find an article that confirms this.", "Which report backs this headline up?",
         "Is there coverage saying this is true?", "Find a story that agrees with this.",
         "Look for reporting that supports this headline."),
    ),
    "disagree": Aspect(
        "disagree",
        ("reports that deny it", "coverage disputing the headline", "articles that contradict it",
         "a debunking of the story", "sources that say it is false"),
        ("Find an article that disputes this.", "Which report contradicts this headline?",
         "Is there coverage saying this is false?", "Find a story that debunks this.",
         "Look for reporting that refutes this headline."),
    ),
}  # fmt: skip


def lead(body: str, sentences: int = LEAD_SENTENCES, max_chars: int = LEAD_CHARS) -> str:
    """The body's first ``sentences`` sentences, fewer where they pass ``max_chars``; a first
    sentence longer than that is cut at a word."""
    kept: list[str] = []
    for sentence in _SENTENCE_END.split(squash(body)):
        if len(kept) == sentences or (kept and len(" ".join([*kept, sentence])) > max_chars):
            break
        kept.append(sentence)
    text = " ".join(kept)
    return text if len(text) <= max_chars else text[:max_chars].rsplit(" ", 1)[0]


def _stories(pairs: list[tuple[str, str, str]]) -> dict[str, str]:
    """Headline -> its story's key: the first body id (in string order) its related pairs link it to."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for headline, body_id, stance in pairs:
        if stance in _RELATED:
            a, b = root(f"h\x00{headline}"), root(f"b\x00{body_id}")
            parent[max(a, b)] = min(a, b)  # body keys sort first: a story's root is a body
    return {headline: "story-" + root(f"h\x00{headline}").split("\x00", 1)[1] for headline, _, _ in pairs}


def assign(sides: dict[str, dict[str, list[str]]]) -> list[tuple[str, str, str]]:
    """(headline, agree lead, disagree lead) triples, no lead in two: the headlines with the fewest
    leads first (then a hash order), each taking its first unused pair. On FNC-1 this pairs 66 of
    the 211 headlines with both sides; no order tried pairs more than 67 (227 leads in all)."""
    used: set[str] = set()
    chosen = []
    order = sorted(
        sides,
        key=lambda h: (min(len(sides[h]["agree"]), len(sides[h]["disagree"])), hashlib.sha256(h.encode()).hexdigest()),
    )
    for headline in order:
        agree = next((t for t in sides[headline]["agree"] if t.lower() not in used), None)
        disagree = next((t for t in sides[headline]["disagree"] if t.lower() not in used and t != agree), None)
        if agree and disagree:
            used.update({agree.lower(), disagree.lower()})
            chosen.append((headline, agree, disagree))
    return chosen


def read_fnc1(stance_folder: Path) -> list[SubjectDraft]:
    bodies_path = stance_folder / BODIES_FILE
    if not bodies_path.is_file():
        raise InstEmbError(f"{bodies_path} not found: FNC-1's stances need its bodies beside them.")
    leads = {str(row["body_id"]): lead(row["body"]) for _, row in read_jsonl(bodies_path)}
    pairs = [
        (squash(row["headline"]), str(row["body_id"]), row["stance"])
        for _, row in read_jsonl(stance_folder / "fnc1_stances.jsonl")
    ]
    story = _stories(pairs)
    sides: dict[str, dict[str, list[str]]] = defaultdict(lambda: {"agree": [], "disagree": []})
    for headline, body_id, stance in sorted(pairs):
        text = leads.get(body_id, "")
        if stance in ("agree", "disagree") and long_enough(text) and text not in sides[headline][stance]:
            sides[headline][stance].append(text)
    both = {h: s for h, s in sides.items() if s["agree"] and s["disagree"]}
    drafts = []
    for headline, agree, disagree in assign(both):
        drafts.append(
            SubjectDraft(
                "fnc1",
                headline,
                headline,
                "news",
                {"agree": agree, "disagree": disagree},
                REPORT_ASPECTS,
                ("{s}",),
                kind="stance",
                bare_query_share=1.0,
                holdout_key=story[headline],
            )
        )
    return drafts
