"""Evaluation tasks and the runner behind ``evaluate(encoder, task_name, **limits)``.

Tasks
- ``scifact``: SciFact train claims -> 5,183 abstracts, nDCG@10 (BEIR folder ../shared/data/scifact).
- ``vaswani``: NPL/Vaswani physics abstracts, nDCG@10.
- ``scifact-stance``: the "SciFact stance p-MRR" task, built from ``scifact/stance.jsonl``.
  Each record is (claim, abstract, label) with ``instruction_match`` (e.g. "Find a study whose
  findings contradict this claim." for a CONTRADICT pair) and ``instruction_mismatch``. We embed
  the claim twice, once under each instruction, and rank the *whole SciFact abstract pool* (or a
  sub-sample that keeps every stance abstract). Under the matching instruction the abstract is
  what the user asked for; under the mismatching one it is not, which is exactly FollowIR's
  "relevant under the original instruction, not relevant under the altered one". So
  R_og = rank under the matching instruction, R_new = rank under the mismatching one, and p-MRR
  > 0 means the encoder pushes the abstract down when the instruction stops asking for it.
  Ranking against the full pool (rather than the single pair) keeps ranks meaningful: a change
  of similarity only counts when it moves the abstract past other abstracts. Pairwise accuracy is
  the direct comparison: sim(claim + matching instruction, abstract) > sim(claim + mismatching
  instruction, abstract).
- ``stsb``: STS Benchmark test split, Spearman correlation of cosine similarity with gold scores.
- ``medquad-facets``, ``climate-fever-stance``, ``perspectrum-stance`` and ``nli-stance``: instruction
  steering on held-out groups (steering.py): the same query under different instructions must rank
  different passages first.
- ``stance-pooled``: SciFact stance, Climate-FEVER, PERSPECTRUM and NLI stance items in one 1/0
  list with per-set and per-label splits (stance_pooled.py), the ship rule's pooled stance figure.
- ``facet-groups``: the held-out facet groups on general subjects (eval_sets/facet_groups_dev.jsonl in
  the checkout; facet_groups.py): the instructed passage first in its group and in the pool.
  ``instemb-rag eval facet-groups`` adds BM25, teachers and paired comparisons (facet_runs.py).
- any folder path in BEIR layout (corpus.jsonl, queries.jsonl with optional ``instruction``,
  qrels.tsv): retrieval metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..encoder.protocol import Encoder
from ..instructions import normalize_instruction
from . import metrics as metric_lib
from .bootstrap import bootstrap_interval, intervals_for
from .cache import EmbeddingCache, embed_corpus
from .data import EvalDataError, RetrievalData, load_beir, load_sts
from .hybrid import HybridSettings, hybrid_scores
from .reranked import rerank_description, reranked_matrix
from .results import TaskResult, encoder_description, item_clusters
from .sampling import sample_in_order, subsample_corpus
from .scifact_stance import run_scifact_stance
from .seen import SeenTexts
from .stance_pooled import run_stance_pooled
from .steering import run_climate_fever_stance, run_medquad_facets, run_nli_stance, run_perspectrum_stance

# Each takes (context, data root, max_queries) and returns metrics, counts, notes, per-item
# values and item ids.
STEERING_RUNS = {
    "medquad-facets": run_medquad_facets,
    "climate-fever-stance": run_climate_fever_stance,
    "perspectrum-stance": run_perspectrum_stance,
    "nli-stance": run_nli_stance,
    "stance-pooled": run_stance_pooled,
}
RUN_DEPTH = 100  # documents kept per query in the run handed to ranx


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str
    relative_path: str
    default_instruction: str | None
    main_metric: str
    description: str
    also_needs: tuple[str, ...] = ()  # further paths under the data root the task reads


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "scifact",
            "retrieval",
            "scifact",
            "Find a scientific study whose findings support or contradict this claim.",
            "ndcg@10",
            "SciFact train claims over 5,183 abstracts",
        ),
        TaskSpec(
            "scifact-stance",
            "paired-instruction",
            "scifact/stance.jsonl",
            None,
            "p-mrr",
            "SciFact stance: matching vs mismatching instruction",
        ),
        TaskSpec(
            "vaswani",
            "retrieval",
            "vaswani",
            "Find physics abstracts relevant to this search query.",
            "ndcg@10",
            "NPL/Vaswani physics abstracts",
        ),
        TaskSpec("stsb", "sts", "stsb/test.jsonl", None, "spearman", "STS Benchmark test"),
        TaskSpec(
            "medquad-facets",
            "steering",
            "medquad",
            None,
            "steering_accuracy",
            "MedQuAD held-out foci: the asked facet's passage above the focus's other facets",
        ),
        TaskSpec(
            "climate-fever-stance",
            "steering",
            "climate_fever",
            None,
            "pairwise_accuracy",
            "Climate-FEVER held-out claims: supporting vs refuting evidence under each instruction",
        ),
        TaskSpec(
            "perspectrum-stance",
            "steering",
            "stance_args/perspectrum.jsonl",
            None,
            "pairwise_accuracy",
            "PERSPECTRUM held-out (test split) claims: supporting vs undermining perspective under each instruction",
        ),
        TaskSpec(
            "nli-stance",
            "steering",
            "sick",
            None,
            "pairwise_accuracy",
            "NLI held-out premises as claims: entailed vs contradicting sentence under each instruction",
        ),
        TaskSpec(
            "stance-pooled",
            "steering",
            "stance_args/perspectrum.jsonl",
            None,
            "pairwise_accuracy",
            "SciFact, Climate-FEVER, PERSPECTRUM and NLI stance items pooled: the asked stance's passage above the other",
            also_needs=("scifact/stance.jsonl", "scifact/corpus.jsonl", "climate_fever", "sick"),
        ),
        TaskSpec(
            "facet-groups",
            "facet-groups",
            "eval_sets/facet_groups_dev.jsonl",
            None,
            "first_in_group",
            "Held-out facet groups on general subjects: the instructed passage first among its subject's passages",
        ),
    )
}


def default_data_root() -> Path:
    """The development data root: the one rule in paths.data_root ($INSTEMB_DATA_ROOT, the older
    $INSTEMB_EVAL_DATA, else ../shared/data beside the checkout)."""
    from ..paths import data_root

    return data_root()


def resolve_task(task_name: str, data_root: str | Path | None = None) -> tuple[TaskSpec, Path]:
    """A registered task name, or a path to a BEIR folder."""
    if task_name in TASKS:
        spec = TASKS[task_name]
        if spec.kind == "facet-groups":  # shipped with the checkout, not with the data sets
            from .facet_groups import resolve_groups_path

            return spec, resolve_groups_path()
        root = Path(data_root or default_data_root())
        for needed in (spec.relative_path, *spec.also_needs):
            if not (root / needed).exists():
                raise EvalDataError(
                    f"Task '{task_name}' needs {root / needed}, which is absent. Point --data-root "
                    "(or INSTEMB_DATA_ROOT) at the folder holding the evaluation sets."
                )
        return spec, root / spec.relative_path
    folder = Path(task_name).expanduser()
    if folder.is_dir():
        return TaskSpec(folder.name, "retrieval", str(folder), None, "ndcg@10", f"BEIR folder {folder}"), folder
    raise EvalDataError(
        f"Unknown task '{task_name}': use one of {', '.join(TASKS)} or a path to a BEIR folder "
        "(corpus.jsonl, queries.jsonl, qrels.tsv)."
    )


def evaluate(
    encoder: Encoder,
    task_name: str,
    max_queries: int | None = None,
    max_docs: int | None = None,
    seed: int = 0,
    data_root: str | Path | None = None,
    instruction: str | None = None,
    cache: EmbeddingCache | bool | None = True,
    batch_size: int = 16,
    show_progress: bool = False,
    label: str | None = None,
    exclude_seen: str | Path | SeenTexts | None = None,
    steering_split: str = "heldout",
    hybrid: HybridSettings | None = None,
    rerank=None,
) -> dict:
    """Evaluate an encoder on one task; returns a JSON-able dict (see :class:`TaskResult`).

    ``max_queries`` limits queries (stance records, STS pairs); ``max_docs`` limits the corpus to
    every judged document plus a seeded sample of the rest. ``instruction`` overrides the task's
    default query instruction ("" means none). ``cache=True`` uses INSTEMB_HOME's embedding cache.
    ``exclude_seen`` (a training records file) leaves out queries whose text the model read in
    training (retrieval and stance tasks; see seen.py) and, in ``medquad-facets``, the foci holding a
    passage a training record contains (MedQuAD repeats template passages across foci). ``steering_split="train"`` scores the
    steering tasks on their training groups (a fit diagnostic; see steering.py). ``facet-groups``
    scores every group of the checkout's dev set; the limits and the cache do not apply to it.
    ``hybrid`` scores the retrieval, stance and facet-groups tasks with the dense scores fused
    with the full-text ranking, as ``Index.search(..., hybrid=...)`` does (hybrid.py). ``rerank`` (a
    reader/reranker.py Reranker) re-scores each query's top hits with the reader, as
    ``Index.search(..., rerank=True)`` does (reranked.py).
    """
    spec, location = resolve_task(task_name, data_root)
    if spec.kind == "facet-groups":
        from .facet_groups import load_facet_groups
        from .facet_runs import instemb_ranker, run_facet_groups

        ranker = instemb_ranker(encoder, label, batch_size, show_progress, hybrid, rerank)
        return run_facet_groups(load_facet_groups(location), [ranker], location, seed).results[0]
    if cache is True:
        cache = EmbeddingCache()
    elif cache is False:
        cache = None
    query_instruction = spec.default_instruction if instruction is None else normalize_instruction(instruction)
    started = time.perf_counter()
    if exclude_seen is not None and not isinstance(exclude_seen, SeenTexts):
        exclude_seen = SeenTexts(exclude_seen)
    if hybrid is not None and spec.kind not in ("retrieval", "paired-instruction"):
        raise EvalDataError(
            f"--hybrid scores retrieval, stance and facet-groups tasks; {spec.name} ranks no documents."
        )
    context = _RunContext(encoder, cache, batch_size, show_progress, seed, exclude_seen, steering_split, hybrid, rerank)
    limits = {
        "max_queries": max_queries,
        "max_docs": max_docs,
        "seed": seed,
        "exclude_seen": exclude_seen.path if exclude_seen is not None else None,
    }
    if spec.kind == "steering":
        limits["split"] = steering_split
    per_item: dict[str, list[float]] = {}  # metric -> one value per item, in an order fixed by the data and limits
    item_ids: dict[str, list[str]] = {}  # metric -> the id of each of those items, where the task names them
    if spec.kind == "retrieval":
        data = load_beir(location, instruction=query_instruction, name=spec.name)
        metrics, counts, notes, from_cache, per_item = _run_retrieval(context, data, max_queries, max_docs)
    elif spec.kind == "paired-instruction":
        run = run_scifact_stance
        metrics, counts, notes, from_cache, per_item, item_ids = run(context, location, max_queries, max_docs)
    elif spec.kind == "steering":
        run = STEERING_RUNS[spec.name]
        root = Path(data_root or default_data_root())
        metrics, counts, notes, per_item, item_ids = run(context, root, max_queries)
        from_cache = False
    else:  # Spearman is not a mean over items: an interval, no per-item values to pair
        metrics, counts, notes, from_cache, intervals = _run_sts(context, location, max_queries, query_instruction)
    if per_item:
        intervals = intervals_for(per_item, seed, clusters=item_clusters(item_ids))
    description = encoder_description(encoder, label)
    if hybrid is not None:  # the ranker's identity, not a limit: `compare` pairs it with the dense run
        description = {
            **description,
            "label": f"{description['label']} + {hybrid.label()}",
            "hybrid": hybrid.describe(),
        }
    if rerank is not None:
        reader = rerank_description(rerank)
        description = {**description, **reader, "label": f"{description['label']} {reader.pop('label_suffix')}"}
        description.pop("label_suffix", None)
    result = TaskResult(
        task=spec.name,
        kind=spec.kind,
        metrics=metrics,
        main_metric=spec.main_metric,
        encoder=description,
        counts=counts,
        limits=limits,
        instruction=query_instruction,
        notes=notes,
        corpus_from_cache=from_cache,
        seconds=round(time.perf_counter() - started, 2),
        intervals=intervals,
        per_item={name: [round(float(value), 6) for value in values] for name, values in per_item.items()},
        item_ids=item_ids,
    )
    return result.to_dict()


@dataclass
class _RunContext:
    encoder: Encoder
    cache: EmbeddingCache | None
    batch_size: int
    show_progress: bool
    seed: int
    seen: SeenTexts | None = None
    steering_split: str = "heldout"
    hybrid: HybridSettings | None = None
    rerank: object = None  # reader/reranker.py Reranker

    def scores(self, queries: np.ndarray, documents: np.ndarray, texts: list[str], query_texts, instructions):
        """[queries, documents]: cosine (each row's top hits fused with the reader's score under
        ``rerank``), or the hybrid ranking's rank scores."""
        dense = reranked_matrix(self.rerank, queries @ documents.T, texts, query_texts, instructions)
        return hybrid_scores(self.hybrid, dense, texts, query_texts, instructions)

    def unseen(self, items: list, text_of, what: str) -> tuple[list, list[str]]:
        """Items whose text the model did not read in training, and a note on what was dropped."""
        if self.seen is None:
            return items, []
        kept = [item for item in items if text_of(item) not in self.seen]
        return kept, [self.seen.note(len(items) - len(kept), len(items), what)]

    def documents(self, corpus: dict[str, str], doc_ids: list[str], name: str) -> tuple[np.ndarray, bool]:
        return embed_corpus(
            self.encoder,
            doc_ids,
            [corpus[doc_id] for doc_id in doc_ids],
            None,
            self.cache,
            self.batch_size,
            self.show_progress,
            name,
        )

    def queries(self, texts: list[str], instructions) -> np.ndarray:
        return self.encoder.encode_queries(
            texts, instructions, batch_size=self.batch_size, show_progress=self.show_progress
        )


