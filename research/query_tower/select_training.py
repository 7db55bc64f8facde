"""Select the anchored query tower's training items from a build-distill-texts file (issue 44, round 2).

    python research/query_tower/select_training.py runs/qtower/texts-all.jsonl runs/qtower/train-items.jsonl

Queries with a positive passage, a seeded sample per source (and per facet sub-source, so stance
groups and review aspects are not drowned by man pages); the passages they point to and every
passage of their groups (the hard negatives); and a seeded sample of other passages as the bank.
Every query it keeps also lies in runs/qtower/seen_records.jsonl (select_queries.py), the exclusion
file of the dev figures.
"""

from __future__ import annotations

import collections
import json
import random
import sys

QUERIES_PER_SOURCE = {
    "facet_groups:perspectrum": 10**6,
    "facet_groups:subjqa": 10**6,
    "facet_groups:absa": 10**6,
    "facet_groups:manpages": 800,
    "facet_groups:numpy_scipy": 700,
    "facet_groups:powershell": 600,
    "medquad": 1200,
    "msmarco": 1500,
    "scifact": 10**6,
    "pubmedqa": 10**6,
    "climate_fever": 700,
    "covid_qa": 500,
}
OTHER_PASSAGES = 1500


def kind(item: dict) -> str:
    if item["source"] == "facet_groups":
        return "facet_groups:" + item["id"].split(":")[1].split("-")[0]
    return item["source"]


def main(texts_file: str, out_file: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    items = [json.loads(line) for line in open(texts_file, encoding="utf-8")]
    passages = {item["id"]: item for item in items if item["role"] == "passage"}
    by_kind: dict[str, list[dict]] = collections.defaultdict(list)
    for item in items:
        if item["role"] == "query" and item["positive"] in passages and kind(item) in QUERIES_PER_SOURCE:
            by_kind[kind(item)].append(item)
    queries = []
    for name in sorted(by_kind):
        chosen = by_kind[name]
        rng.shuffle(chosen)
        queries += chosen[: QUERIES_PER_SOURCE[name]]
    groups = {item["group"] for item in queries if item["group"]}
    kept = {item["positive"] for item in queries}
    kept |= {pid for pid, item in passages.items() if item["group"] in groups}
    others = sorted(set(passages) - kept)
    kept |= set(rng.sample(others, min(OTHER_PASSAGES, len(others))))
    rng.shuffle(queries)
    with open(out_file, "w", encoding="utf-8") as stream:
        for item in queries + [passages[pid] for pid in sorted(kept)]:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(len(queries), "queries", len(kept), "passages", dict(collections.Counter(kind(i) for i in queries)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
