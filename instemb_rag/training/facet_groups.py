"""Facet groups: one subject, a neutral query, several passages on different facets of it and one
instruction naming each facet (research/data/facet_groups_train.jsonl for training; the held-out
dev groups live in eval_sets/ and share no subject with it). One group a line:

    {"group": "t001", "domain": "products", "subject": "...", "query": "...",
     "passages": [{"id": "t001-p1", "facet": "comfort", "text": "..."}, ...],
     "instructions": [{"facet": "comfort", "text": "..."}, ...]}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InstEmbError
from ..jsonl import read_jsonl
from .distill_sources import DistillItem

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRAIN_GROUPS = PROJECT_ROOT / "research" / "data" / "facet_groups_train.jsonl"
DEV_GROUPS = PROJECT_ROOT / "eval_sets" / "facet_groups_dev.jsonl"


@dataclass(frozen=True)
class FacetGroup:
    group: str
    domain: str
    subject: str
    query: str
    passages: tuple[dict, ...]  # {"id", "facet", "text"}
    instructions: tuple[dict, ...]  # {"facet", "text"}


def _strings(raw: dict, names: tuple[str, ...], where: str) -> None:
    for name in names:
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise InstEmbError(f"{where}: field '{name}' must be a non-empty string.")


def _group(raw: dict, where: str) -> FacetGroup:
    _strings(raw, ("group", "domain", "subject", "query"), where)
    for name in ("passages", "instructions"):
        if not isinstance(raw.get(name), list) or len(raw[name]) < 2:
            raise InstEmbError(f"{where}: field '{name}' must be a list of at least two objects.")
    for position, passage in enumerate(raw["passages"]):
        _strings(passage, ("id", "facet", "text"), f"{where}: passages[{position}]")
    for position, instruction in enumerate(raw["instructions"]):
        _strings(instruction, ("facet", "text"), f"{where}: instructions[{position}]")
    facets = [passage["facet"] for passage in raw["passages"]]
    if len(set(facets)) != len(facets):
        raise InstEmbError(f"{where}: two passages share a facet; each passage answers its own facet.")
    unknown = [i["facet"] for i in raw["instructions"] if i["facet"] not in facets]
    if unknown:
        raise InstEmbError(f"{where}: instruction facet(s) {unknown} name no passage; passage facets are {facets}.")
    return FacetGroup(
        raw["group"], raw["domain"], raw["subject"], raw["query"], tuple(raw["passages"]), tuple(raw["instructions"])
    )


def read_facet_groups(path: str | Path) -> list[FacetGroup]:
    """The groups of a facet-groups file, checked (fields, one passage per facet, every
    instruction naming a passage's facet, unique group and passage ids); errors name file and line."""
    groups, group_ids, passage_ids = [], set(), set()
    for line, raw in read_jsonl(path):
        where = f"{path}:{line}"
        group = _group(raw, where)
        ids = [passage["id"] for passage in group.passages]
        if group.group in group_ids or passage_ids.intersection(ids):
            raise InstEmbError(f"{where}: group id '{group.group}' or one of its passage ids is used twice.")
        group_ids.add(group.group)
        passage_ids.update(ids)
        groups.append(group)
    return groups


def facet_group_items(groups: list[FacetGroup], source: str = "facet_groups") -> list[DistillItem]:
    """Each group's passages; its query under each instruction (positive: that facet's passage);
    and its query alone (no positive: every passage answers it a little)."""
    items = []
    for group in groups:
        passage_of = {passage["facet"]: f"{source}:{passage['id']}" for passage in group.passages}
        common = {"source": source, "group": group.group, "unit": group.group}
        items += [
            DistillItem(id=passage_of[p["facet"]], role="passage", text=p["text"].strip(), **common)
            for p in group.passages
        ]
        items.append(DistillItem(id=f"{source}:{group.group}-q", role="query", text=group.query.strip(), **common))
        for position, instruction in enumerate(group.instructions):
            items.append(
                DistillItem(
                    id=f"{source}:{group.group}-q{position + 1}",
                    role="query",
                    text=group.query.strip(),
                    instruction=instruction["text"].strip(),
                    positive=passage_of[instruction["facet"]],
                    **common,
                )
            )
    return items
