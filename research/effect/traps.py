"""Issue 61's trap dev set (eval_sets/traps): is the right file first in its corpus when another
file repeats the instruction's words?

    python research/effect/traps.py OUT.json BASELINE[@S] MODEL[@S] [MODEL[@S] ...]

MODEL as in own_files.py: ``default``, ``pasted:minilm``, ``effect`` (untrained) or a folder; ``@S``
sets an instruction-effect model's strength; ``+reader:FOLDER`` adds a reader's second stage. Each corpus's 12 files are embedded whole (each is
shorter than one chunk, as the indexer stores it) and each case's query ranks them. Per model:
first in corpus per corpus and pooled, and the share of cases whose trap ranks above the right
file; each later model paired with BASELINE over the 30 cases (95 % bootstrap interval, the
eval harness's paired_gain). Writes every ranking and figure to OUT.json.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from own_files import load_ranker, ranked_scores  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "eval_sets" / "traps"


def cases() -> list[dict]:
    return [json.loads(line) for line in (ROOT / "queries.jsonl").read_text().splitlines() if line.strip()]


def score(encoder, reranker=None) -> dict:
    rows = []
    by_corpus = collections.defaultdict(list)
    for case in cases():
        by_corpus[case["corpus"]].append(case)
    for corpus, items in sorted(by_corpus.items()):
        files = sorted((ROOT / corpus).glob("*.md"))
        texts = [path.read_text(encoding="utf-8") for path in files]
        documents = encoder.encode_documents(texts)
        asked, instructions = [c["query"] for c in items], [c["instruction"] for c in items]
        queries = encoder.encode_queries(asked, instructions)
        for case, scores in zip(items, ranked_scores(reranker, queries @ documents.T, texts, asked, instructions)):
            order = [files[n].name for n in np.argsort(-scores)]
            rank, trap_rank = order.index(case["expected"]) + 1, order.index(case["trap"]) + 1
            rows.append({**case, "rank": rank, "trap_rank": trap_rank, "first": order[0]})
    return summary(rows)


def summary(rows: list[dict]) -> dict:
    corpora = sorted({row["corpus"] for row in rows})
    share = lambda picked: round(float(np.mean(picked)), 4)  # noqa: E731
    return {
        "first_in_corpus": share([row["rank"] == 1 for row in rows]),
        "trap_above_right": share([row["trap_rank"] < row["rank"] for row in rows]),
        "per_corpus": {c: share([row["rank"] == 1 for row in rows if row["corpus"] == c]) for c in corpora},
        "cases": len(rows),
        "rows": rows,
    }


def paired(candidate: dict, baseline: dict) -> dict:
    from instemb_rag.eval.bootstrap import paired_gain

    hits = lambda result: [float(row["rank"] == 1) for row in result["rows"]]  # noqa: E731
    return paired_gain(hits(candidate), hits(baseline))


def main(out: str, baseline: str, *models: str) -> None:
    results = {}
    for reference in (baseline, *models):
        results[reference] = result = score(*load_ranker(reference))
        corpora = " ".join(f"{c} {v:.3f}" for c, v in result["per_corpus"].items())
        line = f"{reference}: first in corpus {result['first_in_corpus']:.3f} ({corpora}); trap above right {result['trap_above_right']:.3f}"
        if reference != baseline:
            result["vs_baseline"] = paired(result, results[baseline])
            line += f"; vs {baseline} {result['vs_baseline']['gain']:+.3f} {result['vs_baseline']['interval']}"
        print(line, flush=True)
        Path(out).write_text(json.dumps({"baseline": baseline, "models": results}, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
