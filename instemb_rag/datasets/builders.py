"""Records from the development sets: each registered set built, split by group, capped.

The sets themselves are registered in registry.py (RECORD_SETS), their builders live beside it
(qa_sets.py; contrast_sets.py for the instruction-contrast sets; generic_sets.py for race and
covid_qa). Each set keeps a seeded held-out slice. The split is by group (one passage, one claim)
so that no held-out text was seen in training under another question.
"""

from __future__ import annotations

import random
from pathlib import Path

from .. import paths
from ..errors import InstEmbError
from .grouped import GroupedRecord
from .records import TrainingRecord, write_records
from .registry import RECORD_SETS

# The split every dev figure scores (eval/steering.py) and distillation texts leave out
# (geometry_texts.py): data.heldout_fraction's default, with the sets' own overrides (RECORD_SETS).
HELD_OUT_SEED = 0
HELD_OUT_FRACTION = 0.1


def heldout_fraction_for(name: str, default: float) -> float:
    override = RECORD_SETS[name].heldout_fraction
    return default if override is None else override


def build_set(name: str, data_root: str | Path, heldout_fraction: float, seed: int):
    """(train, heldout) records of one set, split by group; the evaluation calls this too, so
    its held-out groups are exactly the ones training never read."""
    data_set = RECORD_SETS[name]
    folder = Path(data_root) / data_set.folder if data_set.folder else Path(data_root)
    return split_by_group(data_set.build(folder), heldout_fraction_for(name, heldout_fraction), seed)


def cap_by_group(records: list[TrainingRecord], limit: int, seed: int) -> list[TrainingRecord]:
    """At most ``limit`` records, taken as whole groups in seeded random order (a prefix of the
    builder's order would favour the alphabet's start and cut contrast groups in half)."""
    if len(records) <= limit:
        return records
    by_group: dict[str, list[TrainingRecord]] = {}
    for position, record in enumerate(records):
        by_group.setdefault(record.group or f"#{position}", []).append(record)
    keys = sorted(by_group)
    random.Random(seed).shuffle(keys)
    kept: list[TrainingRecord] = []
    for key in keys:
        if len(kept) >= limit:
            break
        kept += by_group[key][: limit - len(kept)]
    return kept


def split_by_group(
    grouped: list[GroupedRecord], heldout_fraction: float, seed: int
) -> tuple[list[TrainingRecord], list[TrainingRecord]]:
    """Seeded split: a group goes to held-out when its shuffled rank falls in the first slice."""
    groups = sorted({item.group for item in grouped})
    random.Random(seed).shuffle(groups)
    heldout_groups = set(groups[: round(len(groups) * heldout_fraction)])
    train = [item.record for item in grouped if item.group not in heldout_groups]
    heldout = [item.record for item in grouped if item.group in heldout_groups]
    return train, heldout


def build_records(
    data_root: str | Path | None = None,
    sets: list[str] | None = None,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    max_per_set: int | dict[str, int] | None = None,
) -> tuple[list[TrainingRecord], list[TrainingRecord]]:
    """Records of the chosen sets, split into (train, heldout); train is shuffled across sets."""
    data_root = Path(data_root) if data_root is not None else paths.data_root()
    if not data_root.is_dir():
        raise InstEmbError(
            f"Data folder {data_root.resolve()} not found. The builders need the development "
            "data ($INSTEMB_DATA_ROOT, else ../shared/data beside the checkout); pass data_root / --data-root."
        )
    sets = list(sets or RECORD_SETS)
    unknown = [name for name in sets if name not in RECORD_SETS]
    if unknown:
        raise InstEmbError(f"Unknown data set(s) {unknown}; choose from {sorted(RECORD_SETS)}.")
    if not 0 <= heldout_fraction < 1:
        raise InstEmbError(f"heldout_fraction must be in [0, 1); got {heldout_fraction}.")
    train: list[TrainingRecord] = []
    heldout: list[TrainingRecord] = []
    for name in sets:
        set_train, set_heldout = build_set(name, data_root, heldout_fraction, seed)
        limit = max_per_set.get(name) if isinstance(max_per_set, dict) else max_per_set
        if limit is not None:
            set_train = cap_by_group(set_train, limit, seed)
        train += set_train
        heldout += set_heldout
    random.Random(seed).shuffle(train)
    return train, heldout


def build_data_folder(
    out: str | Path,
    data_root: str | Path | None = None,
    sets: list[str] | None = None,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    max_per_set: int | dict[str, int] | None = None,
) -> dict[str, int]:
    """Write ``out/train.jsonl`` and ``out/heldout.jsonl``; returns the record counts."""
    train, heldout = build_records(data_root, sets, heldout_fraction, seed, max_per_set)
    out = Path(out)
    return {
        "train": write_records(out / "train.jsonl", train),
        "heldout": write_records(out / "heldout.jsonl", heldout),
    }
