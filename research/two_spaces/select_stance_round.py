"""Round 2's items (issue 50): round 2's file (research/two_spaces/select_round2.py) with the queries
of plain retrieval sets left out, so every step is about what only the instruction decides.

    python research/two_spaces/select_stance_round.py runs/qtower/train-items-r2.jsonl runs/qtower/train-items-r2-steer.jsonl

Round 1 trained on every query and its gate drifted towards the sentence encoder's space (mean
weight 0.5 -> 0.30), below the untrained mix on stance; the sentence encoder carries plain search
untrained (the mix at 0.5 holds SciFact at 0.775), so round 2 trains the query side only on
groups where the instruction picks the passage (a subject's aspects, a claim's stance, MedQuAD's
facets) at a fixed weight. Every passage stays in the bank.
"""

from __future__ import annotations

import collections
import json
import sys

PLAIN_RETRIEVAL = {"msmarco", "pubmedqa", "covid_qa"}


def main(items_file: str, out_file: str) -> None:
    kept, counts = [], collections.Counter()
    for line in open(items_file, encoding="utf-8"):
        item = json.loads(line)
        if item["role"] == "query" and item["source"] in PLAIN_RETRIEVAL:
            counts["left out: " + item["source"]] += 1
            continue
        counts[item["role"] + ": " + item["source"]] += 1
        kept.append(line)
    with open(out_file, "w", encoding="utf-8") as stream:
        stream.writelines(kept)
    print(dict(sorted(counts.items())))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
