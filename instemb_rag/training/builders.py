"""Turn the development sets in ``../shared/data`` into (text, instruction, output) records.

    msmarco_qa      passage, question, free-form answer
    pubmedqa        joined context paragraphs, question, long answer
    condaqa         passage, question, label (YES / NO / DON'T KNOW or a span)
    scifact_stance  title + abstract, stance instruction + claim, stance sentence
    scifact_stance_query  claim, stance instruction, the title + abstract with that stance

Instruction-contrast sets (contrast_sets.py): medquad_facets, climate_fever_stance,
scifact_stance_counterfactual, nli_pairs, stance_pairs. Generic sets at scale (generic_sets.py): race, covid_qa.

Each set keeps a seeded held-out slice. The split is by group (one passage, one claim) so
that no held-out text was seen in training under another question.
"""

from __future__ import annotations

import csv
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import InstEmbError
from .args import TrainConfig
from .contrast_sets import (
    build_climate_fever_stance,
    build_medquad_facets,
    build_nli_pairs,
    build_scifact_stance_counterfactual,
    build_stance_pairs,
)
from .generic_sets import build_covid_qa, build_race
from .grouped import GroupedRecord
from .grouped import read_source_jsonl as _read_jsonl
from .grouped import require_files as _require
from .records import TrainingRecord, write_records

DEFAULT_DATA_ROOT = Path("../shared/data")
# The split every dev figure scores (eval/steering.py) and distillation texts leave out
# (distill_texts.py): data.heldout_fraction's default, with the sets' own overrides (BUILDERS).
HELD_OUT_SEED = 0
HELD_OUT_FRACTION = 0.1


