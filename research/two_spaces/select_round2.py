"""Round 2's training items for the two-space query side (issue 50): round 1's items plus the
ArgKP and FNC-1 stance queries.

    instemb-rag build-facet-groups --out runs/facets-r2
    instemb-rag build-distill-texts --out runs/qtower/texts-r2.jsonl --seed 0 --groups runs/facets-r2/train.jsonl
    python research/two_spaces/select_round2.py runs/qtower/train-items.jsonl runs/qtower/texts-r2.jsonl \
        runs/qtower/train-items-r2.jsonl runs/qtower/seen_records.jsonl runs/qtower/seen_records-r2.jsonl

Every line of round 1's file is written again unchanged (same ids, same texts). The new queries
(``facet_groups:argkp-*`` and ``facet_groups:fnc1-*`` with a positive, a seeded sample up to
``QUERIES_PER_SOURCE``) go in at seeded places among round 1's queries, keeping round 1's order
(so a prefix of the file is still a fair sample); after round 1's passages come the new queries'
positives and every passage of their groups (the other stance: the hard negative). The seen file
is round 1's plus one record per new query, as research/query_tower/select_queries.py writes them
(the exclusion file of the dev figures). The printed "need LLM embedding" count is the new
passages whose text round 1 has not: cache_documents.py embeds those at about 10 a second.
"""

from __future__ import annotations

import collections
import json
import random
import sys

QUERIES_PER_SOURCE = {"facet_groups:argkp": 1500, "facet_groups:fnc1": 800}


def kind(item: dict) -> str:
    if item["source"] == "facet_groups":
        return "facet_groups:" + item["id"].split(":")[1].split("-")[0]
    return item["source"]


def _key(item: dict) -> tuple[str, str]:
    return " ".join(item["text"].lower().split()), " ".join((item["instruction"] or "").lower().split())


def select(round1: list[dict], texts: list[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """(new queries, new passages) from the texts file, none repeating a round 1 id or query."""
    rng = random.Random(seed)
    taken_ids = {item["id"] for item in round1}
    taken_queries = {_key(item) for item in round1 if item["role"] == "query"}
    passages = {item["id"]: item for item in texts if item["role"] == "passage"}
    by_kind: dict[str, list[dict]] = collections.defaultdict(list)
    for item in texts:
        if item["role"] == "query" and kind(item) in QUERIES_PER_SOURCE and item["positive"] in passages:
            if item["id"] not in taken_ids and _key(item) not in taken_queries:
                by_kind[kind(item)].append(item)
    queries = []
    for name in sorted(by_kind):
        rng.shuffle(by_kind[name])
        queries += by_kind[name][: QUERIES_PER_SOURCE[name]]
    groups = {item["group"] for item in queries}
    wanted = {item["positive"] for item in queries} | {pid for pid, p in passages.items() if p["group"] in groups}
    clash = sorted(wanted & taken_ids)
    if clash:
        raise SystemExit(f"{len(clash)} new passage ids are round 1 ids (e.g. {clash[:3]}): rebuild the texts.")
    return queries, [passages[pid] for pid in sorted(wanted)]


def merged(round1_lines: list[str], round1: list[dict], new_queries: list[dict], seed: int) -> list[str]:
    """Round 1's queries with the new ones at seeded places (round 1's order kept), then round 1's
    passages in their order."""
    rng = random.Random(f"{seed}:places")
    queries = [line for line, item in zip(round1_lines, round1) if item["role"] == "query"]
    slots = sorted(rng.randrange(len(queries) + 1) for _ in new_queries)
    out, start = [], 0
    for slot, item in zip(slots, new_queries):
        out += queries[start:slot]
        out.append(json.dumps(item, ensure_ascii=False) + "\n")
        start = slot
    out += queries[start:]
    return out + [line for line, item in zip(round1_lines, round1) if item["role"] == "passage"]


def main(round1_file: str, texts_file: str, out_file: str, seen_file: str, seen_out: str, seed: int = 0) -> None:
    with open(round1_file, encoding="utf-8") as stream:
        round1_lines = [line if line.endswith("\n") else line + "\n" for line in stream if line.strip()]
    round1 = [json.loads(line) for line in round1_lines]
    with open(texts_file, encoding="utf-8") as stream:
        texts = [json.loads(line) for line in stream]
    queries, passages = select(round1, texts, seed)
    lines = merged(round1_lines, round1, queries, seed)
    lines += [json.dumps(item, ensure_ascii=False) + "\n" for item in passages]
    with open(out_file, "w", encoding="utf-8") as stream:
        stream.writelines(lines)
    with open(seen_file, encoding="utf-8") as stream:
        seen = [line if line.endswith("\n") else line + "\n" for line in stream if line.strip()]
    for item in queries:
        record = {"text": item["text"], "instruction": item["instruction"], "output": item["text"]}
        seen.append(json.dumps({**record, "source": f"qtower:{item['source']}"}, ensure_ascii=False) + "\n")
    with open(seen_out, "w", encoding="utf-8") as stream:
        stream.writelines(seen)

    round1_texts = {item["text"] for item in round1 if item["role"] == "passage"}
    to_embed = {item["text"] for item in passages} - round1_texts
    count = collections.Counter
    print(f"round 1: {count(item['role'] for item in round1)} (all {len(round1)} lines kept unchanged)")
    print(f"new queries: {len(queries)} {dict(count(kind(item) for item in queries))}")
    print(f"new passages: {len(passages)} {dict(count(kind(item) for item in passages))}")
    print(f"new passages that need LLM embedding (text not in round 1): {len(to_embed)}")
    print(f"{out_file}: {len(lines)} items; {seen_out}: {len(seen)} records")


if __name__ == "__main__":
    main(*sys.argv[1:6])
