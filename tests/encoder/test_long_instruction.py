"""A long instruction never cuts the query (issue 63 item 1). The sentence encoder's part of a
query vector reads "instruction + query" in its window (the tiny one here: 32 tokens, MiniLM's 256):
an instruction that does not fit beside the query loses words from its start, down to the first
whole sentence that fits, and the query is read whole; the command line says so as a note, in
its own words, not as a Python warning with a source line. Texts that fit are read as pasted."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import index_cli_args
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.encoder.modules.sentence_encoder import AnchorTruncationWarning
from instemb_rag.teachers import teacher_text

pytest.importorskip("sentence_transformers")

QUERY = "which tent is durable in rain and wind ?"
# 3 sentences of 11-12 tokens: with the query (10 + [CLS] [SEP]) only the last fits the 32 tokens.
LONG_INSTRUCTION = (
    "the backpack strap and frame are heavy but durable . "
    "a light stove with gas fuel is good for a camp trip . "
    "focus on the floor and seam of the nylon tent ."
)
LAST_SENTENCE = "focus on the floor and seam of the nylon tent ."
runner = CliRunner()


@pytest.fixture()
def sentence_encoder(tiny_two_tower):
    return tiny_two_tower.sentence_encoder


def tokens(sentence_encoder, text: str) -> int:
    return len(sentence_encoder.tokenizer(text, verbose=False)["input_ids"])


def test_the_query_is_read_whole_and_the_instruction_keeps_its_last_sentence(sentence_encoder):
    assert (
        tokens(sentence_encoder, teacher_text(QUERY, LONG_INSTRUCTION)) > sentence_encoder.max_length
    )  # it would be cut
    text, shortened = sentence_encoder.fitted_anchor_text(QUERY, LONG_INSTRUCTION)
    assert text == teacher_text(QUERY, LAST_SENTENCE) and text.endswith(QUERY)
    assert tokens(sentence_encoder, text) <= sentence_encoder.max_length
    assert shortened.kept_words == len(LAST_SENTENCE.split()) and shortened.words == len(LONG_INSTRUCTION.split())
    assert not shortened.query_cut


def test_without_a_whole_sentence_that_fits_the_instructions_last_words_are_kept(sentence_encoder):
    one_sentence = " ".join(["the tent floor is durable"] * 6) + " ."  # 31 tokens, no sentence end inside
    text, shortened = sentence_encoder.fitted_anchor_text(QUERY, one_sentence)
    assert (
        text.endswith(f"tent floor is durable . {QUERY}")
        and tokens(sentence_encoder, text) <= sentence_encoder.max_length
    )
    assert tokens(sentence_encoder, text) >= sentence_encoder.max_length - 5  # as many words as fit, not fewer
    assert 0 < shortened.kept_words < shortened.words


def test_a_query_as_long_as_the_window_is_read_without_the_instruction(sentence_encoder):
    long_query = " ".join(["is the tent durable"] * 10)
    text, shortened = sentence_encoder.fitted_anchor_text(long_query, "focus on rain .")
    assert text == long_query and shortened.query_cut and shortened.kept_words == 0


def test_vectors_say_it_once_and_inputs_that_fit_are_read_as_pasted(sentence_encoder):
    queries = [QUERY, "a stove", "rain"]
    instructions = [LONG_INSTRUCTION, "focus on weather", None]
    with pytest.warns(AnchorTruncationWarning) as caught:
        vectors = sentence_encoder.anchor_vectors(queries, instructions)
    assert len([w for w in caught if issubclass(w.category, AnchorTruncationWarning)]) == 1
    said = str(caught[0].message)
    assert "1 of 3 instructions" in said and "it read each query whole" in said and "32 tokens" in said
    expected = sentence_encoder.teacher.encode(
        [teacher_text(QUERY, LAST_SENTENCE), teacher_text("a stove", "focus on weather"), "rain"]
    )
    assert np.array_equal(vectors, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AnchorTruncationWarning)
        short = sentence_encoder.anchor_vectors(queries[1:], instructions[1:])
    assert np.array_equal(
        short, sentence_encoder.teacher.encode([teacher_text(q, i) for q, i in zip(queries[1:], instructions[1:])])
    )


@pytest.fixture(scope="module")
def effect_index(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    from instemb_rag.encoder.load import untrained_effect

    root = tmp_path_factory.mktemp("long_instruction")
    untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(root / "model")
    (root / "docs").mkdir()
    (root / "docs" / "tent.txt").write_text("the tent floor and seam are durable in rain .")
    (root / "docs" / "stove.txt").write_text("a light stove with gas fuel .")
    result = runner.invoke(app, index_cli_args(root / "docs", root / "index", root / "model", "--chunk-overlap", "8"))
    assert result.exit_code == 0, result.output
    return root / "index"


def test_the_query_command_says_it_as_a_note(effect_index):
    result = runner.invoke(
        app,
        ["query", QUERY, "-i", LONG_INSTRUCTION, "--index-dir", str(effect_index)],
        env={"COLUMNS": "200", "INSTEMB_NO_DAEMON": "1"},
    )
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "note: the instruction and the query are longer than the sentence encoder" in flat, result.output
    kept, words = len(LAST_SENTENCE.split()), len(LONG_INSTRUCTION.split())
    assert f"it read the query whole and the last {kept} of the instruction's {words} words" in flat
    assert "Warning" not in result.output and ".py:" not in result.output
