"""Indexing ordinary pages says nothing alarming, and a closing line is no chunk of its own (issue
63 item 3). The splitter counts a whole file's tokens before splitting it, which made the
tokenizer log "Token indices sequence length is longer than the specified maximum sequence length
... will result in indexing errors" on any page longer than the window, though no chunk was; and
it filled each chunk in turn, leaving a few closing words as the last chunk."""

from __future__ import annotations

import logging

import pytest
from helpers import index_cli_args
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index.documents import ChunkSplitter

pytest.importorskip("sentence_transformers")

runner = CliRunner()
SENTENCES = (
    "the tent is durable in rain and wind .",
    "a light stove with gas fuel is good for a camp trip .",
    "the backpack frame and strap are heavy but durable .",
    "this review of the nylon tent floor is about water .",
)
CLOSING = "good night ."


def page(words: int) -> str:
    """About ``words`` words of the test vocabulary, in sentences (the four in turn)."""
    text: list[str] = []
    while sum(len(sentence.split()) for sentence in text) < words:
        text.append(SENTENCES[len(text) % len(SENTENCES)])
    return " ".join(text)


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture()
def transformers_log():
    """What transformers logs (its loggers do not propagate to the root logger)."""
    logger = logging.getLogger("transformers")
    records = Records()
    logger.addHandler(records)
    try:
        yield records.messages
    finally:
        logger.removeHandler(records)


def test_a_folder_of_300_word_files_indexes_without_a_tokenizer_warning(
    tiny_model_dir, tiny_st_dir, tmp_path, transformers_log
):
    from instemb_rag.encoder.load import untrained_effect

    model = tmp_path / "model"
    untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(model)
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"page{n}.txt").write_text(page(300))
    result = runner.invoke(app, index_cli_args(docs, tmp_path / "index", model, "--chunk-overlap", "8"))
    assert result.exit_code == 0, result.output
    said = "\n".join([*transformers_log, result.output])
    assert "Token indices sequence length" not in said and "indexing errors" not in said, said


@pytest.fixture(scope="module")
def tokenizer(tiny_st_dir):
    """The tiny sentence encoder's tokenizer (its window: 32 tokens), as a document side has it."""
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    return SentenceEncoder.load(str(tiny_st_dir)).tokenizer


def tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False).input_ids)


SENTENCE = "the tent is durable in rain and wind ."  # 9 tokens: seven fill a 64-token chunk but one


@pytest.mark.parametrize("overlap", [0, 16])
def test_a_closing_line_is_read_with_the_text_before_it(tokenizer, overlap):
    chunk_size = 64
    text = " ".join([SENTENCE] * 7) + "\n\n" + CLOSING
    splitter = ChunkSplitter(tokenizer, chunk_size, overlap)
    greedy = [piece for piece in splitter.splitter.split_text(text) if piece.strip()]
    # What the splitter alone does: the closing line (and what the overlap repeats) as the last chunk.
    assert len(greedy) == 2 and greedy[-1].endswith(CLOSING)
    assert tokens(tokenizer, greedy[-1]) <= overlap + tokens(tokenizer, CLOSING)
    chunks = [chunk.text for chunk in splitter.split([(text, {})])]
    assert len(chunks) == 2 and chunks[-1].endswith(CLOSING)
    assert all(tokens(tokenizer, chunk) <= chunk_size for chunk in chunks)
    # The two share the text evenly: the closing line is read with the sentences before it.
    assert min(tokens(tokenizer, chunk) for chunk in chunks) >= chunk_size // 3, chunks
    assert chunks[0].startswith(SENTENCE) and text.count(SENTENCE) <= sum(c.count(SENTENCE) for c in chunks)


def test_a_tail_that_is_not_small_stays_as_split(tokenizer):
    text = " ".join([SENTENCE] * 7) + "\n\n" + " ".join(SENTENCES)
    splitter = ChunkSplitter(tokenizer, 64, 0)
    greedy = [piece for piece in splitter.splitter.split_text(text) if piece.strip()]
    assert len(greedy) == 2 and tokens(tokenizer, greedy[-1]) >= 64 // 8  # a tail: under documents.TAIL_SHARE's share
    assert [chunk.text for chunk in splitter.split([(text, {})])] == greedy


def test_a_short_text_is_one_chunk(tokenizer):
    chunks = ChunkSplitter(tokenizer, 64, 8).split([(CLOSING, {"page": "1"})])
    assert [(chunk.text, chunk.extra) for chunk in chunks] == [(CLOSING, {"page": "1"})]
