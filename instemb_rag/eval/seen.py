"""Texts a model saw in training, so an evaluation can leave those queries out.

The training builders turn SciFact claims into instructions (``"... Claim: <claim>"``), so a
checkpoint trained on ``scifact_stance`` has read many of the SciFact train claims that the
``scifact`` and ``scifact-stance`` tasks query with. Passing the run's ``train.jsonl`` to
``evaluate(..., exclude_seen=...)`` drops every query whose text occurs inside a training
record's text, instruction or output, which leaves the held-out slice for an honest comparison
(the same slice for every encoder, trained or not).
"""

from __future__ import annotations

import os
import re

from ..datasets.records import read_records

_SPACE = re.compile(r"\s+")
# Shorter query texts (a few keywords) would match by chance inside long training passages.
MIN_MATCH_CHARS = 30


def normalise_text(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


class SeenTexts:
    """Substring lookup over every field of a records file (case and spacing ignored)."""

    def __init__(self, records_path: str | os.PathLike):
        self.path = str(records_path)
        fields = []
        for record in read_records(records_path):
            fields += [record.text, record.instruction or "", record.output]
        # One separator-joined haystack: `in` on one large string is a fast C search.
        self._haystack = "\x00".join(normalise_text(field) for field in fields)

    def __contains__(self, text: str) -> bool:
        needle = normalise_text(text)
        return len(needle) >= MIN_MATCH_CHARS and needle in self._haystack

    def note(self, dropped: int, total: int, what: str) -> str:
        return f"{dropped} of {total} {what} left out: their text occurs in the training records {self.path}"
