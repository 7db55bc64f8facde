"""A user's own files (issue 56): which listing comes first under each instruction.

    python research/effect/own_files.py OUT.json MODEL[@STRENGTH] [MODEL[@STRENGTH] ...]

MODEL: ``default``, ``pasted:minilm`` (MiniLM with the instruction pasted), ``effect`` (the
untrained instruction-effect arrangement) or a model folder; ``@S`` sets an instruction-effect
model's strength; ``+reader:FOLDER`` (issue 67) re-scores each query's top hits with a reader (a
trained reader's final/ or a model folder with a rerank route), as ``query --rerank`` does. Each listing of eval_sets/own_files/apartments is shorter than one chunk, so it
is embedded whole, as the indexer stores it. Prints, per model, the right listing first for k of 12
instructions and the rank of the right one under each; writes every ranking to OUT.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "eval_sets" / "own_files"


def load_ranker(reference: str):
    """(encoder, reranker or None) of MODEL[@S][+reader:FOLDER]."""
    model, _, reader = reference.partition("+reader:")
    if not reader:
        return load(model), None
    from instemb_rag import Reranker

    return load(model), Reranker.from_pretrained(reader)


def ranked_scores(reranker, scores, texts, queries, instructions):
    """The query x document scores, each row's top hits fused with the reader's (eval/reranked.py)."""
    from instemb_rag.eval.reranked import reranked_matrix

    return reranked_matrix(reranker, scores, texts, queries, instructions)


def load(reference: str):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.encoder.composed.pasted import PastedInstructionEncoder, is_pasted_reference

    name, _, strength = reference.partition("@")
    if is_pasted_reference(name):
        return PastedInstructionEncoder.load(name)
    if name == "effect":
        from instemb_rag.encoder.load import untrained_effect

        encoder = untrained_effect(device="cpu")
    else:
        encoder = InstEmbEncoder.from_pretrained(None if name == "default" else name, device="cpu")
    return encoder.with_instruction_strength(float(strength)) if strength else encoder


def score(encoder, reranker=None) -> dict:
    files = sorted((ROOT / "apartments").glob("*.md"))
    texts = [path.read_text(encoding="utf-8") for path in files]
    documents = encoder.encode_documents(texts)
    items = [json.loads(line) for line in (ROOT / "queries.jsonl").read_text().splitlines() if line.strip()]
    asked, instructions = [item["query"] for item in items], [item["instruction"] for item in items]
    queries = encoder.encode_queries(asked, instructions)
    rows = []
    for item, scores in zip(items, ranked_scores(reranker, queries @ documents.T, texts, asked, instructions)):
        order = [files[n].name for n in np.argsort(-scores)]
        rows.append({**item, "rank": order.index(item["expected"]) + 1, "first": order[0]})
    return {"right_first": sum(row["rank"] == 1 for row in rows), "of": len(rows), "rows": rows}


def main(out: str, *models: str) -> None:
    results = {}
    for reference in models:
        results[reference] = result = score(*load_ranker(reference))
        ranks = " ".join(str(row["rank"]) for row in result["rows"])
        print(f"{reference}: right first {result['right_first']}/{result['of']} (ranks {ranks})", flush=True)
    Path(out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
