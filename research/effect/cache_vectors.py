"""Select the instruction-effect training items and cache every vector the query side trains on.

    python research/effect/cache_vectors.py runs/qtower/train-items.jsonl runs/effect/items.jsonl

From issue 44's training items (research/query_tower/select_training.py: every query there is in
runs/qtower/seen_records.jsonl, the dev figures' exclusion file), a seeded sample per source:
the instruction-decided groups (facet aspects, stance) with their groups' passages as hard
negatives, and plain retrieval queries (MS MARCO, SciFact) of which half carry a generic
retrieval instruction, so that training sees instructions that must move nothing. Then five
cached sets (teachers/cache.py: keyed on the encoder's fingerprint and the text, one shard per
512 rows, so a killed run resumes where it stopped: run the same command again):

- D(d)      the shipped LLM's document vector of every passage (the two-space trainer's cache);
- M(d)      all-MiniLM-L6-v2's vector of every passage;
- D(q, i)   the shipped LLM's query vector under the query's instruction, and
- D(q, r)   under the reference instruction (encoder/composed/effect.py's REFERENCE_INSTRUCTION);
- M(i + q)  MiniLM's vector of "instruction + query".
"""

from __future__ import annotations

import collections
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query_tower"))
from select_training import kind  # noqa: E402  (one rule for an item's source kind)

QUERIES_PER_SOURCE = {
    "facet_groups:absa": 423,
    "facet_groups:perspectrum": 710,
    "facet_groups:subjqa": 400,
    "facet_groups:manpages": 300,
    "facet_groups:numpy_scipy": 250,
    "facet_groups:powershell": 200,
    "medquad": 200,
    "climate_fever": 400,
    "scifact": 200,
    "msmarco": 600,
}
# Generic retrieval wordings (none is an evaluation task's own instruction): half the plain
# queries carry one, so the effect of an instruction that decides nothing is trained towards zero.
GENERIC_INSTRUCTIONS = (
    "Find relevant passages.",
    "Retrieve documents that answer this question.",
    "Find a passage that answers the query.",
    "Search for relevant information.",
    "Retrieve the most relevant text.",
    "Find documents related to this.",
    "Which passage is relevant?",
    "Look up information about this.",
)
PLAIN_SOURCES = ("msmarco", "scifact")


def select(items_file: str, out_file: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    items = [json.loads(line) for line in open(items_file, encoding="utf-8")]
    passages = {item["id"]: item for item in items if item["role"] == "passage"}
    by_kind: dict[str, list[dict]] = collections.defaultdict(list)
    for item in items:
        if item["role"] == "query" and item["positive"] in passages and kind(item) in QUERIES_PER_SOURCE:
            by_kind[kind(item)].append(item)
    queries = []
    for name in sorted(by_kind):
        chosen = by_kind[name]
        rng.shuffle(chosen)
        for item in chosen[: QUERIES_PER_SOURCE[name]]:
            if name in PLAIN_SOURCES and rng.random() < 0.5:
                item = {**item, "id": item["id"] + ":generic", "instruction": rng.choice(GENERIC_INSTRUCTIONS)}
            if item["instruction"]:
                queries.append(item)
    groups = {item["group"] for item in queries if item["group"]}
    kept = {item["positive"] for item in queries} | {pid for pid, p in passages.items() if p["group"] in groups}
    rng.shuffle(queries)
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as stream:
        for item in queries + [passages[pid] for pid in sorted(kept)]:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(
        len(queries), "queries", len(kept), "passages", dict(collections.Counter(kind(i) for i in queries)), flush=True
    )


def cache(items_file: str) -> None:
    from instemb_rag.datasets.embedding_items import read_items
    from instemb_rag.training.effect.vectors import cache_effect_vectors

    started = time.perf_counter()
    vectors = cache_effect_vectors(read_items(items_file))
    print({name: tuple(v.shape) for name, v in vectors.items()}, f"{time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    if not Path(sys.argv[2]).exists():
        select(sys.argv[1], sys.argv[2])
    cache(sys.argv[2])
