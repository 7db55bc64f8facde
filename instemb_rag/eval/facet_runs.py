"""Run InstEmb encoders, BM25 and sentence-encoder teachers through the one facet-groups harness
(facet_groups.py), and compare the first of them with each other by paired bootstrap.

Each embedder becomes a :class:`Ranker`: a label, an identity for the results file, and a
function from the groups to a score matrix [asks, pool passages]. Dense embedders go through
``dense_scores`` with their two callables; BM25 scores the query with the instruction pasted
before it, as the teachers read it (``teacher_text``), so every baseline sees the same words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..datasets.facet_groups import FacetGroup, checkout_root
from ..encoder.protocol import Encoder
from ..extras import require
from .bootstrap import paired_gain
from .facet_groups import ASK_METRICS, GROUP_METRICS, FacetGroupScores, PoolLayout, dense_scores, score_matrix
from .results import TaskResult, encoder_description

TASK_NAME = "facet-groups"
MAIN_METRIC = "first_in_group"
BM25_STOPWORDS = "en"


@dataclass(frozen=True)
class Ranker:
    label: str
    identity: dict  # TaskResult.encoder: label, fingerprint, base model, ...
    scores: Callable[[Sequence[FacetGroup]], np.ndarray]  # groups -> [asks, pool passages]


def instemb_ranker(
    encoder: Encoder,
    label: str | None = None,
    batch_size: int = 16,
    show_progress: bool = False,
    hybrid=None,
    rerank=None,
) -> Ranker:
    """An InstEmb encoder: the query under its instruction, passages with no instruction; with
    ``hybrid`` (eval/hybrid.py HybridSettings) its scores fused with the full-text ranking; with
    ``rerank`` (a Reranker) each ask's top passages re-scored by the reader (reranked.py)."""
    if rerank is not None:
        from .reranked import rerank_description, reranked_matrix

        plain = instemb_ranker(encoder, label, batch_size, show_progress, hybrid)
        identity = {**plain.identity, **rerank_description(rerank)}
        identity["label"] = f"{plain.label} {identity.pop('label_suffix')}"

        def reread(groups):
            layout = PoolLayout.of(groups)
            return reranked_matrix(
                rerank, plain.scores(groups), layout.passage_texts, layout.queries, layout.instructions
            )

        return Ranker(identity["label"], identity, reread)

    def embed_queries(queries, instructions):
        return encoder.encode_queries(queries, instructions, batch_size=batch_size, show_progress=show_progress)

    def embed_passages(texts):
        return encoder.encode_documents(texts, batch_size=batch_size, show_progress=show_progress)

    identity = encoder_description(encoder, label)
    if hybrid is None:
        return Ranker(identity["label"], identity, lambda groups: dense_scores(groups, embed_queries, embed_passages))
    return hybrid_rankers(identity, lambda groups: dense_scores(groups, embed_queries, embed_passages), [hybrid])[0]


def hybrid_rankers(identity: dict, dense: Callable[[Sequence[FacetGroup]], np.ndarray], settings: list) -> list[Ranker]:
    """One ranker per hybrid setting (eval/hybrid.py) over one embedder's dense scores, which are
    computed once for all of them (the last groups asked are remembered)."""
    from .hybrid import hybrid_scores

    remembered: dict[tuple, np.ndarray] = {}

    def dense_once(groups) -> np.ndarray:
        key = tuple(group.group for group in groups)
        if key not in remembered:
            remembered.clear()
            remembered[key] = dense(groups)
        return remembered[key]

    def ranker(setting) -> Ranker:
        if setting is None:
            return Ranker(identity["label"], identity, dense_once)
        label = f"{identity['label']} + {setting.label()}"

        def fused(groups):
            layout = PoolLayout.of(groups)
            return hybrid_scores(setting, dense_once(groups), layout.passage_texts, layout.queries, layout.instructions)

        return Ranker(label, {**identity, "label": label, "hybrid": setting.describe()}, fused)

    return [ranker(setting) for setting in settings]


def teacher_ranker(name_or_path: str, device: str = "cpu", batch_size: int = 32, show_progress: bool = False) -> Ranker:
    """A sentence-encoder teacher (installed by name, or a local folder) reading
    ``instruction + " " + query``, and passages as they are."""
    from ..teachers import load_teacher, teacher_text

    teacher = load_teacher(name_or_path, device=device)

    def embed_queries(queries, instructions):
        texts = [teacher_text(query, instruction) for query, instruction in zip(queries, instructions)]
        return teacher.encode(texts, batch_size=batch_size, show_progress=show_progress)

    def embed_passages(texts):
        return teacher.encode(texts, batch_size=batch_size, show_progress=show_progress)

    label = f"teacher:{teacher.name}"
    identity = _identity(label, teacher.fingerprint, f"sentence-transformers {teacher.folder}")
    return Ranker(label, identity, lambda groups: dense_scores(groups, embed_queries, embed_passages))


