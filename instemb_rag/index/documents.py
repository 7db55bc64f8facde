"""Finding, reading and splitting the files to index (LlamaIndex readers and node parsers).

Every file that cannot be used is reported with a reason instead of stopping the run:
binary, not UTF-8, too large, unreadable, unsupported type, empty, or reached through a
symlink loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..choices import (  # noqa: F401  (the one list of file types; imported from here too)
    MARKUP_SUFFIXES,
    PDF_SUFFIXES,
    STRUCTURED_SUFFIXES,
    SUPPORTED_SUFFIXES,
    TEXT_SUFFIXES,
    supported_types,
)
from ..hashing import file_sha256
from .selection import DATA_SUFFIXES, FileSelection, Selector

SNIFF_BYTES = 8192


@dataclass
class Skipped:
    path: str
    reason: str
    keep_previous: bool = False  # the file still exists but could not be read this time
    folder: bool = False  # a folder (a symlink loop), not a file: not among the files found
    no_text: bool = False  # a data file that parses but holds no text (counted apart in the summary)


@dataclass
class Discovery:
    """Files found under the indexed root, keyed by their path relative to it (posix)."""

    root: Path
    files: dict[str, Path] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # files not read, by reason (selection.py)
    folders_left_out: int = 0
    notes: list[str] = field(default_factory=list)  # patterns that matched nothing
    warnings: list[str] = field(default_factory=list)  # unreadable ignore files
    ignore_files: list[str] = field(default_factory=list)  # the ignore files in use

    @property
    def files_left_out(self) -> int:
        return sum(self.left_out.values())

    @property
    def files_found(self) -> int:
        """Every file the walk met, of any type: those to index and those skipped."""
        return len(self.files) + sum(not item.folder for item in self.skipped)


@dataclass
class Chunk:
    position: int  # order of the chunk within its file
    text: str
    extra: dict = field(default_factory=dict)  # e.g. the PDF page


def discover(root: Path, max_bytes: int, selection: FileSelection | None = None) -> Discovery:
    """Walk root (a folder or one file), following symlinks but never around a loop, reading what
    ``selection`` chooses (selection.py: hidden paths, ignore files, patterns, data files)."""
    root = Path(root)
    if root.is_file():  # named on the command line: read as it is
        found = Discovery(root=root.parent)
        _consider(found, root, root.name, max_bytes)
        return found
    found = Discovery(root=root)
    selector = Selector(root, selection or FileSelection())
    visited_dirs: set[str] = set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        relative_folder = "" if Path(folder) == root else _relative(root, Path(folder))
        if real in visited_dirs:
            # os.walk with followlinks would otherwise recurse until the path is too long.
            found.skipped.append(Skipped(relative_folder, "symlink loop: folder already visited", folder=True))
            subfolders[:] = []
            continue
        visited_dirs.add(real)
        selector.enter_folder(Path(folder), relative_folder)
        subfolders[:] = sorted(
            name
            for name in subfolders
            if not name.startswith(".") and not selector.skip_folder(_join(relative_folder, name))
        )
        for name in sorted(names):
            if name.startswith(".") or selector.left_out(_join(relative_folder, name), Path(name).suffix):
                continue
            path = Path(folder) / name
            _consider(found, path, _relative(root, path), max_bytes)
    found.left_out = dict(selector.counts)
    found.folders_left_out = selector.folders_left_out
    found.notes = selector.notes()
    found.warnings = list(selector.ignore.warnings)
    found.ignore_files = list(selector.ignore.read)
    return found


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _relative(root: Path, path: Path) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def _consider(found: Discovery, path: Path, relative: str, max_bytes: int) -> None:
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        found.skipped.append(
            Skipped(
                relative,
                f"unsupported type '{path.suffix or 'no extension'}' (supported: {supported_types()})",
            )
        )
        return
    try:
        size = path.stat().st_size
    except OSError as error:  # dangling symlink, permission denied, symlink loop on a file
        found.skipped.append(Skipped(relative, f"cannot stat: {error.strerror or error}", keep_previous=True))
        return
    if size > max_bytes:
        found.skipped.append(Skipped(relative, f"too large: {size:,} bytes > --max-file-size {max_bytes:,}"))
        return
    found.files[relative] = path


def content_hash(path: Path) -> str:
    """Hex SHA-256 of the file (the catalog compares it to find changed files)."""
    return file_sha256(path)


def unusable_reason(path: Path) -> str | None:
    """Why a file cannot be indexed before any reader sees it, or None."""
    suffix = path.suffix.lower()
    with open(path, "rb") as stream:
        data = stream.read() if suffix not in PDF_SUFFIXES else stream.read(SNIFF_BYTES)
    if suffix in PDF_SUFFIXES:
        return None if data.startswith(b"%PDF") else "not a PDF (no %PDF header)"
    if b"\x00" in data[:SNIFF_BYTES]:
        return "binary file (NUL bytes) with a text extension"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return (
            f"not UTF-8 text (invalid byte 0x{data[error.start]:02x} at offset {error.start}); "
            "convert it, e.g. `iconv -f latin1 -t utf-8`"
        )
    return data_without_text(text, suffix) if suffix in DATA_SUFFIXES else None


NO_TEXT = "data file without text"


def data_without_text(text: str, suffix: str) -> str | None:
    """Why a data file that parses holds no text to embed (numbers, booleans, nulls and the keys or
    header naming them: a results table), or None. A file that does not parse is left to its reader,
    whose error is the better message."""
    import csv
    import json

    try:
        if suffix == ".csv":
            rows = list(csv.reader(text.splitlines()))
            values = [cell for row in rows[1:] for cell in row]  # the header names columns: not text
            kind = "a CSV file"
        else:
            lines = [line for line in text.splitlines() if line.strip()] if suffix == ".jsonl" else [text]
            values = [value for line in lines for value in _string_values(json.loads(line))]
            kind = "JSON lines" if suffix == ".jsonl" else "JSON"
    except (ValueError, csv.Error, RecursionError):
        return None
    if any(any(character.isalpha() for character in value) for value in values):
        return None
    return f"{NO_TEXT}: it parses as {kind} but holds only numbers, booleans, nulls and the keys naming them"


def _string_values(value) -> list[str]:
    """The string values of parsed JSON, keys left out."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _string_values(item)]
    if isinstance(value, list):
        return [text for item in value for text in _string_values(item)]
    return []


