"""The facet-groups format and its one loader (training and evaluation both read it from here).

A facet group is one subject (a tent, a shrine, a chess opening ...) with a neutral query that
names no facet, two or more passages that each answer one facet of that subject (price, setup,
history; or opposite stances: praise and complaints), and one instruction per passage asking for
its facet. One group a line:

    {"group": "t001", "domain": "products", "subject": "...", "query": "...", "kind": "aspect",
     "passages": [{"id": "t001-p1", "facet": "comfort", "text": "..."}, ...],
     "instructions": [{"facet": "comfort", "text": "..."}, ...]}

``kind`` is optional ("aspect" when absent; "stance" for praise / complaint groups). Two files of a
checkout share the format: research/data/facet_groups_train.jsonl (hand-written training groups,
``facet_group_items`` below turns them into embedding items; a file the user names, e.g.
``build-distill-texts --groups``) and eval_sets/facet_groups_dev.jsonl (the held-out dev set,
eval/facet_groups.py scores it; eval_sets/README.md: no training record may name its subjects,
``leaked_subjects`` checks that). Neither ships in the wheel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InstEmbError
from ..jsonl import read_jsonl
from .embedding_items import EmbeddingItem

GROUP_KINDS = ("aspect", "stance")
DEV_SET_RELATIVE = Path("eval_sets") / "facet_groups_dev.jsonl"


@dataclass(frozen=True)
class FacetPassage:
    id: str
    facet: str
    text: str


@dataclass(frozen=True)
class FacetInstruction:
    facet: str
    text: str


@dataclass(frozen=True)
class FacetGroup:
    group: str
    domain: str
    subject: str
    query: str
    kind: str
    passages: tuple[FacetPassage, ...]
    instructions: tuple[FacetInstruction, ...]

    def target_of(self, instruction: FacetInstruction) -> int:
        """Position, within this group, of the passage the instruction asks for."""
        return [passage.facet for passage in self.passages].index(instruction.facet)


def checkout_root() -> Path:
    """The folder holding instemb_rag/ (the repository root in a checkout)."""
    return Path(__file__).resolve().parents[2]


DEV_GROUPS = checkout_root() / DEV_SET_RELATIVE


# ---------------------------------------------------------------------------------------- loading
class _Reader:
    """Checks one file's records; every error names the file, the line and the field and is raised
    as ``error_type`` (evaluation passes its EvalDataError, as for jsonl.read_jsonl)."""

    def __init__(self, error_type: type[Exception]):
        self.error_type = error_type

    def text(self, value, where: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error_type(f"{where} must be a non-empty string, got {value!r}.")
        return value

    def objects(self, record: dict, key: str, where: str, minimum: int) -> list[dict]:
        values = record.get(key)
        if not isinstance(values, list) or len(values) < minimum:
            raise self.error_type(
                f"{where} field '{key}' must be a list of at least {minimum} objects, got {values!r:.80}."
            )
        for index, value in enumerate(values):
            if not isinstance(value, dict):
                raise self.error_type(f"{where} field '{key}[{index}]' must be an object, got {type(value).__name__}.")
        return values

    def group(self, record: dict, where: str) -> FacetGroup:
        names = ("group", "domain", "subject", "query")
        fields = {key: self.text(record.get(key), f"{where} field '{key}'") for key in names}
        kind = record.get("kind", "aspect")
        if kind not in GROUP_KINDS:
            raise self.error_type(f"{where} field 'kind' must be one of {', '.join(GROUP_KINDS)}, got {kind!r}.")
        passages = tuple(
            FacetPassage(
                *(self.text(item.get(key), f"{where} field 'passages[{i}].{key}'") for key in ("id", "facet", "text"))
            )
            for i, item in enumerate(self.objects(record, "passages", where, 2))
        )
        instructions = tuple(
            FacetInstruction(
                *(self.text(item.get(key), f"{where} field 'instructions[{i}].{key}'") for key in ("facet", "text"))
            )
            for i, item in enumerate(self.objects(record, "instructions", where, 2))
        )
        self.check_facets(passages, instructions, where)
        return FacetGroup(kind=kind, passages=passages, instructions=instructions, **fields)

    def check_facets(self, passages, instructions, where: str) -> None:
        """Each passage answers its own facet, and exactly one instruction asks for each."""
        facets = [passage.facet for passage in passages]
        repeated = sorted({facet for facet in facets if facets.count(facet) > 1})
        if repeated:
            raise self.error_type(
                f"{where} two passages share the facet {repeated[0]!r}; each passage answers its own facet."
            )
        asked = [instruction.facet for instruction in instructions]
        unknown = [facet for facet in asked if facet not in facets]
        if unknown:
            raise self.error_type(
                f"{where} field 'instructions' asks for facet {unknown[0]!r}, which no passage has (passages: {facets})."
            )
        if sorted(asked) != sorted(facets):
            missing = sorted(set(facets) - set(asked)) or sorted({f for f in asked if asked.count(f) > 1})
            raise self.error_type(
                f"{where} field 'instructions' must hold exactly one instruction per passage facet; "
                f"check facet {missing[0]!r}."
            )


def load_facet_groups(path: str | Path, error_type: type[Exception] = InstEmbError) -> list[FacetGroup]:
    """Read and validate a facet-groups JSON-lines file: the fields, one passage per facet, one
    instruction per passage facet, group and passage ids unique across the file, at least one group.
    Errors (``error_type``) name the file, line and field."""
    path = Path(path)
    reader = _Reader(error_type)
    groups: list[FacetGroup] = []
    seen_groups: dict[str, int] = {}
    seen_passages: dict[str, int] = {}
    for line_number, record in read_jsonl(path, error_type):
        where = f"{path}:{line_number}:"
        group = reader.group(record, where)
        if group.group in seen_groups:
            raise error_type(f"{where} group id {group.group!r} repeats line {seen_groups[group.group]}.")
        seen_groups[group.group] = line_number
        for passage in group.passages:
            if passage.id in seen_passages:
                raise error_type(f"{where} passage id {passage.id!r} repeats line {seen_passages[passage.id]}.")
            seen_passages[passage.id] = line_number
        groups.append(group)
    if not groups:
        raise error_type(f"{path} holds no facet groups; each line must be one group object.")
    return groups


def leaked_subjects(texts: Iterable[str], groups: Sequence[FacetGroup]) -> list[str]:
    """The subjects of ``groups`` that occur (case-insensitively) in any of ``texts``, such as
    training records and the dev groups: eval_sets/README.md's rule is that none may."""
    subjects = {group.subject.lower(): group.subject for group in groups}
    found: set[str] = set()
    for text in texts:
        lowered = text.lower()
        found.update(original for lowered_subject, original in subjects.items() if lowered_subject in lowered)
    return sorted(found)


def facet_group_items(groups: list[FacetGroup], source: str = "facet_groups") -> list[EmbeddingItem]:
    """Each group's passages; its query under each instruction (positive: that facet's passage);
    and its query alone (no positive: every passage answers it a little)."""
    items = []
    for group in groups:
        passage_of = {passage.facet: f"{source}:{passage.id}" for passage in group.passages}
        common = {"source": source, "group": group.group, "unit": group.group}
        items += [
            EmbeddingItem(id=passage_of[p.facet], role="passage", text=p.text.strip(), **common) for p in group.passages
        ]
        items.append(EmbeddingItem(id=f"{source}:{group.group}-q", role="query", text=group.query.strip(), **common))
        for position, instruction in enumerate(group.instructions):
            items.append(
                EmbeddingItem(
                    id=f"{source}:{group.group}-q{position + 1}",
                    role="query",
                    text=group.query.strip(),
                    instruction=instruction.text.strip(),
                    positive=passage_of[instruction.facet],
                    **common,
                )
            )
    return items