def bm25_ranker() -> Ranker:
    """Okapi BM25 (bm25s, its default k1 = 1.5, b = 0.75; English stopwords, no stemming) over the
    pool of all passages; the query text is the instruction pasted before the query."""
    bm25s = require("bm25s", "eval", "The BM25 baseline")

    version = getattr(bm25s, "__version__", "unknown")
    identity = _identity("bm25", f"bm25s-{version}-stopwords-{BM25_STOPWORDS}", f"bm25s {version}")
    return Ranker("bm25", identity, bm25_scores)


def bm25_scores(groups: Sequence[FacetGroup]) -> np.ndarray:
    bm25s = require("bm25s", "eval", "The BM25 baseline")

    from ..teachers import teacher_text

    layout = PoolLayout.of(groups)
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(layout.passage_texts, stopwords=BM25_STOPWORDS, show_progress=False), show_progress=False
    )
    asked = [teacher_text(query, instruction) for query, instruction in zip(layout.queries, layout.instructions)]
    tokens = bm25s.tokenize(asked, stopwords=BM25_STOPWORDS, return_ids=False, show_progress=False)
    return np.stack([retriever.get_scores(words) for words in tokens])


def _identity(label: str, fingerprint: str, base_model: str) -> dict:
    return {
        "label": label,
        "fingerprint": fingerprint,
        "base_model": base_model,
        "pooling": None,
        "lookahead_length": None,
        "trained": False,
    }


@dataclass
class FacetGroupsRun:
    """The results of every ranker (TaskResult dicts, in ranker order), each ranker's split by
    domain and group kind with its per-item scores, and the first ranker against each other."""

    results: list[dict]
    details: list[dict]
    comparisons: list[dict]

    def to_dict(self) -> dict:
        return {"details": self.details, "comparisons": self.comparisons}


def run_facet_groups(
    groups: Sequence[FacetGroup], rankers: Sequence[Ranker], source: Path | str, seed: int = 0
) -> FacetGroupsRun:
    """Score every ranker on the same groups; compare the first with each of the others."""
    groups = list(groups)
    source = _shown_path(source)
    scored: list[tuple[Ranker, FacetGroupScores]] = []
    results, details = [], []
    for ranker in rankers:
        started = time.perf_counter()
        scores = score_matrix(groups, ranker.scores(groups))
        scored.append((ranker, scores))
        results.append(_task_result(ranker, scores, groups, source, seed, time.perf_counter() - started))
        details.append(_details(ranker, scores))
    first_ranker, first_scores = scored[0]
    comparisons = [
        _comparison(first_ranker.label, first_scores, ranker.label, scores, seed) for ranker, scores in scored[1:]
    ]
    return FacetGroupsRun(results, details, comparisons)


def _shown_path(source: Path | str) -> str:
    """The groups file as results name it: relative to the checkout when inside it, so saved
    results read the same on every machine."""
    path = Path(source).resolve()
    return str(path.relative_to(checkout_root())) if path.is_relative_to(checkout_root()) else str(source)


def _task_result(ranker: Ranker, scores: FacetGroupScores, groups, source, seed: int, seconds: float) -> dict:
    domains = sorted({group.domain for group in groups})
    passages = sum(len(group.passages) for group in groups)
    note = (
        f"{len(groups)} groups over {len(domains)} domains from {source}; the pool holds all {passages} passages "
        "(first_in_pool), each group's own passages decide first_in_group; intervals resample whole groups"
    )
    return TaskResult(
        task=TASK_NAME,
        kind="facet-groups",
        metrics=scores.metrics,
        main_metric=MAIN_METRIC,
        encoder=ranker.identity,
        counts={"queries": len(scores.ask_groups), "documents": passages, "groups": len(groups)},
        limits={"groups_file": str(source), "seed": seed},
        notes=[note],
        seconds=round(seconds, 2),
        intervals=scores.intervals(seed),
    ).to_dict()


def _details(ranker: Ranker, scores: FacetGroupScores) -> dict:
    """The splits the table shows, and the per-item scores (instruction metrics in file order, with
    each instruction's group; group metrics in the file's group order) that a paired comparison
    with another saved run needs (bootstrap.paired_gain)."""
    return {
        "label": ranker.label,
        "by_domain": scores.by_domain(),
        "by_kind": scores.by_kind(),
        "per_item": {name: [round(value, 4) for value in values] for name, values in scores.per_item.items()},
        "instruction_groups": scores.ask_groups,
    }


def _comparison(label: str, scores: FacetGroupScores, other_label: str, other: FacetGroupScores, seed: int) -> dict:
    """``label`` minus ``other_label`` on every metric, paired by item, resampling whole groups."""
    gains = {
        name: paired_gain(scores.per_item[name], other.per_item[name], scores.clusters(name), seed=seed)
        for name in (*ASK_METRICS, *GROUP_METRICS)
    }
    return {"candidate": label, "baseline": other_label, "gains": gains}