def _file_extractors() -> dict:
    from llama_index.core.readers.json import JSONReader
    from llama_index.readers.file import CSVReader, HTMLTagReader, PDFReader

    html = HTMLTagReader(tag="body")
    return {
        ".pdf": PDFReader(),
        ".json": JSONReader(),
        ".jsonl": JSONReader(is_jsonl=True),
        ".csv": CSVReader(),
        ".html": html,
        ".htm": html,
    }


def read_texts(path: Path) -> list[tuple[str, dict]]:
    """(text, extra metadata) per LlamaIndex document of the file (one per page for PDF)."""
    from llama_index.core import SimpleDirectoryReader

    reader = SimpleDirectoryReader(
        input_files=[str(path)],
        file_extractor=_file_extractors(),
        encoding="utf-8",
        errors="strict",
        raise_on_error=True,
        filename_as_id=False,
    )
    texts = []
    for document in reader.load_data():
        extra = {"page": document.metadata["page_label"]} if "page_label" in document.metadata else {}
        texts.append((document.text, extra))
    return texts


DEFAULT_CHUNK_SIZE = 256  # tokens


def chunking_tokenizer(encoder):
    """The tokenizer chunks are counted in: the document side's (encoder/sides.py), the tokenizer of
    the part that reads the fewest document tokens, whose limit is what a chunk must fit."""
    return encoder.document_side.tokenizer


def resolve_chunk_size(encoder, chunk_size: int | None, chunk_overlap: int = 0) -> int:
    """The chunk size an index uses: the one asked for, else 256, or the document side's token limit
    (``document_side.token_limit``: what its most restrictive part reads) when lower. What runs past
    that limit is cut, so a larger size asked for is refused rather than cut without a word."""
    side = encoder.document_side
    limit = side.token_limit
    if chunk_size is None and chunk_overlap >= min(DEFAULT_CHUNK_SIZE, limit):
        from .errors import BadInputError

        raise BadInputError(
            f"--chunk-overlap {chunk_overlap} is not below the chunk size, the limit of what embeds documents "
            f"({side.description}): {limit} tokens. Use a smaller --chunk-overlap."
        )
    if chunk_size is None:
        return min(DEFAULT_CHUNK_SIZE, limit)
    if chunk_size > limit:
        from .errors import BadInputError

        raise BadInputError(
            f"--chunk-size {chunk_size} is longer than what embeds documents ({side.description}) reads: {limit} "
            f"of its tokens, the rest of each chunk would be cut. Use --chunk-size {limit} or less."
        )
    return chunk_size


