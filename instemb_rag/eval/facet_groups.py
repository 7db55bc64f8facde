"""Facet groups: does the instruction decide what comes back, on general subjects?

A facet group is one subject (a tent, a shrine, a chess opening ...) with a neutral query that
names no facet, three or four passages that each answer one facet of that subject (price, setup,
history; or opposite stances: praise and complaints), and one instruction per passage asking
for its facet. Every passage shares the query's topic, so only the instruction can pick the
right one. The dev set lives in ``eval_sets/facet_groups_dev.jsonl`` at the checkout's root
(eval_sets/README.md: its rules; no training record may read its subjects).

Any embedder is scored through the same harness: two callables, ``embed_queries(queries,
instructions)`` and ``embed_passages(texts)`` returning L2-normalised rows (``score_embedder``),
or a score matrix from a non-dense ranker such as BM25 (``score_matrix``). Metrics:

- ``first_in_pool``: the asked passage ranks first among all passages of all groups;
- ``first_in_group``: it ranks first among its own group's passages (ties count as misses);
- ``all_right``: per group, every instruction's passage is first in its group;
- ``distinct_top``: per group, the share of instruction pairs whose top passages in the group
  differ (an embedder that returns the same passage whatever the instruction scores 0);
- per-domain ``first_in_group`` and per-kind (aspect / stance groups) figures.

Per-item scores go back with the figures; intervals resample whole groups (bootstrap.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from .bootstrap import clustered_interval
from .data import EvalDataError, read_jsonl

DEV_SET_RELATIVE = Path("eval_sets") / "facet_groups_dev.jsonl"
GROUP_KINDS = ("aspect", "stance")
ASK_METRICS = ("first_in_pool", "first_in_group")  # one item per instruction
GROUP_METRICS = ("all_right", "distinct_top")  # one item per group
NORMALISED_TOLERANCE = 1e-3

EmbedQueries = Callable[[list[str], list[str]], np.ndarray]
EmbedPassages = Callable[[list[str]], np.ndarray]


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


def default_groups_path() -> Path:
    return checkout_root() / DEV_SET_RELATIVE


def resolve_groups_path(path: str | Path | None = None) -> Path:
    """The groups file to score: ``path``, else the dev set of this checkout; absent is an error
    that says where the dev set lives (the wheel does not carry it)."""
    chosen = Path(path).expanduser() if path is not None else default_groups_path()
    if not chosen.is_file():
        where = "" if path is not None else " (the dev set ships in the checkout's eval_sets/ folder, not in the wheel)"
        raise EvalDataError(f"facet groups file {chosen} does not exist{where}; pass --groups FILE.")
    return chosen


# ---------------------------------------------------------------------------------------- loading
def _text(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EvalDataError(f"{where} must be a non-empty string, got {value!r}.")
    return value


def _objects(record: dict, key: str, where: str, minimum: int) -> list[dict]:
    values = record.get(key)
    if not isinstance(values, list) or len(values) < minimum:
        raise EvalDataError(f"{where} field '{key}' must be a list of at least {minimum} objects, got {values!r:.80}.")
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            raise EvalDataError(f"{where} field '{key}[{index}]' must be an object, got {type(value).__name__}.")
    return values


def _parse_group(record: dict, where: str) -> FacetGroup:
    fields = {key: _text(record.get(key), f"{where} field '{key}'") for key in ("group", "domain", "subject", "query")}
    kind = record.get("kind", "aspect")
    if kind not in GROUP_KINDS:
        raise EvalDataError(f"{where} field 'kind' must be one of {', '.join(GROUP_KINDS)}, got {kind!r}.")
    passages = tuple(
        FacetPassage(
            *(_text(item.get(key), f"{where} field 'passages[{index}].{key}'") for key in ("id", "facet", "text"))
        )
        for index, item in enumerate(_objects(record, "passages", where, 2))
    )
    instructions = tuple(
        FacetInstruction(
            *(_text(item.get(key), f"{where} field 'instructions[{index}].{key}'") for key in ("facet", "text"))
        )
        for index, item in enumerate(_objects(record, "instructions", where, 2))
    )
    _check_facets(passages, instructions, where)
    return FacetGroup(kind=kind, passages=passages, instructions=instructions, **fields)


def _check_facets(passages, instructions, where: str) -> None:
    """Each passage answers its own facet, and exactly one instruction asks for each."""
    facets = [passage.facet for passage in passages]
    repeated = sorted({facet for facet in facets if facets.count(facet) > 1})
    if repeated:
        raise EvalDataError(
            f"{where} two passages share the facet {repeated[0]!r}; each passage answers its own facet."
        )
    asked = [instruction.facet for instruction in instructions]
    unknown = [facet for facet in asked if facet not in facets]
    if unknown:
        raise EvalDataError(
            f"{where} field 'instructions' asks for facet {unknown[0]!r}, which no passage has (passages: {facets})."
        )
    if sorted(asked) != sorted(facets):
        missing = sorted(set(facets) - set(asked)) or sorted({f for f in asked if asked.count(f) > 1})
        raise EvalDataError(
            f"{where} field 'instructions' must hold exactly one instruction per passage facet; "
            f"check facet {missing[0]!r}."
        )


def load_facet_groups(path: str | Path) -> list[FacetGroup]:
    """Read and validate a facet-groups JSON-lines file; errors name the file, line and field."""
    path = Path(path)
    groups: list[FacetGroup] = []
    seen_groups: dict[str, int] = {}
    seen_passages: dict[str, int] = {}
    for line_number, record in read_jsonl(path):
        where = f"{path}:{line_number}:"
        group = _parse_group(record, where)
        if group.group in seen_groups:
            raise EvalDataError(f"{where} group id {group.group!r} repeats line {seen_groups[group.group]}.")
        seen_groups[group.group] = line_number
        for passage in group.passages:
            if passage.id in seen_passages:
                raise EvalDataError(f"{where} passage id {passage.id!r} repeats line {seen_passages[passage.id]}.")
            seen_passages[passage.id] = line_number
        groups.append(group)
    if not groups:
        raise EvalDataError(f"{path} holds no facet groups; each line must be one group object.")
    return groups


def leaked_subjects(texts, groups: Sequence[FacetGroup]) -> list[str]:
    """The dev subjects that occur (case-insensitively) in any of ``texts``, such as training
    records: eval_sets/README.md's rule is that none may."""
    subjects = {group.subject.lower(): group.subject for group in groups}
    found: set[str] = set()
    for text in texts:
        lowered = text.lower()
        found.update(original for lowered_subject, original in subjects.items() if lowered_subject in lowered)
    return sorted(found)


