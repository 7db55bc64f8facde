"""What every source reader returns: one subject with one passage per aspect, before wording.

build.py turns a draft into a facet group (instemb_rag/datasets/facet_groups.py's format), drawing the
query's and each instruction's wording with a seeded generator."""

from __future__ import annotations

from dataclasses import dataclass

from .wording import Aspect

MIN_ASPECTS = 3  # an aspect group needs at least three passages: two are a coin toss
MAX_ASPECTS = 6  # more would crowd one batch; a subject with more gives a seeded sample


@dataclass(frozen=True)
class SubjectDraft:
    source: str  # the file it came from, e.g. "manpages"
    subject: str  # the subject's key in that file (unique within the source)
    name: str  # how a query names it ("getent", "this laptop")
    domain: str
    passages: dict[str, str]  # aspect key -> passage text
    aspects: dict[str, Aspect]  # the source's aspect table (every key of ``passages`` is in it)
    query_questions: tuple[str, ...]  # neutral questions, "{s}" = the name
    kind: str = "aspect"
    bare_query_share: float = 0.3
    # What the dev split hashes when several subjects share one origin (an ArgKP debate topic, an
    # FNC-1 news story), so the whole topic falls on one side; empty: the subject itself.
    holdout_key: str = ""

    def __post_init__(self):
        unknown = [key for key in self.passages if key not in self.aspects]
        if unknown:
            raise ValueError(f"{self.source}:{self.subject}: aspects {unknown} are not in the source's table")


def keep_subject(passages: dict[str, str], minimum: int = MIN_ASPECTS) -> bool:
    return len(passages) >= minimum
