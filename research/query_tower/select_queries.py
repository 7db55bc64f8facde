"""Select the query tower's training texts from a build-distill-texts file (issue 44, de-risk run).

    python research/query_tower/select_queries.py runs/qtower/texts-all.jsonl runs/qtower

Writes OUT/queries.jsonl (queries only, positives dropped: the anchor term needs none; race
capped at 15,000 and vaswani, an evaluation collection, left out) and OUT/seen_records.jsonl (every
query text and instruction as training records, for `eval ... --exclude-seen`).
"""

from __future__ import annotations

import collections
import json
import random
import sys
from pathlib import Path

CAPS = {"race": 15000}
LEFT_OUT = {"vaswani"}


def main(texts_file: str, out_dir: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    by_source: dict[str, list[dict]] = collections.defaultdict(list)
    with open(texts_file, encoding="utf-8") as stream:
        for line in stream:
            item = json.loads(line)
            if item["role"] == "query" and item["source"] not in LEFT_OUT:
                by_source[item["source"]].append({**item, "positive": None})
    chosen = []
    for source in sorted(by_source):
        items = by_source[source]
        rng.shuffle(items)
        chosen += items[: CAPS.get(source, len(items))]
    rng.shuffle(chosen)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as stream:
        stream.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in chosen)
    with open(out / "seen_records.jsonl", "w", encoding="utf-8") as stream:
        for item in chosen:
            record = {"text": item["text"], "instruction": item["instruction"], "output": item["text"]}
            stream.write(json.dumps({**record, "source": f"qtower:{item['source']}"}, ensure_ascii=False) + "\n")
    print(len(chosen), dict(collections.Counter(item["source"] for item in chosen)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