# ---------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class PoolLayout:
    """Every passage of every group in one pool, and one ask (query + instruction) per instruction."""

    passage_texts: list[str]
    queries: list[str]
    instructions: list[str]
    targets: np.ndarray  # pool index of each ask's passage
    ask_groups: list[str]  # group id of each ask
    group_spans: list[slice]  # pool indices of each group's passages, in group order
    ask_spans: list[slice]  # ask indices of each group, in group order

    @classmethod
    def of(cls, groups: Sequence[FacetGroup]) -> PoolLayout:
        passage_texts, queries, instructions, targets, ask_groups = [], [], [], [], []
        group_spans, ask_spans = [], []
        for group in groups:
            start, ask_start = len(passage_texts), len(queries)
            passage_texts.extend(passage.text for passage in group.passages)
            for instruction in group.instructions:
                queries.append(group.query)
                instructions.append(instruction.text)
                targets.append(start + group.target_of(instruction))
                ask_groups.append(group.group)
            group_spans.append(slice(start, len(passage_texts)))
            ask_spans.append(slice(ask_start, len(queries)))
        return cls(passage_texts, queries, instructions, np.array(targets), ask_groups, group_spans, ask_spans)


# ---------------------------------------------------------------------------------------- scoring
@dataclass
class FacetGroupScores:
    """Per-item results of one embedder on a list of groups (item order: the file's)."""

    groups: list[FacetGroup]
    per_item: dict[str, list[float]]  # ASK_METRICS per instruction, GROUP_METRICS per group
    ask_groups: list[str]
    top_in_group: list[int] = field(default_factory=list)  # per ask, the top passage's position in its group

    @property
    def metrics(self) -> dict[str, float]:
        figures = {name: float(np.mean(values)) for name, values in self.per_item.items()}
        figures["random_first_in_group"] = float(
            np.mean([1.0 / len(group.passages) for group in self.groups for _ in group.instructions])
        )
        return figures

    def clusters(self, metric: str) -> list[str]:
        """Group id of each item of ``metric``: the unit the bootstrap resamples."""
        return self.ask_groups if metric in ASK_METRICS else [group.group for group in self.groups]

    def intervals(self, seed: int = 0) -> dict[str, list[float]]:
        return {
            name: clustered_interval(values, self.clusters(name), seed=seed) for name, values in self.per_item.items()
        }

    def by_domain(self) -> dict[str, dict[str, float]]:
        """Per domain: first_in_group and how many instructions it rests on."""
        return self._split(lambda group: group.domain)

    def by_kind(self) -> dict[str, dict[str, float]]:
        """Per group kind (aspect / stance): every metric, and the counts."""
        return self._split(lambda group: group.kind, every_metric=True)

    def _split(self, key_of, every_metric: bool = False) -> dict[str, dict[str, float]]:
        key_by_group = {group.group: key_of(group) for group in self.groups}
        names = list(self.per_item) if every_metric else ["first_in_group"]
        split: dict[str, dict[str, float]] = {}
        for key in sorted(set(key_by_group.values())):
            row: dict[str, float] = {}
            for name in names:
                values = [v for v, g in zip(self.per_item[name], self.clusters(name)) if key_by_group[g] == key]
                row[name] = float(np.mean(values))
            row["instructions"] = sum(1 for g in self.ask_groups if key_by_group[g] == key)
            row["groups"] = sum(1 for value in key_by_group.values() if value == key)
            split[key] = row
        return split