# A last chunk under this share of the chunk size is a tail (a closing line, a signature): it is
# read with the text before it rather than embedded alone, where a few words match any query.
TAIL_SHARE = 8


class ChunkSplitter:
    """Token-aware splitting with the encoder's own tokenizer (LlamaIndex SentenceSplitter), without
    a tail of a few words as a chunk of its own. The splitter fills each chunk in turn and leaves
    what is left last (it has no option against that): when the last chunk adds fewer than
    1/TAIL_SHARE of the chunk size to the one before, the two are split again as evenly as their
    sentences allow, so the closing words are read with the sentences before them."""

    def __init__(self, tokenizer, chunk_size: int, chunk_overlap: int):
        self.tokenizer = tokenizer
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.min_tail = max(1, chunk_size // TAIL_SHARE)
        self.splitter = self.sentence_splitter(chunk_size)

    def token_ids(self, text: str) -> list[int]:
        # verbose=False: the splitter counts a whole text before splitting it, and a text longer than
        # the tokenizer's model_max_length would log "Token indices sequence length is longer than
        # ... will result in indexing errors" although no chunk runs past it.
        return self.tokenizer(text, add_special_tokens=False, verbose=False).input_ids

    def sentence_splitter(self, chunk_size: int):
        from llama_index.core.node_parser import SentenceSplitter

        return SentenceSplitter(
            chunk_size=chunk_size,
            chunk_overlap=min(self.chunk_overlap, chunk_size // 2),
            tokenizer=self.token_ids,
        )

    def split(self, texts: list[tuple[str, dict]]) -> list[Chunk]:
        chunks: list[Chunk] = []
        for text, extra in texts:
            for piece in self.pieces(text):
                chunks.append(Chunk(position=len(chunks), text=piece, extra=extra))
        return chunks

    def pieces(self, text: str) -> list[str]:
        """The chunks' texts of one text (a file, a PDF page), its tail read with the chunk before."""
        pieces = [piece for piece in self.splitter.split_text(text) if piece.strip()]
        starts = piece_starts(text, pieces) if len(pieces) > 1 else None
        if starts is None:  # one chunk, or a piece not found verbatim in the text: as split
            return pieces
        # What the last chunk adds to the one before (the overlap it repeats is not its own).
        tail = text[max(starts[-1], starts[-2] + len(pieces[-2])) :]
        if len(self.token_ids(tail.strip())) >= self.min_tail:
            return pieces
        # The chunk before was filled as far as the chunk size allows, so the tail cannot simply join
        # it (the end would be cut from its vector): the two are split again, evenly.
        return [*pieces[:-2], *self.halves(text[starts[-2] :].strip(), pieces[-2:])]

    def halves(self, region: str, as_split: list[str]) -> list[str]:
        """``region`` in two chunks as even as its sentences allow: the smallest chunk size that
        still splits it in two (a binary search; each try splits a text of two chunks)."""
        low, high, best = self.chunk_size // 2, self.chunk_size, as_split
        while low < high:
            size = (low + high) // 2
            pieces = [piece for piece in self.sentence_splitter(size).split_text(region) if piece.strip()]
            if len(pieces) <= 2:
                high, best = size, pieces
            else:
                low = size + 1
        return best


def piece_starts(text: str, pieces: list[str]) -> list[int] | None:
    """Where each of ``pieces`` starts in ``text`` (the splitter's chunks are stripped runs of the
    text, in order, each starting after the one before), or None if one is not found."""
    position = 0
    starts = []
    for piece in pieces:
        found = text.find(piece, position)
        if found < 0:
            return None
        starts.append(found)
        position = found + 1
    return starts
