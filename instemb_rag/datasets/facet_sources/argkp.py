"""IBM ArgKP 2021: crowd-written arguments for and against 31 debate topics ("We should legalize
cannabis"), each labelled with its stance on the topic (+1 / -1) and matched (or not) to key points.

A topic has over a hundred arguments a side, but a facet group holds one passage per aspect, so a
topic gives up to ``ARGUMENTS_PER_STANCE`` subjects: the n-th supporting and the n-th opposing
argument (arguments a key point matched first: they are on point; then a hash order, stable
across file orders). The query is the topic itself, the instruction asks for one side. Every
subject of a topic shares its ``holdout_key``, so the dev split takes whole topics.

Topics that debate what a PERSPECTRUM **test** claim debates (eval's perspectrum-stance scores
those) are left out whole: ``EVAL_OVERLAP``."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

from ...jsonl import read_jsonl
from .drafts import SubjectDraft
from .passages import long_enough, squash
from .wording import Aspect

ARGUMENTS_PER_STANCE = 16  # subjects per topic; more repeat the topic's query with ever more same-side passages
MAX_WORDS = 60
# PERSPECTRUM test claims on the same debate: "Voting should be compulsory in the UK", "Remove the
# requirement for Catholic Priests to take a vow of celibacy", "We have to employ mercenaries", "We
# must be a libertarian ...", "All drugs should be decriminalised" (and two more on drugs),
# "Handguns must be banned in Washington D.C.", "Atheist countries are more benevolent", "The US is
# Justified in Using Force to Prevent States From Acquiring Nuclear Weapons".
EVAL_OVERLAP = frozenset(
    {
        "we should introduce compulsory voting",
        "the vow of celibacy should be abandoned",
        "we should ban private military companies",
        "we should adopt libertarianism",
        "we should legalize cannabis",
        "we should abolish the right to keep and bear arms",
        "we should adopt atheism",
        "we should fight for the abolition of nuclear weapons",
    }
)
ARGUMENT_ASPECTS = {
    "support": Aspect(
        "support",
        ("arguments in favour", "reasons to support it", "the case for it", "points in its favour",
         "what its supporters argue", "arguments for this"),
        ("Find an argument in favour.", "Which arguments support this?", "Give me a reason to agree.",
         "Make the case for it.", "What do supporters say?", "Why would someone agree with this?",
         "Argue for this."),
    ),
    "undermine": Aspect(
        "undermine",
        ("arguments against this", "reasons to oppose it", "the case against it", "objections to it",
         "what its opponents argue", "counter-arguments"),
        ("Find an argument against this.", "Which arguments oppose this?", "Give me a reason to disagree.",
         "Make the case against it.", "What do opponents say?", "Why would someone object to this?",
         "Argue against this."),
    ),
}  # fmt: skip
_STANCE_KEY = {1: "support", -1: "undermine"}


def clean_argument(text: str) -> str:
    """Stray quote marks off the ends, the first letter capitalised (many arguments start lower-case)."""
    text = squash(text).strip("`'\" ")
    return text[:1].upper() + text[1:]


def _ranked(topic: str, matched: dict[str, bool], left_out: set[str]) -> list[str]:
    """A side's arguments (text -> a key point matched it): matched first, then a hash order."""
    digest = {text: hashlib.sha256(f"{topic}\x00{text}".encode()).hexdigest() for text in matched}
    return sorted(
        (text for text in matched if text not in left_out), key=lambda text: (not matched[text], digest[text])
    )


def read_argkp(stance_folder: Path) -> list[SubjectDraft]:
    arguments: dict[str, dict[str, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    for _, row in read_jsonl(stance_folder / "argkp.jsonl"):
        topic, stance = squash(row["topic"]), _STANCE_KEY.get(row.get("stance"))
        if stance is None or topic.lower() in EVAL_OVERLAP:
            continue
        text = clean_argument(row["argument"])
        if long_enough(text) and len(text.split()) <= MAX_WORDS:
            by_text = arguments[topic][stance]
            by_text[text] = by_text.get(text, False) or row.get("match") == 1
    drafts = []
    for topic in sorted(arguments):
        sides = arguments[topic]
        both = set(sides["support"]) & set(sides["undermine"])  # labelled both ways: neither is right
        ranked = {stance: _ranked(topic, sides[stance], both) for stance in _STANCE_KEY.values()}
        pairs = min(ARGUMENTS_PER_STANCE, *(len(texts) for texts in ranked.values()))
        for n in range(pairs):
            drafts.append(
                SubjectDraft(
                    "argkp",
                    f"{topic} #{n + 1}",
                    topic,
                    "debate",
                    {stance: texts[n] for stance, texts in ranked.items()},
                    ARGUMENT_ASPECTS,
                    ("{s}",),
                    kind="stance",
                    bare_query_share=1.0,
                    holdout_key=topic,
                )
            )
    return drafts