def score_matrix(groups: Sequence[FacetGroup], scores: np.ndarray) -> FacetGroupScores:
    """Metrics from a score matrix [asks, pool passages] laid out as :class:`PoolLayout`."""
    groups = list(groups)
    layout = PoolLayout.of(groups)
    scores = np.asarray(scores, dtype=float)
    expected = (len(layout.queries), len(layout.passage_texts))
    if scores.shape != expected:
        raise ValueError(f"scores must be [asks, passages] = {expected}, got {scores.shape}")
    first_in_pool, first_in_group, top_in_group, all_right, distinct_top = [], [], [], [], []
    for span, asks in zip(layout.group_spans, layout.ask_spans):
        for ask in range(asks.start, asks.stop):
            target = int(layout.targets[ask])
            first_in_pool.append(_strictly_first(scores[ask], target))
            first_in_group.append(_strictly_first(scores[ask, span], target - span.start))
            top_in_group.append(int(np.argmax(scores[ask, span])))
        all_right.append(float(all(first_in_group[asks])))
        pairs = list(combinations(top_in_group[asks], 2))
        distinct_top.append(float(np.mean([first != second for first, second in pairs])))
    per_item = {
        "first_in_pool": first_in_pool,
        "first_in_group": first_in_group,
        "all_right": all_right,
        "distinct_top": distinct_top,
    }
    return FacetGroupScores(groups, per_item, layout.ask_groups, top_in_group)


def _strictly_first(row: np.ndarray, target: int) -> float:
    """1.0 when the target scores above every other entry (a tie is a miss: a ranker that scores
    every passage alike has not chosen)."""
    return float(row[target] > np.max(np.delete(row, target)))


def _checked_embeddings(matrix, rows: int, what: str) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise ValueError(f"{what} returned shape {matrix.shape}; expected [{rows}, dimension]")
    norms = np.linalg.norm(matrix, axis=1)
    if not np.allclose(norms, 1.0, atol=NORMALISED_TOLERANCE):
        raise ValueError(f"{what} must return L2-normalised rows; norms range {norms.min():.4f}-{norms.max():.4f}")
    return matrix


def dense_scores(
    groups: Sequence[FacetGroup], embed_queries: EmbedQueries, embed_passages: EmbedPassages
) -> np.ndarray:
    """Cosine scores [asks, pool passages] of a dense embedder given as two callables."""
    layout = PoolLayout.of(groups)
    passages = _checked_embeddings(embed_passages(layout.passage_texts), len(layout.passage_texts), "embed_passages")
    queries = _checked_embeddings(
        embed_queries(layout.queries, layout.instructions), len(layout.queries), "embed_queries"
    )
    if queries.shape[1] != passages.shape[1]:
        raise ValueError(f"query and passage embeddings differ in dimension: {queries.shape[1]} != {passages.shape[1]}")
    return queries @ passages.T


def score_embedder(
    groups: Sequence[FacetGroup], embed_queries: EmbedQueries, embed_passages: EmbedPassages
) -> FacetGroupScores:
    """Score a dense embedder: ``embed_queries(queries, instructions)`` and ``embed_passages(texts)``
    return L2-normalised rows; each ask ranks passages by cosine."""
    return score_matrix(groups, dense_scores(groups, embed_queries, embed_passages))
