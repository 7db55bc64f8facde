"""The demo's sample can show instruction following (issue 63 item 7): each demo instruction's
answer is written by meaning, not with the instruction's words, and the one page that repeats
those words says it is the wrong tent, so matching words alone picks it. The demo prints where
each written answer ranked (the shipped default's result, right or wrong, is in the README)."""

from __future__ import annotations

import re

from instemb_rag.cli.demo import (
    DEMO_INSTRUCTIONS,
    SAMPLE_DOCS,
    WORD_MATCH_ONLY,
    WRITTEN_ANSWERS,
    where_the_answer_ranked,
)

FUNCTION_WORDS = {"focus", "on", "and", "the", "a", "of"}


def content_words(instruction: str) -> set[str]:
    return {word for word in re.findall(r"[a-z]+", instruction.lower()) if word not in FUNCTION_WORDS}


def stems(words: set[str]) -> set[str]:
    """Each word's first five letters (durability and durable, weight and weighs, resistance and resistant)."""
    return {word[:5] if len(word) > 5 else word for word in words}


def pages() -> dict[str, str]:
    return {path.relative_to(SAMPLE_DOCS).as_posix(): path.read_text() for path in SAMPLE_DOCS.rglob("*.*")}


def test_only_the_word_matching_page_uses_the_instructions_words():
    words = stems(set().union(*(content_words(instruction) for instruction in DEMO_INSTRUCTIONS)))
    found = {
        source: sorted(stem for stem in words if re.search(rf"\b{stem}", text, re.IGNORECASE))
        for source, text in pages().items()
    }
    assert {source for source, hits in found.items() if hits} == {WORD_MATCH_ONLY}, found
    assert found[WORD_MATCH_ONLY] == sorted(words)  # both instructions' words, all of them


def test_each_instruction_has_a_written_answer_among_the_pages():
    assert set(WRITTEN_ANSWERS) == set(DEMO_INSTRUCTIONS)
    assert set(WRITTEN_ANSWERS.values()) <= set(pages()) and WORD_MATCH_ONLY in pages()
    assert len(set(WRITTEN_ANSWERS.values())) == len(DEMO_INSTRUCTIONS)


def test_the_demo_says_where_the_written_answer_ranked():
    instruction = DEMO_INSTRUCTIONS[0]
    answer = WRITTEN_ANSWERS[instruction]
    line = where_the_answer_ranked(instruction, [WORD_MATCH_ONLY, "tents/other.md", answer], 3)
    assert f"{answer} (#3)" in line and f"{WORD_MATCH_ONLY} (#1)" in line
    line = where_the_answer_ranked(instruction, ["tents/other.md"], 1)
    assert f"{answer} (not in the top 1)" in line
