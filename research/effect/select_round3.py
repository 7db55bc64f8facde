"""Issue 61's training items: what an instruction changes, with instruction negatives and traps in
every group, for training the LLM's query side (training/effect/query_llm.py).

    python research/effect/select_round3.py runs/qtower/texts-all.jsonl runs/r61/items.jsonl

Reads build-distill-texts' file (every query there, vaswani and race aside, is in
runs/qtower/seen_records.jsonl: the dev figures' exclusion file, research/query_tower/select_queries.py)
and writes the items file plus ``<out>.negatives.json`` (query id -> the ids of its trap passages,
extra hard negatives of that query alone). A seeded sample per kind, passages capped in length so
that the frozen LLM's caching fits a CPU session:

- **aspects** (facet groups of reviews and software docs: ABSA, SubjQA, man pages, NumPy/SciPy,
  PowerShell): the positive is the passage on the instruction's aspect; the group's other passages
  (the same subject's other aspects) are its negatives; plus one **rule-built trap** per query:
  another aspect's passage of the same subject with one sentence appended that names the asked
  aspect but says nothing about it ("It says nothing about the prices."). The trap repeats the
  instruction's words and is still the wrong passage: what the dev traps test.
- **stance** (PERSPECTRUM, ArgKP, Climate-FEVER): the other stance's evidence on the same claim is
  the negative.
- **negation** (the training split of ``stance_pairs``: SICK and the negation NLI sets, an entailed
  and a contradicting sentence per premise, as select_round2.py takes them): the contradicting
  sentence mentions the same thing negated.
- **plain** (MS MARCO) under a generic retrieval instruction (select_round2.py's 22 wordings): the
  positive must not move; the trainer's keep term holds their instruction contribution flat.

Subjects are held out by the builders' own splits: the facet groups come from runs/facets/train.jsonl
(build-facet-groups leaves the dev subjects and the Factbook source out), the NLI premises from the
training split of stance_pairs (the negation-pairs figure scores the held-out split).
"""

from __future__ import annotations

import collections
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from select_round2 import GENERIC, nli_items  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query_tower"))
from select_training import kind  # noqa: E402

QUERIES_PER_KIND = {
    "facet_groups:absa": 180,
    "facet_groups:subjqa": 40,
    "facet_groups:manpages": 15,
    "facet_groups:numpy_scipy": 12,
    "facet_groups:powershell": 12,
    "facet_groups:perspectrum": 150,
    "facet_groups:argkp": 100,
    "climate_fever": 30,
    "msmarco": 70,
}
ASPECT_KINDS = {"facet_groups:absa", "facet_groups:subjqa", "facet_groups:manpages"}
ASPECT_KINDS |= {"facet_groups:numpy_scipy", "facet_groups:powershell"}
NLI_GROUPS = 100
MAX_PASSAGE_CHARS = 500
# A sentence that names an aspect and says nothing about it (the trap's appended sentence).
TRAP_SENTENCES = (
    "It says nothing about the {aspect}.",
    "The {aspect} is not discussed here.",
    "No comment on the {aspect}.",
    "This part is not about the {aspect}.",
    "I will not go into the {aspect}.",
)


def facet_names(facets_file: Path) -> dict[str, str]:
    """Passage id (as in the items) -> its facet's name, lower case (man page sections too)."""
    names = {}
    for line in facets_file.open(encoding="utf-8"):
        group = json.loads(line)
        for passage in group["passages"]:
            names[f"facet_groups:{passage['id']}"] = passage["facet"].replace("_", " ").lower()
    return names


def short_groups(passages: dict[str, dict]) -> set[str]:
    """Groups whose every passage is short enough (the frozen LLM embeds each once)."""
    longest: dict[str, int] = collections.defaultdict(int)
    for item in passages.values():
        if item["group"]:
            longest[item["group"]] = max(longest[item["group"]], len(item["text"]))
    return {group for group, chars in longest.items() if chars <= MAX_PASSAGE_CHARS}


def trap_passage(query: dict, passages: dict, members: list[str], names: dict, rng: random.Random):
    """Another aspect's passage of the query's subject, with a sentence naming the query's aspect."""
    aspect = names.get(query["positive"])
    others = [pid for pid in members if pid != query["positive"] and names.get(pid) not in (None, aspect)]
    if not aspect or not others:
        return None
    base = passages[rng.choice(others)]
    text = f"{base['text'].rstrip()} {rng.choice(TRAP_SENTENCES).format(aspect=aspect)}"
    return {**base, "id": f"{query['id']}:trap", "text": text, "group": None, "source": "trap_rule"}


def main(texts_file: str, out_file: str, seed: int = 0) -> None:
    rng = random.Random(seed)
    items = [json.loads(line) for line in open(texts_file, encoding="utf-8")]
    passages = {item["id"]: item for item in items if item["role"] == "passage"}
    short = short_groups(passages)
    names = facet_names(Path(texts_file).parents[1] / "facets" / "train.jsonl")
    by_kind: dict[str, list[dict]] = collections.defaultdict(list)
    for item in items:
        if item["role"] != "query" or kind(item) not in QUERIES_PER_KIND or not item["positive"]:
            continue
        if item["positive"] not in passages or len(passages[item["positive"]]["text"]) > MAX_PASSAGE_CHARS:
            continue
        if item["group"] and item["group"] not in short:
            continue
        by_kind[kind(item)].append(item)
    members: dict[str, list[str]] = collections.defaultdict(list)
    for pid, item in passages.items():
        if item["group"]:
            members[item["group"]].append(pid)
    queries, extra, negatives = [], [], {}
    for name in sorted(by_kind):
        chosen = by_kind[name]
        rng.shuffle(chosen)
        for item in chosen[: QUERIES_PER_KIND[name]]:
            if name == "msmarco":
                item = {**item, "id": item["id"] + ":generic", "instruction": rng.choice(GENERIC)}
            if not item["instruction"]:
                continue
            queries.append(item)
            if name in ASPECT_KINDS:
                trap = trap_passage(item, passages, members[item["group"]], names, rng)
                if trap is not None:
                    extra.append(trap)
                    negatives[item["id"]] = [trap["id"]]
    groups = {item["group"] for item in queries if item["group"]}
    kept = {item["positive"] for item in queries} | {pid for pid, p in passages.items() if p["group"] in groups}
    nli = nli_items(random.Random(f"{seed}:nli"))
    nli_groups = sorted({item["group"] for item in nli})[:NLI_GROUPS]
    nli = [item for item in nli if item["group"] in set(nli_groups)]
    queries += [item for item in nli if item["role"] == "query"]
    rng.shuffle(queries)
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = queries + [passages[pid] for pid in sorted(kept)] + extra + [i for i in nli if i["role"] == "passage"]
    with out.open("w", encoding="utf-8") as stream:
        for item in rows:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    Path(f"{out_file}.negatives.json").write_text(json.dumps(negatives, indent=0))
    counts = collections.Counter(kind(item) for item in queries)
    chars = sum(len(item["text"]) for item in rows if item["role"] == "passage")
    print(len(queries), "queries", len(rows) - len(queries), "passages", f"{chars:,} passage chars", dict(counts))
    print(len(negatives), "rule-built traps", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
