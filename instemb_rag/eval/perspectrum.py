"""PERSPECTRUM claims for the ``perspectrum-stance`` task (steering.py scores them).

The file (``<data root>/stance_args/perspectrum.jsonl``) holds one row per (claim, perspective):
``claim_id``, ``claim``, ``split`` (train / dev / test, the data set's own split by claim),
``stance`` (SUPPORT / UNDERMINE) and ``perspective``.

Held out = the data set's own ``test`` split. Training reads only the ``train`` split, so no test
claim was read in training. PERSPECTRUM attaches one perspective to several claims, though, and
about a quarter of the test rows' perspectives also stand under a train claim: those are never
chosen, a test claim whose text a train claim repeats is left out, and a claim left without an
unread perspective of each stance cannot be scored. ``--exclude-seen`` (a training records file)
leaves out, on top, the claims and perspectives its records contain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .data import EvalDataError, read_jsonl
from .seen import normalise_text

PERSPECTRUM_FILE = "stance_args/perspectrum.jsonl"
SPLITS = ("train", "dev", "test")
# The data set's stance -> the label the shared stance scorer asks for (steering.py).
STANCE_LABELS = {"SUPPORT": "SUPPORTS", "UNDERMINE": "REFUTES"}
# ``--split`` of the steering tasks -> the data set's split scored.
SPLIT_SCORED = {"heldout": "test", "train": "train"}
# Worded as training never words it: training asks "Find arguments that support / undermine this
# claim." and "What speaks for / against this?".
EVAL_PHRASINGS = {
    "SUPPORTS": "Give me a perspective in favour of this position.",
    "REFUTES": "Give me a perspective that argues against this position.",
}


@dataclass(frozen=True)
class PerspectiveRow:
    claim_id: str
    claim: str
    split: str
    label: str  # SUPPORTS or REFUTES (STANCE_LABELS)
    perspective: str


def _text_field(row: dict, key: str, path: Path, line_number: int) -> str:
    value = row.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and key == "claim_id":
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise EvalDataError(f"{path}:{line_number}: field '{key}' must be a non-empty string, got {value!r}.")
    return value.strip()


def _choice_field(row: dict, key: str, allowed, path: Path, line_number: int) -> str:
    value = _text_field(row, key, path, line_number)
    if value not in allowed:
        raise EvalDataError(f"{path}:{line_number}: field '{key}' must be one of {', '.join(allowed)}, got {value!r}.")
    return value


def load_perspectrum(path: str | Path) -> list[PerspectiveRow]:
    """Every row, checked: each field present, split and stance from their closed sets, one claim
    text per claim id."""
    path = Path(path)
    rows: list[PerspectiveRow] = []
    claim_of: dict[str, str] = {}
    for line_number, row in read_jsonl(path):
        claim_id = _text_field(row, "claim_id", path, line_number)
        claim = _text_field(row, "claim", path, line_number)
        if claim_of.setdefault(claim_id, claim) != claim:
            raise EvalDataError(
                f"{path}:{line_number}: claim_id {claim_id} names two claims ({claim_of[claim_id]!r} and {claim!r})."
            )
        stance = _choice_field(row, "stance", tuple(STANCE_LABELS), path, line_number)
        rows.append(
            PerspectiveRow(
                claim_id,
                claim,
                _choice_field(row, "split", SPLITS, path, line_number),
                STANCE_LABELS[stance],
                _text_field(row, "perspective", path, line_number),
            )
        )
    if not rows:
        raise EvalDataError(f"{path} holds no PERSPECTRUM rows.")
    return rows


def perspectrum_claims(
    path: str | Path, split: str, seen=None
) -> tuple[dict[str, dict[str, list[str]]], dict[str, str], list[str]]:
    """The scored split's claims: claim id -> label -> perspectives nobody read in training, claim
    id -> claim, and notes on what was left out. ``split``: heldout (the data set's test split)
    or train (a fit diagnostic: nothing is left out)."""
    if split not in SPLIT_SCORED:
        raise EvalDataError(f"Unknown split '{split}' for PERSPECTRUM: use one of {', '.join(SPLIT_SCORED)}.")
    rows = load_perspectrum(path)
    scored = [row for row in rows if row.split == SPLIT_SCORED[split]]
    read: set[str] = set()
    if split == "heldout":
        read = {normalise_text(text) for row in rows if row.split == "train" for text in (row.claim, row.perspective)}

    def unread(text: str) -> bool:
        return normalise_text(text) not in read and (seen is None or text not in seen)

    by_claim: dict[str, dict[str, list[str]]] = {}
    texts: dict[str, str] = {}
    dropped_claims = {row.claim_id for row in scored if not unread(row.claim)}
    dropped_perspectives = 0
    for row in scored:
        if row.claim_id in dropped_claims:
            continue
        if not unread(row.perspective):
            dropped_perspectives += 1
            continue
        texts[row.claim_id] = row.claim
        sentences = by_claim.setdefault(row.claim_id, {}).setdefault(row.label, [])
        if row.perspective not in sentences:
            sentences.append(row.perspective)
    sources = (["the train split"] if split == "heldout" else []) + ([seen.path] if seen is not None else [])
    source = " or ".join(sources)
    notes = [
        f"PERSPECTRUM {SPLIT_SCORED[split]} split: {len(dropped_claims)} claims and {dropped_perspectives} "
        f"perspectives left out (their text occurs in {source})"
    ]
    return by_claim, texts, notes if (dropped_claims or dropped_perspectives) else []
