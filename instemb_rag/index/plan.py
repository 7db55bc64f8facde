"""The plan of an index run, said before the work: what will be read, by kind of file (files,
chunks), what is left out and why, and how long embedding will take on this machine, from a rate
measured on the run's own first batches.

The estimate counts characters rather than chunks: a folder of short files has many chunks far
below the chunk size, and the model's time follows the tokens (about the characters) it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

# The name of each kind of file in the plan (the suffix alone for any other).
KIND_NAMES = {
    ".md": "Markdown",
    ".markdown": "Markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "reStructuredText",
    ".html": "HTML",
    ".htm": "HTML",
    ".pdf": "PDF",
    ".json": "JSON (data)",
    ".jsonl": "JSON lines (data)",
    ".csv": "CSV (data)",
}
# An estimate this far from what a run took (either way) is said in the summary.
ESTIMATE_TOLERANCE = 2.0
# Embedding goes on while the files are read; past this many seconds it waits for the plan.
PLAN_BEFORE_S = 60.0


def kind_of(source: str) -> str:
    return PurePosixPath(source).suffix.lower() or "(none)"


@dataclass
class KindCount:
    files: int = 0
    chunks: int = 0
    characters: int = 0


@dataclass
class RunPlan:
    """What a run reads and embeds (``chunks`` of new or changed files), and what it leaves."""

    kinds: dict[str, KindCount] = field(default_factory=dict)
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    folders_left_out: int = 0
    kept_from_interrupted: int = 0  # chunks an interrupted run embedded, taken instead of embedding them
    reused: int = 0  # chunks whose vectors were taken (an interrupted run's, a changed file's unchanged text)
    notes: list[str] = field(default_factory=list)  # unreadable ignore files, patterns that matched nothing

    def add(self, source: str, chunks: list) -> None:
        count = self.kinds.setdefault(kind_of(source), KindCount())
        count.files += 1
        count.chunks += len(chunks)
        count.characters += sum(len(chunk.text) for chunk in chunks)

    @property
    def chunks(self) -> int:
        return sum(count.chunks for count in self.kinds.values())

    @property
    def characters(self) -> int:
        return sum(count.characters for count in self.kinds.values())

    def lines(self) -> list[str]:
        """One line per kind of file, then what is not embedded."""
        lines = []
        for kind in sorted(self.kinds, key=lambda name: -self.kinds[name].chunks):
            count = self.kinds[kind]
            name = f"{KIND_NAMES.get(kind, kind)} ({kind})"
            lines.append(f"{name:<26} {count.files:>6,} files {count.chunks:>8,} chunks")
        if not self.kinds:
            lines.append("nothing to embed")
        rest = [f"{self.unchanged:,} unchanged", f"{self.skipped:,} skipped"]
        if self.removed:
            rest.append(f"{self.removed:,} removed")
        lines.append("files: " + ", ".join(rest))
        if self.left_out or self.folders_left_out:
            reasons = [f"{reason}: {count:,}" for reason, count in sorted(self.left_out.items())]
            line = f"left out: {sum(self.left_out.values()):,} files (" + "; ".join(reasons) + ")"
            if self.folders_left_out:
                line += f", and {self.folders_left_out:,} folders whole (ignore files, --exclude)"
            lines.append(line)
        lines += [f"note: {note}" for note in self.notes]
        if self.kept_from_interrupted:
            lines.append(
                f"going on from an interrupted run: {self.kept_from_interrupted:,} chunks it embedded are kept"
            )
        return lines


@dataclass
class Estimate:
    """Embedding time of a run's chunks, from its first batches' measured rate."""

    chunks: int  # chunks to embed in all
    characters: int
    measured_chunks: int
    measured_characters: int
    measured_seconds: float

    @property
    def characters_per_s(self) -> float:
        return self.measured_characters / max(self.measured_seconds, 1e-9)

    @property
    def chunks_per_s(self) -> float:
        return self.measured_chunks / max(self.measured_seconds, 1e-9)

    @property
    def seconds(self) -> float:
        return self.characters / self.characters_per_s if self.measured_characters else 0.0

    def line(self) -> str:
        return (
            f"estimate: {self.chunks:,} chunks in about {duration(self.seconds)} on this machine "
            f"({self.chunks_per_s:.2f} chunks/s measured on the first {self.measured_chunks:,})"
        )

    def verdict(self, seconds: float, chunks: int) -> str | None:
        """What the summary says when the run took more than 2x longer or shorter than estimated."""
        expected = self.seconds * chunks / max(self.chunks, 1)  # an interrupted run did part of it
        if expected <= 0 or seconds <= 0 or chunks == 0:
            return None
        ratio = seconds / expected
        if 1 / ESTIMATE_TOLERANCE <= ratio <= ESTIMATE_TOLERANCE:
            return None
        direction = "longer" if ratio > 1 else "shorter"
        factor = ratio if ratio > 1 else 1 / ratio
        return (
            f"the estimate was off: embedding took {duration(seconds)}, {factor:.1f}x {direction} than the "
            f"{duration(expected)} estimated; measured {chunks / seconds:.2f} chunks/s against "
            f"{self.chunks_per_s:.2f} on the first batches"
            + (" (the machine was busier, or later files are denser)" if ratio > 1 else "")
        )


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