def _run_retrieval(context: _RunContext, data: RetrievalData, max_queries, max_docs):
    candidates, seen_notes = context.unseen(list(data.queries), data.queries.get, "queries")
    query_ids = sample_in_order(candidates, max_queries, context.seed)
    judged = {doc_id for qid in query_ids for doc_id in data.qrels.get(qid, {})}
    doc_ids, note = subsample_corpus(list(data.corpus), judged, max_docs, context.seed)
    notes = list(data.notes) + seen_notes + ([note] if note else [])
    if max_queries is not None and len(query_ids) < len(candidates):
        notes.append(f"queries sub-sampled: {len(query_ids)} of {len(candidates)} (seed {context.seed})")
    doc_matrix, from_cache = context.documents(data.corpus, doc_ids, data.name)
    query_texts = [data.queries[qid] for qid in query_ids]
    instructions = [data.instruction_for(qid) for qid in query_ids]
    query_matrix = context.queries(query_texts, instructions)
    scores = context.scores(query_matrix, doc_matrix, [data.corpus[d] for d in doc_ids], query_texts, instructions)
    run = _top_k_run(query_ids, doc_ids, scores, RUN_DEPTH)
    qrels = {qid: data.qrels[qid] for qid in query_ids}
    metrics = metric_lib.retrieval_metrics(qrels, run)
    per_query = metric_lib.retrieval_metrics_per_query(qrels, run)
    return metrics, {"queries": len(query_ids), "documents": len(doc_ids)}, notes, from_cache, per_query


