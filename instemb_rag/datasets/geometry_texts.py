"""Build the texts a geometry-distillation run embeds: one JSON-lines file of queries and passages.

    {"id": "msmarco:q320792", "role": "query", "text": "...", "instruction": "..." | null,
     "group": "..." | null, "positive": "msmarco:p7067677" | null, "source": "msmarco"}

Distillation needs no labels, only texts the teacher and the student both embed: passages from
every development set (distill_sources.py) and the hand-written facet groups
(research/data/facet_groups_train.jsonl), queries under general instruction templates
(instruction_templates.py) or, where the data knows the facet or stance, under an instruction
naming it. ``group`` and ``positive`` carry what labels there are, for in-group hard negatives.

What is left out, and why:
- every group the training builders hold out (builders.build_set with the evaluation's seed and
  fraction, so the MedQuAD foci, Climate-FEVER claims, SciFact claims and NLI premises the dev
  figures score are never read), and any text equal to a held-out text; STS-B test sentences;
- every item whose text or instruction names a subject of the dev facet groups
  (eval_sets/facet_groups_dev.jsonl, case-insensitive substring);
- repeated (text, instruction) pairs: the first is kept, and a repeated passage's queries point
  to the kept one.

A cap keeps whole units (a passage with its questions, one subject's group) together in seeded
order, spread over the sources as evenly as their sizes allow, with ``query_share`` of the items
queries; a query's positive passage is always kept with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..errors import InstEmbError
from ..jsonl import read_jsonl
from .embedding_items import EmbeddingItem, write_items
from .facet_groups import DEV_GROUPS, facet_group_items, load_facet_groups
from .geometry_sources import HeldOut, ReadContext, normalise
from .registry import ITEM_SOURCES

GROUPS_SOURCE = "facet_groups"
SOURCE_NAMES: tuple[str, ...] = (*ITEM_SOURCES, GROUPS_SOURCE)
# Sets whose record instruction is the set's own question (a text to hold out), not a template.
QUESTION_SETS = frozenset({"msmarco_qa", "race", "covid_qa", "pubmedqa", "condaqa"})
DEFAULT_QUERY_SHARE = 0.5

Log = Callable[[str], None]


@dataclass
class SourceCounts:
    read: int = 0
    heldout: int = 0  # units (articles, foci, claims) or texts left out as held-out
    dev_subject: int = 0
    duplicates: int = 0
    queries: int = 0
    passages: int = 0
    with_positive: int = 0


@dataclass
class BuildSummary:
    path: Path
    counts: dict[str, SourceCounts] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # source -> why

    @property
    def total(self) -> int:
        return sum(c.queries + c.passages for c in self.counts.values())

    def table(self) -> str:
        header = f"{'source':<14}{'read':>8}{'held-out':>10}{'dev-subj':>10}{'dupes':>8}{'queries':>9}{'(pos)':>8}{'passages':>10}"
        rows = [header]
        for name, c in self.counts.items():
            rows.append(
                f"{name:<14}{c.read:>8}{c.heldout:>10}{c.dev_subject:>10}{c.duplicates:>8}"
                f"{c.queries:>9}{c.with_positive:>8}{c.passages:>10}"
            )
        queries = sum(c.queries for c in self.counts.values())
        rows.append(f"{'total':<14}{'':>44}{queries:>9}{'':>8}{self.total - queries:>10}")
        rows += [f"skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(rows)


# ---------------------------------------------------------------------------- what is left out
def builders_heldout(data_root: Path, sources: list[str], log: Log) -> HeldOut:
    """The texts and group keys of the builders' held-out split, with the seed and fraction
    the evaluation scores (eval/steering.py), for the builder sets behind ``sources``."""
    from .builders import HELD_OUT_FRACTION, HELD_OUT_SEED, build_set

    heldout = HeldOut()
    names = dict.fromkeys(
        name for source in sources for name in (ITEM_SOURCES[source].splits if source in ITEM_SOURCES else ())
    )
    for name in names:
        try:
            _, records = build_set(name, data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
        except InstEmbError as error:
            log(f"held-out split of {name} not applied (its data is missing): {error}")
            continue
        for record in records:
            heldout.texts.update({normalise(record.text), normalise(record.output)})
            if name in QUESTION_SETS and record.instruction:
                heldout.texts.add(normalise(record.instruction))
            if record.group:
                heldout.groups.add(record.group)
    stsb_test = data_root / "stsb" / "test.jsonl"
    if stsb_test.is_file():  # the STS-B evaluation
        for _, row in read_jsonl(stsb_test):
            heldout.texts.update({normalise(row["sentence1"]), normalise(row["sentence2"])})
    return heldout


def dev_subjects(path: Path | None, log: Log) -> list[str]:
    """The subjects of the dev facet groups (lower-cased); none, with a warning, where the file is absent."""
    if path is None:
        return []
    if not Path(path).is_file():
        log(f"WARNING: dev groups {path} not found: no item is checked against the dev subjects.")
        return []
    return [group.subject.strip().lower() for group in load_facet_groups(path)]


def names_a_subject(item: EmbeddingItem, subjects: list[str]) -> bool:
    text = f"{item.text}\n{item.instruction or ''}".lower()
    return any(subject in text for subject in subjects)


def _without_dangling_positives(items: list[EmbeddingItem]) -> list[EmbeddingItem]:
    """A query whose positive passage was left out keeps its text, with no positive."""
    passages = {item.id for item in items if item.role == "passage"}
    return [
        item if item.positive is None or item.positive in passages else replace(item, positive=None) for item in items
    ]


def deduplicate(items: list[EmbeddingItem], counts: dict[str, SourceCounts]) -> list[EmbeddingItem]:
    """The first of each (text, instruction), case and spacing ignored; positives re-pointed."""
    kept_id: dict[tuple[str, str], str] = {}
    moved: dict[str, str] = {}
    kept = []
    for item in items:
        key = (normalise(item.text), normalise(item.instruction or ""))
        if key in kept_id:
            counts[item.source].duplicates += 1
            if item.role == "passage":
                moved[item.id] = kept_id[key]
            continue
        kept_id[key] = item.id
        kept.append(item)
    return [replace(i, positive=moved[i.positive]) if i.positive in moved else i for i in kept]


# ---------------------------------------------------------------------------- caps
def water_fill(available: dict[str, int], budget: int) -> dict[str, int]:
    """Shares of ``budget`` as even as ``available`` allows: a source short of its share gives
    the rest to the others."""
    shares, remaining = {}, max(0, budget)
    order = sorted(available, key=lambda name: (available[name], name))
    for position, name in enumerate(order):
        shares[name] = min(available[name], remaining // (len(order) - position))
        remaining -= shares[name]
    return shares


def _in_unit_order(items: list[EmbeddingItem], source: str, seed: int) -> list[EmbeddingItem]:
    units = list(dict.fromkeys(item.unit for item in items))
    random.Random(f"{seed}:{source}").shuffle(units)
    rank = {unit: position for position, unit in enumerate(units)}
    return sorted(items, key=lambda item: rank[item.unit])  # stable: file order within a unit


def select(
    by_source: dict[str, list[EmbeddingItem]],
    max_items: int | None,
    max_per_source: int | None,
    query_share: float,
    seed: int,
) -> dict[str, list[EmbeddingItem]]:
    """Queries first (``query_share`` of ``max_items``, spread by water_fill), then their
    positive passages, then the other passages to fill the cap. ``max_per_source`` limits the
    queries and the passages of one source each."""
    ordered = {name: _in_unit_order(items, name, seed) for name, items in by_source.items()}
    queries = {name: [i for i in items if i.role == "query"] for name, items in ordered.items()}
    passages = {name: [i for i in items if i.role == "passage"] for name, items in ordered.items()}

    def limited(pool: dict[str, list[EmbeddingItem]]) -> dict[str, int]:
        return {name: min(len(items), max_per_source or len(items)) for name, items in pool.items()}

    query_room = limited(queries)
    if max_items is not None:
        query_room = water_fill(query_room, round(max_items * query_share))
    chosen = {name: queries[name][: query_room[name]] for name in ordered}
    required = {item.positive for items in chosen.values() for item in items if item.positive}
    needed = {name: [p for p in passages[name] if p.id in required] for name in ordered}
    passage_room = limited(passages)
    if max_items is not None:
        used = sum(len(items) for items in chosen.values()) + sum(len(items) for items in needed.values())
        spare = {name: max(0, passage_room[name] - len(needed[name])) for name in ordered}
        passage_room = {name: len(needed[name]) + share for name, share in water_fill(spare, max_items - used).items()}
    for name in ordered:
        others = [p for p in passages[name] if p.id not in required]
        chosen[name] += needed[name] + others[: max(0, passage_room[name] - len(needed[name]))]
    return chosen


# ---------------------------------------------------------------------------- the build
def _read_source(name: str, data_root: Path, groups_path: Path | None, ctx: ReadContext):
    """(items, held-out count), or the reason the source is skipped."""
    if name == GROUPS_SOURCE:
        if groups_path is None:
            return "no facet groups given (the hand-written training groups: pass --groups FILE)"
        if not Path(groups_path).is_file():
            return f"{groups_path} not found (the hand-written training groups; pass --groups)"
        return facet_group_items(load_facet_groups(groups_path)), 0
    source = ITEM_SOURCES[name]
    folder = data_root / source.folder
    missing = [str(folder / file) for file in source.files if not (folder / file).is_file()]
    if missing:
        return f"{', '.join(missing)} not found (development data under {data_root}; pass --data-root)"
    return source.read(folder, ctx)


def build_geometry_texts(
    out: str | Path,
    data_root: str | Path,
    sources: list[str] | None = None,
    groups_path: str | Path | None = None,
    dev_groups_path: str | Path | None = DEV_GROUPS,
    max_items: int | None = None,
    max_per_source: int | None = None,
    query_share: float = DEFAULT_QUERY_SHARE,
    seed: int = 0,
    log: Log = print,
) -> BuildSummary:
    """Read, filter, de-duplicate, cap and write the distillation texts; returns the counts."""
    sources = list(sources or SOURCE_NAMES)
    unknown = [name for name in sources if name not in SOURCE_NAMES]
    if unknown:
        raise InstEmbError(f"Unknown source(s) {unknown}; choose from {list(SOURCE_NAMES)}.")
    if not 0 < query_share < 1:
        raise InstEmbError(f"query_share must be between 0 and 1 (exclusive); got {query_share}.")
    data_root = Path(data_root)
    summary = BuildSummary(Path(out))
    ctx = ReadContext(builders_heldout(data_root, sources, log), seed)
    subjects = dev_subjects(Path(dev_groups_path) if dev_groups_path else None, log)
    everything: list[EmbeddingItem] = []
    for name in sources:
        result = _read_source(name, data_root, Path(groups_path) if groups_path else None, ctx)
        if isinstance(result, str):
            summary.skipped[name] = result
            log(f"skipped {name}: {result}")
            continue
        items, held = result
        counts = summary.counts[name] = SourceCounts(read=len(items), heldout=held)
        kept = [item for item in items if not ctx.heldout.has_text(item.text)]
        counts.heldout += len(items) - len(kept)
        clean = [item for item in kept if not names_a_subject(item, subjects)]
        counts.dev_subject = len(kept) - len(clean)
        everything += clean
    everything = deduplicate(_without_dangling_positives(everything), summary.counts)
    by_source = {name: [item for item in everything if item.source == name] for name in summary.counts}
    chosen = select(by_source, max_items, max_per_source, query_share, seed)
    for name, items in chosen.items():
        counts = summary.counts[name]
        counts.queries = sum(item.role == "query" for item in items)
        counts.passages = len(items) - counts.queries
        counts.with_positive = sum(item.positive is not None for item in items)
    written = [item for name in chosen for item in chosen[name]]
    random.Random(seed).shuffle(written)  # any prefix of the file is a fair sample
    write_items(summary.path, written)
    dropped = sum(c.dev_subject for c in summary.counts.values())
    log(f"{dropped} items dropped: they name one of the {len(subjects)} dev subjects")
    return summary