def build_msmarco_qa(folder: Path) -> list[GroupedRecord]:
    _require(folder, "queries.jsonl", "corpus.jsonl", "qrels.tsv")
    passages = {row["_id"]: row["text"] for row in _read_jsonl(folder / "corpus.jsonl")}
    passage_of: dict[str, str] = {}
    with open(folder / "qrels.tsv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                passage_of.setdefault(row["query-id"], row["corpus-id"])
    grouped = []
    for query in _read_jsonl(folder / "queries.jsonl"):
        answers = [a for a in query.get("answers", []) if a.strip() and a.strip() != "No Answer Present."]
        passage = passages.get(passage_of.get(query["_id"], ""))
        if not answers or not passage:
            continue
        record = TrainingRecord(
            text=passage, instruction=query["text"], output=answers[0], source=f"msmarco_qa:{query['_id']}"
        )
        grouped.append(GroupedRecord(passage_of[query["_id"]], record))
    return grouped


def build_msmarco_passages(folder: Path) -> list[GroupedRecord]:
    """The retrieval direction of MS MARCO: the question -> its passage (no instruction), so
    plain question-to-passage search is trained beside the instruction sets."""
    return [
        GroupedRecord(
            item.group,
            TrainingRecord(
                text=item.record.instruction or "",
                output=item.record.text,
                source=item.record.source.replace("msmarco_qa", "msmarco_passages"),
            ),
        )
        for item in build_msmarco_qa(folder)
    ]


def build_pubmedqa(folder: Path) -> list[GroupedRecord]:
    _require(folder, "pqal.jsonl")
    grouped = []
    for row in _read_jsonl(folder / "pqal.jsonl"):
        record = TrainingRecord(
            text=" ".join(row["contexts"]),
            instruction=row["question"],
            output=row["long_answer"],
            source=f"pubmedqa:{row['_id']}",
        )
        grouped.append(GroupedRecord(row["_id"], record))
    return grouped


def build_condaqa(folder: Path, split_file: str = "dev.jsonl") -> list[GroupedRecord]:
    """CondaQA's edited passages differ from the original by a negation cue: keep all edits
    of one original passage in the same split."""
    _require(folder, split_file)
    grouped = []
    for row in _read_jsonl(folder / split_file):
        label = str(row["label"]).strip()
        if not label:
            continue
        output = {"YES": "Yes.", "NO": "No.", "DON'T KNOW": "The passage does not say."}.get(label, label)
        record = TrainingRecord(
            text=row["sentence1"],
            instruction=row["sentence2"],
            output=output,
            source=f"condaqa:{row['QuestionID']}:{row['PassageEditID']}",
        )
        group = hashlib.sha1(row["original passage"].encode()).hexdigest()
        grouped.append(GroupedRecord(group, record))
    return grouped


def _scifact_stance_rows(folder: Path) -> Iterator[tuple[str, dict, str]]:
    """(group, stance row, title + abstract) for each stance pair whose abstract is present.

    One claim cites several abstracts and one abstract serves several claims: the group is the
    connected component, so neither a claim nor an abstract crosses the split, and both stance
    builders put the same claims on the held-out side."""
    _require(folder, "stance.jsonl", "corpus.jsonl")
    rows = list(_read_jsonl(folder / "stance.jsonl"))
    needed = {row["doc_id"] for row in rows}
    abstracts = {
        row["_id"]: f"{row.get('title', '')}\n{row['text']}".strip()
        for row in _read_jsonl(folder / "corpus.jsonl")
        if row["_id"] in needed
    }
    component = _connected_components([(f"claim:{r['claim_id']}", f"doc:{r['doc_id']}") for r in rows])
    for row in rows:
        abstract = abstracts.get(row["doc_id"])
        if abstract:
            yield component[f"claim:{row['claim_id']}"], row, abstract


def build_scifact_stance(folder: Path) -> list[GroupedRecord]:
    """The abstract reads the claim: text = abstract, the answer states its stance."""
    grouped = []
    for group, row, abstract in _scifact_stance_rows(folder):
        verb = "support" if row["label"] == "SUPPORT" else "contradict"
        record = TrainingRecord(
            text=abstract,
            instruction=f"{row['instruction_match']} Claim: {row['claim']}",
            output=f"The findings {verb} the claim: {row['claim']}",
            source=f"scifact_stance:{row['claim_id']}:{row['doc_id']}",
        )
        grouped.append(GroupedRecord(group, record))
    return grouped


def build_scifact_stance_query(folder: Path) -> list[GroupedRecord]:
    """The query direction, as retrieval sees it: text = claim, instruction = the stance asked
    for, answer = the abstract with that stance. The claim under the opposite stance is the
    record's hard negative: the same words, one changed, and the abstract must not match it."""
    return [
        GroupedRecord(
            group,
            TrainingRecord(
                text=row["claim"],
                instruction=row["instruction_match"],
                output=abstract,
                source=f"scifact_stance_query:{row['claim_id']}:{row['doc_id']}",
                negative_instruction=row["instruction_mismatch"],
            ),
        )
        for group, row, abstract in _scifact_stance_rows(folder)
    ]


def _connected_components(edges: list[tuple[str, str]]) -> dict[str, str]:
    """Union-find over the edges: node -> a representative of its component."""
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for left, right in edges:
        parent[root(left)] = root(right)
    return {node: root(node) for node in parent}


@dataclass(frozen=True)
class DataSet:
    folder: str  # under the data root ("" = the root itself, for builders that read several folders)
    build: Callable[[Path], list[GroupedRecord]]
    # Held-out share of groups when it must differ from data.heldout_fraction: Climate-FEVER has
    # only 154 claims with both stances, and its dev figure needs more than 15 of them.
    heldout_fraction: float | None = None


BUILDERS: dict[str, DataSet] = {
    "msmarco_qa": DataSet("msmarco_qa", build_msmarco_qa),
    "msmarco_passages": DataSet("msmarco_qa", build_msmarco_passages),
    "pubmedqa": DataSet("pubmedqa", build_pubmedqa),
    "condaqa": DataSet("condaqa", build_condaqa),
    "scifact_stance": DataSet("scifact", build_scifact_stance),
    "scifact_stance_query": DataSet("scifact", build_scifact_stance_query),
    "scifact_stance_counterfactual": DataSet(
        "scifact", lambda folder: build_scifact_stance_counterfactual(folder, _scifact_stance_rows)
    ),
    "medquad_facets": DataSet("medquad", build_medquad_facets),
    "climate_fever_stance": DataSet("climate_fever", build_climate_fever_stance, heldout_fraction=0.3),
    "nli_pairs": DataSet("", build_nli_pairs),
    "stance_pairs": DataSet("", build_stance_pairs),
    "race": DataSet("race", build_race),
    "covid_qa": DataSet("covid_qa", build_covid_qa),
}


def heldout_fraction_for(name: str, default: float) -> float:
    override = BUILDERS[name].heldout_fraction
    return default if override is None else override


def build_set(name: str, data_root: str | Path, heldout_fraction: float, seed: int):
    """(train, heldout) records of one set, split by group; the evaluation calls this too, so
    its held-out groups are exactly the ones training never read."""
    data_set = BUILDERS[name]
    folder = Path(data_root) / data_set.folder if data_set.folder else Path(data_root)
    return split_by_group(data_set.build(folder), heldout_fraction_for(name, heldout_fraction), seed)


def cap_by_group(records: list[TrainingRecord], limit: int, seed: int) -> list[TrainingRecord]:
    """At most ``limit`` records, taken as whole groups in seeded random order (a prefix of the
    builder's order would favour the alphabet's start and cut contrast groups in half)."""
    if len(records) <= limit:
        return records
    by_group: dict[str, list[TrainingRecord]] = {}
    for position, record in enumerate(records):
        by_group.setdefault(record.group or f"#{position}", []).append(record)
    keys = sorted(by_group)
    random.Random(seed).shuffle(keys)
    kept: list[TrainingRecord] = []
    for key in keys:
        if len(kept) >= limit:
            break
        kept += by_group[key][: limit - len(kept)]
    return kept


def split_by_group(
    grouped: list[GroupedRecord], heldout_fraction: float, seed: int
) -> tuple[list[TrainingRecord], list[TrainingRecord]]:
    """Seeded split: a group goes to held-out when its shuffled rank falls in the first slice."""
    groups = sorted({item.group for item in grouped})
    random.Random(seed).shuffle(groups)
    heldout_groups = set(groups[: round(len(groups) * heldout_fraction)])
    train = [item.record for item in grouped if item.group not in heldout_groups]
    heldout = [item.record for item in grouped if item.group in heldout_groups]
    return train, heldout


def build_records(
    data_root: str | Path = DEFAULT_DATA_ROOT,
    sets: list[str] | None = None,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    max_per_set: int | dict[str, int] | None = None,
) -> tuple[list[TrainingRecord], list[TrainingRecord]]:
    """Records of the chosen sets, split into (train, heldout); train is shuffled across sets."""
    data_root = Path(data_root)
    if not data_root.is_dir():
        raise InstEmbError(
            f"Data folder {data_root.resolve()} not found. The builders need the development "
            "data (../shared/data relative to the project root); pass data_root / --data-root."
        )
    sets = list(sets or BUILDERS)
    unknown = [name for name in sets if name not in BUILDERS]
    if unknown:
        raise InstEmbError(f"Unknown data set(s) {unknown}; choose from {sorted(BUILDERS)}.")
    if not 0 <= heldout_fraction < 1:
        raise InstEmbError(f"heldout_fraction must be in [0, 1); got {heldout_fraction}.")
    train: list[TrainingRecord] = []
    heldout: list[TrainingRecord] = []
    for name in sets:
        set_train, set_heldout = build_set(name, data_root, heldout_fraction, seed)
        limit = max_per_set.get(name) if isinstance(max_per_set, dict) else max_per_set
        if limit is not None:
            set_train = cap_by_group(set_train, limit, seed)
        train += set_train
        heldout += set_heldout
    random.Random(seed).shuffle(train)
    return train, heldout


def build_data_folder(
    out: str | Path,
    data_root: str | Path = DEFAULT_DATA_ROOT,
    sets: list[str] | None = None,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    max_per_set: int | dict[str, int] | None = None,
) -> dict[str, int]:
    """Write ``out/train.jsonl`` and ``out/heldout.jsonl``; returns the record counts."""
    train, heldout = build_records(data_root, sets, heldout_fraction, seed, max_per_set)
    out = Path(out)
    return {
        "train": write_records(out / "train.jsonl", train),
        "heldout": write_records(out / "heldout.jsonl", heldout),
    }


def resolve_train_file(config: TrainConfig) -> Path:
    """The records file: ``data.train_file``, or records built from ``data.build_sets`` once."""
    data = config.data
    if data.train_file:
        return Path(data.train_file)
    build_dir = Path(data.build_dir or Path(config.training.output_dir) / "data")
    train_file = build_dir / "train.jsonl"
    if not train_file.is_file():
        build_data_folder(
            build_dir, data.data_root, data.build_sets, data.heldout_fraction, data.data_seed, data.max_per_set
        )
    return train_file
