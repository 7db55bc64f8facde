"""Instruction wordings for an aspect: many templates over several names of the aspect (synonyms
and paraphrases, not only the data set's label), plus direct questions where one is written.

A model trained on one wording per label learns to match the label word for word; users name an
aspect in their own words ("how long it runs unplugged" for BATTERY#OPERATION_PERFORMANCE), so
each instruction draws its template and its name at random (seeded by the builder).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# "{a}" is one of the aspect's names, written to follow "about" ("the food", "what it returns").
TEMPLATES: tuple[str, ...] = (
    "Focus on {a}.",
    "I only care about {a}.",
    "What does it say about {a}?",
    "Tell me about {a}.",
    "Find the part that covers {a}.",
    "Only {a}, please.",
    "Answer with respect to {a}.",
    "I want to know about {a}.",
    "Look for {a}.",
    "Show me what is said about {a}.",
    "Information on {a}, nothing else.",
    "Concentrate on {a}.",
    "Which part discusses {a}?",
    "Give me the passage on {a}.",
)
QUESTION_SHARE = 0.35  # of instructions written as one of the aspect's own questions, where it has any


@dataclass(frozen=True)
class Aspect:
    """One labelled aspect: its key in the groups (the facet), and ways a user would ask for it."""

    key: str
    names: tuple[str, ...]
    questions: tuple[str, ...] = field(default=())

    def __post_init__(self):
        if not self.names:
            raise ValueError(f"aspect {self.key!r} needs at least one name")


def instruction(aspect: Aspect, rng: random.Random) -> str:
    """One wording asking for ``aspect``: its own question, or a template over one of its names."""
    if aspect.questions and rng.random() < QUESTION_SHARE:
        return rng.choice(aspect.questions)
    return rng.choice(TEMPLATES).format(a=rng.choice(aspect.names))


def aspects(table: dict[str, tuple]) -> dict[str, Aspect]:
    """``{key: (names, questions)}`` or ``{key: names}`` as Aspect objects."""
    built = {}
    for key, value in table.items():
        names, questions = value if value and isinstance(value[0], tuple) else (value, ())
        built[key] = Aspect(key, tuple(names), tuple(questions))
    return built


def subject_query(rng: random.Random, questions: tuple[str, ...], name: str, bare_share: float = 0.3) -> str:
    """The group's neutral query: a question naming the subject, or (``bare_share``) its name alone
    (a user who types only the subject and lets the instruction say what is wanted)."""
    if rng.random() < bare_share:
        return name
    return rng.choice(questions).format(s=name)
