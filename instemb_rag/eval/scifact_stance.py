"""SciFact stance (``scifact-stance``, and SciFact's part of ``stance-pooled``).

Each record of ``scifact/stance.jsonl`` is (claim, abstract, label) with the instruction the label
matches and the one it does not. The claim is embedded under both; the task ranks the abstract
pool under each (p-MRR: FollowIR's "relevant under the original instruction, not under the
altered one"), and pairwise accuracy asks the direct question: does the abstract score higher
for the claim under the matching instruction than under the mismatching one (1/0 per record).

Records are chosen once here for both tasks: those whose claim the model read in training are
left out (``--exclude-seen``, seen.py), then a seeded sample keeps ``max_records``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import metrics as metric_lib
from .data import EvalDataError, StanceRecord, load_corpus, load_stance
from .sampling import sample_in_order, subsample_corpus

# The data set's label -> the word of item ids and per-label splits (stance-pooled).
LABEL_WORDS = {"SUPPORT": "support", "CONTRADICT": "refute"}


def stance_records(context, stance_path: Path, max_records: int | None) -> tuple[list[StanceRecord], list[str]]:
    """The scored records (unseen, then the seeded sample) and notes on what was left out."""
    candidates, notes = context.unseen(load_stance(stance_path), lambda record: record.claim, "stance records")
    records = sample_in_order(candidates, max_records, context.seed)
    if max_records is not None:
        notes.append(f"stance records sub-sampled: {len(records)} (seed {context.seed})")
    return records, notes


def record_id(record: StanceRecord) -> str:
    """``scifact:<claim>/<abstract>:support`` (or ``:refute``): one record, one item."""
    word = LABEL_WORDS.get(record.label.upper(), record.label.lower())
    return f"scifact:{record.claim_id}/{record.doc_id}:{word}"


def _corpus_for(records: list[StanceRecord], stance_path: Path) -> dict[str, str]:
    corpus_path = stance_path.parent / "corpus.jsonl"
    corpus = load_corpus(corpus_path)
    missing = sorted({record.doc_id for record in records} - corpus.keys())
    if missing:
        raise EvalDataError(f"{stance_path} names abstracts absent from {corpus_path}: {missing[:3]}.")
    return corpus


def _claim_scores(context, records, doc_matrix: np.ndarray, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every record's claim under its matching and its mismatching instruction against every
    abstract of ``doc_matrix`` (whose texts are ``texts``): two [records, abstracts] score
    matrices, cosine or, under ``eval --hybrid``, the fused ranking's scores (context.scores)."""
    claims = [record.claim for record in records]
    match_instructions = [record.instruction_match for record in records]
    mismatch_instructions = [record.instruction_mismatch for record in records]
    matching = context.queries(claims, match_instructions)
    mismatching = context.queries(claims, mismatch_instructions)
    return (
        context.scores(matching, doc_matrix, texts, claims, match_instructions),
        context.scores(mismatching, doc_matrix, texts, claims, mismatch_instructions),
    )


def _wins(records, scores_match, scores_mismatch, doc_ids: list[str]) -> np.ndarray:
    """Per record: the abstract scores higher under the matching instruction (the pairwise item)."""
    position = {doc_id: index for index, doc_id in enumerate(doc_ids)}
    targets = np.array([position[record.doc_id] for record in records])
    rows = np.arange(len(records))
    return scores_match[rows, targets] > scores_mismatch[rows, targets]


def pairwise_items(context, stance_path: Path, max_records: int | None) -> tuple[list[str], list[float], list[str]]:
    """SciFact's part of ``stance-pooled``: item ids, 1/0 per record, notes. Pairwise accuracy
    needs only each record's own abstract, so the pool is not embedded."""
    records, notes = stance_records(context, stance_path, max_records)
    if not records:
        raise EvalDataError(f"No SciFact stance record of {stance_path} is left to score (all were read in training?).")
    corpus = _corpus_for(records, stance_path)
    doc_ids = sorted({record.doc_id for record in records})
    doc_matrix = context.encoder.encode_documents(
        [corpus[doc_id] for doc_id in doc_ids], batch_size=context.batch_size, show_progress=context.show_progress
    )
    texts = [corpus[doc_id] for doc_id in doc_ids]
    wins = _wins(records, *_claim_scores(context, records, doc_matrix, texts), doc_ids)
    return [record_id(record) for record in records], wins.astype(float).tolist(), notes