def _top_k_run(query_ids, doc_ids, scores: np.ndarray, depth: int) -> dict[str, dict[str, float]]:
    depth = min(depth, scores.shape[1])
    top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    return {
        qid: {doc_ids[column]: float(scores[row, column]) for column in top[row]} for row, qid in enumerate(query_ids)
    }


def _run_sts(context: _RunContext, sts_path: Path, max_pairs, instruction):
    all_pairs = load_sts(sts_path)
    pairs = sample_in_order(all_pairs, max_pairs, context.seed)
    if len(pairs) < 2:
        raise EvalDataError(f"STS needs at least two pairs; max_queries={max_pairs} leaves {len(pairs)}.")
    first = context.queries([pair.sentence1 for pair in pairs], instruction)
    second = context.queries([pair.sentence2 for pair in pairs], instruction)
    similarity = np.sum(first * second, axis=1)
    gold = np.array([pair.score for pair in pairs])
    metrics = {"spearman": metric_lib.spearman(similarity, gold)}
    interval = bootstrap_interval(
        statistic=lambda index: metric_lib.spearman(similarity[index], gold[index]), size=len(pairs), seed=context.seed
    )
    notes = (
        [f"pairs sub-sampled: {len(pairs)} of {len(all_pairs)} (seed {context.seed})"]
        if len(pairs) < len(all_pairs)
        else []
    )
    return metrics, {"pairs": len(pairs)}, notes, False, {"spearman": interval}
