"""Passages as users index them: a few sentences to a paragraph.

Review sentences of one aspect are joined; long reference sections are cut at a sentence end
near ``MAX_WORDS`` (a section's opening is what an index chunk of it would hold)."""

from __future__ import annotations

import re

MAX_WORDS = 120
MIN_WORDS = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACES = re.compile(r"\s+")


def squash(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def cut(text: str, max_words: int = MAX_WORDS) -> str:
    """The text's opening sentences up to ``max_words``; one over-long sentence is cut at a word."""
    text = squash(text)
    if len(text.split()) <= max_words:
        return text
    kept: list[str] = []
    count = 0
    for sentence in _SENTENCE_END.split(text):
        words = len(sentence.split())
        if kept and count + words > max_words:
            break
        kept.append(sentence)
        count += words
    joined = " ".join(kept)
    return joined if len(joined.split()) <= max_words else " ".join(joined.split()[:max_words])


def join(sentences: list[str], max_words: int = MAX_WORDS) -> str:
    """Sentences of one aspect as one passage (duplicates dropped, order kept), then cut."""
    unique = list(dict.fromkeys(squash(sentence) for sentence in sentences if sentence.strip()))
    return cut(" ".join(unique), max_words)


def long_enough(text: str, min_words: int = MIN_WORDS) -> bool:
    return len(text.split()) >= min_words


def sentence_around(text: str, span: str, neighbours: int = 1) -> str | None:
    """The sentence holding ``span`` with ``neighbours`` sentences either side; None when absent."""
    sentences = [s for s in _SENTENCE_END.split(squash(text)) if s]
    needle = squash(span).lower()
    for index, sentence in enumerate(sentences):
        if needle and needle in sentence.lower():
            return " ".join(sentences[max(0, index - neighbours) : index + neighbours + 1])
    return None