def run_scifact_stance(context, stance_path: Path, max_records, max_docs):
    """The ``scifact-stance`` task: p-MRR against the abstract pool, pairwise accuracy overall and
    per label; returns metrics, counts, notes, corpus-from-cache, per-item values, item ids."""
    records, notes = stance_records(context, stance_path, max_records)
    corpus = _corpus_for(records, stance_path)
    doc_ids, note = subsample_corpus(list(corpus), {record.doc_id for record in records}, max_docs, context.seed)
    doc_matrix, from_cache = context.documents(corpus, doc_ids, "scifact")
    texts = [corpus[doc_id] for doc_id in doc_ids]
    scores_match, scores_mismatch = _claim_scores(context, records, doc_matrix, texts)
    position = {doc_id: index for index, doc_id in enumerate(doc_ids)}
    targets = np.array([position[record.doc_id] for record in records])
    rows = np.arange(len(records))
    original_ranks = [metric_lib.rank_of(scores_match[row], targets[row]) for row in rows]
    new_ranks = [metric_lib.rank_of(scores_mismatch[row], targets[row]) for row in rows]
    changes = [
        (f"{record.claim_id}/{record.doc_id}", og, new) for record, og, new in zip(records, original_ranks, new_ranks)
    ]
    wins = _wins(records, scores_match, scores_mismatch, doc_ids)
    labels = sorted({record.label.lower() for record in records})
    ids = [record_id(record) for record in records]
    per_item = {
        "p-mrr": [metric_lib.pairwise_rank_score(og, new) for _, og, new in changes],
        "pairwise_accuracy": wins.astype(float).tolist(),
        **{
            f"pairwise_accuracy_{label}": [float(wins[i]) for i, r in enumerate(records) if r.label.lower() == label]
            for label in labels
        },
    }
    item_ids = {
        "p-mrr": ids,
        "pairwise_accuracy": ids,
        **{
            f"pairwise_accuracy_{label}": [ids[i] for i, r in enumerate(records) if r.label.lower() == label]
            for label in labels
        },
    }
    metrics = {
        "p-mrr": metric_lib.p_mrr(changes),
        "pairwise_accuracy": metric_lib.pairwise_accuracy(scores_match[rows, targets], scores_mismatch[rows, targets]),
        "mrr_matching": float(np.mean(1.0 / np.array(original_ranks))),
        "mrr_mismatching": float(np.mean(1.0 / np.array(new_ranks))),
        **_pairwise_accuracy_by_label(records, scores_match[rows, targets], scores_mismatch[rows, targets]),
    }
    notes = notes + ([note] if note else [])
    counts = {"queries": len(records), "documents": len(doc_ids)}
    return metrics, counts, notes, from_cache, per_item, item_ids


def _pairwise_accuracy_by_label(records, matching: np.ndarray, mismatching: np.ndarray) -> dict[str, float]:
    """Pairwise accuracy per stance label (``pairwise_accuracy_support``, ...). An encoder that
    ignores the instruction but scores one instruction wording higher for every claim gets 1.0
    on that label and 0.0 on the other, while its overall accuracy equals that label's share:
    the split tells instruction following from a wording bias."""
    by_label: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        by_label.setdefault(record.label.lower(), []).append(index)
    return {
        f"pairwise_accuracy_{label}": metric_lib.pairwise_accuracy(matching[rows], mismatching[rows])
        for label, rows in sorted(by_label.items())
    }
