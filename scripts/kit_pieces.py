"""The GPU kit's pieces: files cut into pieces with sha256, packed into transfers, checked and joined.

Standard library only: the joining side runs on the bare GPU image before anything is installed.
A kit entry is one file to restore (a wheel, a model file, a data file) under a relative
destination; it is compressed (xz) unless already compressed (wheels), then cut into pieces of
at most ``piece_bytes``. Transfers are folders ``transfer-NN`` holding whole pieces, each at most
``budget_bytes``, so one transfer travels in one copy of the working tree.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

BLOCK = 1 << 20
# xz preset 0: ~37 % of a de-quantized fp32 safetensors file at ~10 MB/s; higher presets gain
# a few percent for several times the time.
XZ_PRESET = 0
RAW_SUFFIXES = (".whl", ".gz", ".xz", ".zip")


class KitError(Exception):
    """A kit that cannot be built or used as given; the message says what to do next."""


@dataclass
class Piece:
    name: str
    size: int
    sha256: str
    transfer: str = ""


@dataclass
class Entry:
    dest: str  # path under the unpack folder, '/'-separated
    kind: str  # wheel | model | teacher | data
    size: int
    sha256: str
    codec: str  # raw | xz
    pieces: list[Piece] = field(default_factory=list)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def codec_for(path: Path) -> str:
    return "raw" if path.name.endswith(RAW_SUFFIXES) else "xz"


def _stream(path: Path, codec: str, digest):
    """The bytes to store for ``path`` (compressed or not), hashing the original on the way."""
    compressor = lzma.LZMACompressor(preset=XZ_PRESET) if codec == "xz" else None
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
            yield compressor.compress(block) if compressor else block
    if compressor:
        yield compressor.flush()


class _PieceWriter:
    """Writes a byte stream as numbered pieces ``<slug>.000, .001, ...`` of at most ``piece_bytes``."""

    def __init__(self, staging: Path, slug: str, piece_bytes: int):
        self.staging, self.slug, self.piece_bytes = staging, slug, piece_bytes
        self.pieces: list[Piece] = []
        self.handle = None

    def _open(self) -> None:
        self.handle = open(self.staging / f"{self.slug}.{len(self.pieces):03d}", "wb")
        self.written, self.digest = 0, hashlib.sha256()

    def _close(self) -> None:
        self.handle.close()
        self.pieces.append(Piece(Path(self.handle.name).name, self.written, self.digest.hexdigest()))
        self.handle = None

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.handle is None:
                self._open()
            take = view[: self.piece_bytes - self.written]
            self.handle.write(take)
            self.digest.update(take)
            self.written += len(take)
            view = view[len(take) :]
            if self.written == self.piece_bytes:
                self._close()

    def finish(self) -> list[Piece]:
        if self.handle is None and not self.pieces:
            self._open()  # an empty file still gets its one (empty) piece
        if self.handle is not None:
            self._close()
        return self.pieces


def cut_into_pieces(source: Path, dest: str, kind: str, staging: Path, piece_bytes: int) -> Entry:
    """Write ``source`` as pieces of at most ``piece_bytes`` into ``staging``; return its entry."""
    codec = codec_for(source)
    writer = _PieceWriter(staging, dest.replace("/", "__") + (".xz" if codec == "xz" else ""), piece_bytes)
    original = hashlib.sha256()
    for chunk in _stream(source, codec, original):
        writer.write(chunk)
    return Entry(dest, kind, source.stat().st_size, original.hexdigest(), codec, writer.finish())


def plan_transfers(entries: list[Entry], budget_bytes: int) -> list[dict]:
    """First-fit decreasing: fewest transfers of at most ``budget_bytes`` each.

    Sets each piece's ``transfer`` and returns ``[{"name", "bytes", "pieces"}]`` in order.
    """
    pieces = sorted((p for e in entries for p in e.pieces), key=lambda p: (-p.size, p.name))
    transfers: list[dict] = []
    for piece in pieces:
        if piece.size > budget_bytes:
            raise KitError(f"piece {piece.name} ({piece.size:,} bytes) is larger than a transfer ({budget_bytes:,})")
        target = next((t for t in transfers if t["bytes"] + piece.size <= budget_bytes), None)
        if target is None:
            target = {"name": f"transfer-{len(transfers) + 1:02d}", "bytes": 0, "pieces": []}
            transfers.append(target)
        target["bytes"] += piece.size
        target["pieces"].append(piece.name)
        piece.transfer = target["name"]
    return transfers


def move_into_transfers(staging: Path, kit: Path, entries: list[Entry]) -> None:
    for piece in (p for e in entries for p in e.pieces):
        folder = kit / piece.transfer
        folder.mkdir(exist_ok=True)
        os.replace(staging / piece.name, folder / piece.name)


def entries_to_json(entries: list[Entry]) -> list[dict]:
    return [asdict(entry) for entry in entries]


def entries_from_json(rows: list[dict]) -> list[Entry]:
    return [Entry(**{**row, "pieces": [Piece(**p) for p in row["pieces"]]}) for row in rows]


def piece_problems(kit: Path, entries: list[Entry]) -> dict[str, list[str]]:
    """Missing or damaged pieces, by transfer: ``{"transfer-03": ["x.000 is missing", ...]}``."""
    problems: dict[str, list[str]] = {}
    for piece in (p for e in entries for p in e.pieces):
        path = kit / piece.transfer / piece.name
        if not path.is_file():
            problem = f"{piece.name} is missing"
        elif path.stat().st_size != piece.size:
            problem = f"{piece.name} has {path.stat().st_size:,} bytes, not {piece.size:,}"
        elif sha256_of(path) != piece.sha256:
            problem = f"{piece.name} does not match its sha256"
        else:
            continue
        problems.setdefault(piece.transfer, []).append(problem)
    return problems


def describe_problems(problems: dict[str, list[str]], kit: Path) -> str:
    lines = [f"the kit in {kit} is incomplete; send these transfers (again) and rerun:"]
    for transfer, found in sorted(problems.items()):
        shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
        lines.append(f"  {transfer} ({kit / transfer}): {shown}")
    return "\n".join(lines)


def join_entry(kit: Path, entry: Entry, work: Path) -> Path:
    """Concatenate an entry's pieces (decompressing), check the result's sha256, move it into place."""
    target = work / entry.dest
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    decompressor = lzma.LZMADecompressor() if entry.codec == "xz" else None
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for piece in entry.pieces:
            with open(kit / piece.transfer / piece.name, "rb") as handle:
                while block := handle.read(BLOCK):
                    data = decompressor.decompress(block) if decompressor else block
                    digest.update(data)
                    out.write(data)
    if digest.hexdigest() != entry.sha256:
        partial.unlink()
        raise KitError(f"{entry.dest}: joined pieces do not match the file's sha256; rebuild the kit")
    os.replace(partial, target)
    return target


def join_all(kit: Path, entries: list[Entry], work: Path) -> None:
    problems = piece_problems(kit, entries)
    if problems:
        raise KitError(describe_problems(problems, kit))
    for entry in entries:
        join_entry(kit, entry, work)


def folder_files(folder: Path) -> list[Path]:
    """The regular files of a model folder, lock files and partial writes left out."""
    return sorted(
        path
        for path in folder.rglob("*")
        if path.is_file() and not path.name.endswith((".lock", ".partial")) and "__pycache__" not in path.parts
    )


def reset_folder(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1, default=str) + "\n")
