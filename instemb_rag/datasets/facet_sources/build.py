"""`instemb-rag build-facet-groups`: facet groups from ../shared/data's general-domain sets.

Three files, all in the facet-groups format (instemb_rag/datasets/facet_groups.py):
- ``train.jsonl``: the training sources' subjects, less the held-out ones;
- ``dev_subjects.jsonl``: ``dev_fraction`` of each training source's subjects (whole subjects,
  chosen by a hash of source and subject, so a rebuild with more data keeps them out; subjects
  that share a ``holdout_key``, one debate topic or news story, fall on one side together);
- ``dev_<source>.jsonl``: one whole source no training group reads (default the Factbook: a
  domain, countries, that no training source covers), capped at ``max_dev_groups``.
Training groups that name a subject of the hand-written dev groups (eval_sets/) are dropped, as
build-distill-texts does for its items.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...atomic import write_text_atomically
from ...errors import InstEmbError
from ..facet_groups import DEV_GROUPS, leaked_subjects, load_facet_groups
from ..registry import FACET_SOURCES
from .drafts import MAX_ASPECTS, SubjectDraft
from .wording import instruction, subject_query

DEFAULT_HELDOUT_SOURCE = "factbook"
Log = Callable[[str], None]


@dataclass
class FacetBuildSummary:
    out: Path
    train: dict[str, int] = field(default_factory=dict)  # source -> groups
    dev_subjects: dict[str, int] = field(default_factory=dict)
    heldout_source: dict[str, int] = field(default_factory=dict)
    dropped_dev_names: int = 0
    skipped: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(self).items()}


def is_dev_subject(source: str, subject: str, dev_fraction: float) -> bool:
    """Stable across runs and data sizes: a hash of (source, subject), not a shuffle position."""
    digest = hashlib.sha256(f"{source}\x00{subject}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < dev_fraction


def to_group(draft: SubjectDraft, group_id: str, rng: random.Random) -> dict:
    """One facet group: up to MAX_ASPECTS of the subject's aspects (distinct passages), a neutral
    query, one instruction per passage in a drawn wording."""
    seen_texts: set[str] = set()
    distinct = {}
    for key, text in draft.passages.items():
        if text.lower() not in seen_texts:  # two aspects with one passage: either instruction is right
            seen_texts.add(text.lower())
            distinct[key] = text
    keys = sorted(distinct)
    if len(keys) > MAX_ASPECTS:
        keys = sorted(rng.sample(keys, MAX_ASPECTS))
    passages = [{"id": f"{group_id}-p{n + 1}", "facet": key, "text": distinct[key]} for n, key in enumerate(keys)]
    return {
        "group": group_id,
        "domain": draft.domain,
        "subject": f"{draft.source}:{draft.subject}",  # unique across sources; the query names it
        "query": subject_query(rng, draft.query_questions, draft.name, draft.bare_query_share),
        "kind": draft.kind,
        "passages": passages,
        "instructions": [{"facet": key, "text": instruction(draft.aspects[key], rng)} for key in keys],
        "source": draft.source,
    }


def _read(name: str, data_root: Path) -> list[SubjectDraft] | str:
    source = FACET_SOURCES[name]
    folder = data_root / source.folder
    if not (folder / source.file).is_file():
        return f"{folder / source.file} not found (development data under {data_root}; pass --data-root)"
    return source.read(folder)


def _names_dev_subject(group: dict, dev_groups) -> bool:
    texts = [group["query"], *(p["text"] for p in group["passages"]), *(i["text"] for i in group["instructions"])]
    return bool(leaked_subjects(texts, dev_groups))


def _write(path: Path, groups: list[dict]) -> None:
    write_text_atomically(path, "".join(json.dumps(group, ensure_ascii=False) + "\n" for group in groups))


def build_facet_groups(
    out: str | Path,
    data_root: str | Path,
    sources: list[str] | None = None,
    heldout_source: str | None = DEFAULT_HELDOUT_SOURCE,
    dev_fraction: float = 0.1,
    max_groups_per_source: int | None = None,
    max_dev_groups: int | None = 80,
    dev_groups_path: str | Path | None = DEV_GROUPS,
    seed: int = 0,
    log: Log = print,
) -> FacetBuildSummary:
    sources = list(sources or FACET_SOURCES)
    unknown = [name for name in [*sources, heldout_source] if name is not None and name not in FACET_SOURCES]
    if unknown:
        raise InstEmbError(f"Unknown facet source(s) {unknown}; choose from {list(FACET_SOURCES)}.")
    if not 0 <= dev_fraction < 1:
        raise InstEmbError(f"dev_fraction must be in [0, 1); got {dev_fraction}.")
    out, data_root = Path(out), Path(data_root)
    summary = FacetBuildSummary(out)
    dev_groups = []
    if dev_groups_path and Path(dev_groups_path).is_file():
        dev_groups = load_facet_groups(dev_groups_path)
    train, dev = [], []
    for name in [s for s in sources if s != heldout_source]:
        drafts = _read(name, data_root)
        if isinstance(drafts, str):
            summary.skipped[name] = drafts
            log(f"skipped {name}: {drafts}")
            continue
        rng = random.Random(f"{seed}:{name}")
        rng.shuffle(drafts)
        source_train, source_dev = [], []
        for position, draft in enumerate(drafts):
            group = to_group(draft, f"{name}-{position:05d}", rng)
            if is_dev_subject(name, draft.holdout_key or draft.subject, dev_fraction):
                source_dev.append(group)
            elif _names_dev_subject(group, dev_groups):
                summary.dropped_dev_names += 1
            else:
                source_train.append(group)
        source_train = source_train[:max_groups_per_source] if max_groups_per_source else source_train
        summary.train[name], summary.dev_subjects[name] = len(source_train), len(source_dev)
        train += source_train
        dev += source_dev
    if not train:
        raise InstEmbError(f"No training groups built: every source was skipped ({summary.skipped}).")
    out.mkdir(parents=True, exist_ok=True)
    random.Random(seed).shuffle(train)
    _write(out / "train.jsonl", train)
    if dev:
        _write(out / "dev_subjects.jsonl", dev)
    if heldout_source is not None:
        drafts = _read(heldout_source, data_root)
        if isinstance(drafts, str):
            summary.skipped[heldout_source] = drafts
            log(f"skipped held-out source {heldout_source}: {drafts}")
        else:
            rng = random.Random(f"{seed}:{heldout_source}")
            rng.shuffle(drafts)
            held = [to_group(d, f"{heldout_source}-{n:05d}", rng) for n, d in enumerate(drafts[:max_dev_groups])]
            summary.heldout_source[heldout_source] = len(held)
            _write(out / f"dev_{heldout_source}.jsonl", held)
    for written in out.glob("*.jsonl"):
        load_facet_groups(written)  # every file passes the format's own checks
    write_text_atomically(out / "summary.json", json.dumps(summary.as_json(), indent=2) + "\n")
    return summary
