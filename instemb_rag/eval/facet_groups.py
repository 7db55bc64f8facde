"""Facet groups: does the instruction decide what comes back, on general subjects?

A facet group is one subject (a tent, a shrine, a chess opening ...) with a neutral query that
names no facet, three or four passages that each answer one facet of that subject (price, setup,
history; or opposite stances: praise and complaints), and one instruction per passage asking
for its facet. Every passage shares the query's topic, so only the instruction can pick the
right one. The dev set lives in ``eval_sets/facet_groups_dev.jsonl`` at the checkout's root
(eval_sets/README.md: its rules; no training record may read its subjects). The file format, its
dataclasses and loader are instemb_rag/datasets/facet_groups.py's (training reads the same format).

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

from ..datasets import facet_groups as groups_format
from ..datasets.facet_groups import DEV_GROUPS, FacetGroup
from .bootstrap import clustered_interval
from .data import EvalDataError

ASK_METRICS = ("first_in_pool", "first_in_group")  # one item per instruction
GROUP_METRICS = ("all_right", "distinct_top")  # one item per group
NORMALISED_TOLERANCE = 1e-3

EmbedQueries = Callable[[list[str], list[str]], np.ndarray]
EmbedPassages = Callable[[list[str]], np.ndarray]


def resolve_groups_path(path: str | Path | None = None) -> Path:
    """The groups file to score: ``path``, else the dev set of this checkout; absent is an error
    that says where the dev set lives (the wheel does not carry it)."""
    chosen = Path(path).expanduser() if path is not None else DEV_GROUPS
    if not chosen.is_file():
        where = "" if path is not None else " (the dev set ships in the checkout's eval_sets/ folder, not in the wheel)"
        raise EvalDataError(f"facet groups file {chosen} does not exist{where}; pass --groups FILE.")
    return chosen


def load_facet_groups(path: str | Path) -> list[FacetGroup]:
    """The groups of a facet-groups file (the format's loader, instemb_rag/datasets/facet_groups.py),
    its errors raised as EvalDataError like every evaluation file's."""
    return groups_format.load_facet_groups(path, EvalDataError)


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
