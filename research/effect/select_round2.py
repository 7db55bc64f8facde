"""Issue 56, round 2's training items: round 1's, with plain queries under generic instructions
only and NLI stance groups added.

    python research/effect/select_round2.py runs/effect/items.jsonl runs/effect/items-r2.jsonl

Round 1's dev figures lost SciFact with its instruction and the negation pairs. Its plain
queries (MS MARCO) carried the builders' random aspect instructions ("Exclude anything on the
history.") while their positive stayed the same: that teaches an aspect instruction to move
nothing, against the facet groups. Here every plain query (MS MARCO, SciFact claims: their
positive does not depend on a stance) carries a generic retrieval instruction from a wider list,
and the NLI premises of the training split of ``stance_pairs`` (datasets/contrast_sets.py: an
entailed and a contradicting sentence per premise, under the training stance wordings; the
held-out split is what the negation-pairs figure scores, and it leaves out every premise whose
sentences training reads) come in as two-passage groups. Vectors of rows round 1 cached are reused.
"""

from __future__ import annotations

import collections
import json
import random
import sys
from pathlib import Path

from cache_vectors import GENERIC_INSTRUCTIONS, cache, kind

# Generic retrieval instructions: ask for relevance, decide nothing between passages on one topic.
# None is an evaluation task's own wording.
GENERIC = GENERIC_INSTRUCTIONS + (
    "Given a question, retrieve passages that answer it.",
    "Given a claim, find documents about it.",
    "Retrieve scientific papers related to this statement.",
    "Find studies on this topic.",
    "Search the collection for matching documents.",
    "Retrieve web passages that answer the query.",
    "Find an answer to this.",
    "Locate documents discussing this subject.",
    "Find the best matching passage.",
    "Retrieve evidence relevant to the statement.",
    "Return passages on the same subject.",
    "Help me find material about this.",
    "Search for papers that examine this claim.",
    "Get me the relevant documents.",
)
PLAIN_SOURCES = ("msmarco", "scifact")
NLI_GROUPS = 700


def nli_items(rng: random.Random) -> list[dict]:
    from instemb_rag.datasets.builders import HELD_OUT_FRACTION, HELD_OUT_SEED, build_set

    train, _ = build_set("stance_pairs", Path("../shared/data"), HELD_OUT_FRACTION, HELD_OUT_SEED)
    by_group = collections.defaultdict(list)
    for record in train:
        by_group[record.group].append(record)
    groups = sorted(group for group, records in by_group.items() if len(records) == 2)
    items, passages = [], {}
    for n, group in enumerate(rng.sample(groups, min(NLI_GROUPS, len(groups)))):
        for m, record in enumerate(by_group[group]):
            pid = f"nli:{n}:{m}"
            passages[pid] = {"id": pid, "role": "passage", "text": record.output, "instruction": None}
            passages[pid] |= {"group": f"nli:{n}", "positive": None, "source": "stance_pairs"}
            items.append(
                {"id": f"nli:{n}:{m}:q", "role": "query", "text": record.text, "instruction": record.instruction}
                | {"group": f"nli:{n}", "positive": pid, "source": "stance_pairs"}
            )
    return items + list(passages.values())


def main(round1: str, out: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    items = [json.loads(line) for line in open(round1, encoding="utf-8")]
    kept, seen_plain = [], set()
    for item in items:
        if item["role"] == "query" and kind(item) in PLAIN_SOURCES:
            original = item["id"].removesuffix(":generic")
            if original in seen_plain:
                continue
            seen_plain.add(original)
            item = {**item, "id": original + ":generic", "instruction": rng.choice(GENERIC)}
        kept.append(item)
    kept += nli_items(rng)
    queries = [item for item in kept if item["role"] == "query"]
    rng.shuffle(queries)
    with open(out, "w", encoding="utf-8") as stream:
        for item in queries + [item for item in kept if item["role"] == "passage"]:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(len(queries), "queries", dict(collections.Counter(kind(i) for i in queries)), flush=True)


if __name__ == "__main__":  # run as a script: its folder (cache_vectors.py) is on sys.path
    if not Path(sys.argv[2]).exists():
        main(sys.argv[1], sys.argv[2])
    cache(sys.argv[2])
