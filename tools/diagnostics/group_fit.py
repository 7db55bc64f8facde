"""Does a model rank each contrast record's own output above its group's other-label outputs,
asked with the records' own instructions?

    python -m tools.diagnostics.group_fit --model M --records runs/RUN/data/train.jsonl -o out.json

The dev figures (``instemb-rag eval climate-fever-stance medquad-facets``) ask held-out groups with
evaluation wordings that training never reads. When a figure sits at chance, this tells the
causes apart:

- on the run's **training** records, with the training wordings: low means the loss could not
  fit the groups at all (capacity, steps, learning rate);
- high there, but low with the eval's wordings on the same groups (``eval --split train``): the
  model learned the phrasings, not the instruction's meaning;
- high on training records, low on **held-out** records (``data/heldout.jsonl``) with the same
  wordings: it memorised the groups it saw instead of learning the relation.

A record's competitors are the outputs of the records in its group that ask the same text under
another label (contrast_sets.contrast_label: the stance, the facet, the NLI relation). The score
of a record is the share of competitors its own output beats; a group's score is the mean of its
records'; the figure per set and label is the mean over groups, with a bootstrap 95 % interval.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import typer

from instemb_rag.datasets.contrast_sets import contrast_label
from instemb_rag.datasets.records import TrainingRecord, read_records
from instemb_rag.eval.bootstrap import bootstrap_interval


def contrast_groups(
    records: list[TrainingRecord], sets: set[str] | None = None
) -> dict[tuple[str, str], list[tuple[TrainingRecord, str]]]:
    """(set, group) -> (record, label) for the records with a contrast label (of ``sets``, where
    given), in file order; only groups where some record has a rival output."""
    groups: dict[tuple[str, str], list[tuple[TrainingRecord, str]]] = defaultdict(list)
    for record in records:
        labelled = contrast_label(record.source or "")
        if labelled is not None and record.group and (sets is None or labelled[0] in sets):
            set_name, label = labelled
            groups[(set_name, record.group)].append((record, label))
    # A claim with one stance only has nothing to rank: left out before sampling and embedding.
    return {key: members for key, members in groups.items() if competing_pairs(members)}


def sample_groups(groups: dict, per_set: int | None, seed: int) -> dict:
    """At most ``per_set`` groups of each set, a seeded sample (all where None)."""
    by_set: dict[str, list] = defaultdict(list)
    for key in groups:
        by_set[key[0]].append(key)
    chosen = []
    for keys in by_set.values():
        chosen += keys if per_set is None or len(keys) <= per_set else random.Random(seed).sample(keys, per_set)
    return {key: groups[key] for key in sorted(chosen)}


def competing_pairs(members: list[tuple[TrainingRecord, str]]) -> list[tuple[int, list[int]]]:
    """(record index, indices of the records whose outputs compete with it) within one group."""
    pairs = []
    for i, (record, label) in enumerate(members):
        rivals = [
            j
            for j, (other, other_label) in enumerate(members)
            if other_label != label and other.text == record.text and other.output != record.output
        ]
        if rivals:
            pairs.append((i, rivals))
    return pairs


def score_groups(encoder, groups: dict) -> dict[tuple[str, str], dict[str, float]]:
    """(set, group) -> label -> mean share of competitors beaten, by the records of that label."""
    queries, outputs, spans = [], [], []
    for key, members in groups.items():
        spans.append((key, len(queries), members))
        queries += [(record.text, record.instruction) for record, _ in members]
        outputs += [record.output for record, _ in members]
    unique_outputs = sorted(set(outputs))
    position = {text: i for i, text in enumerate(unique_outputs)}
    doc_vectors = encoder.encode_documents(unique_outputs)
    query_vectors = encoder.encode_queries([text for text, _ in queries], [ins for _, ins in queries])
    scores: dict[tuple[str, str], dict[str, float]] = {}
    for key, start, members in spans:
        by_label: dict[str, list[float]] = defaultdict(list)
        for i, rivals in competing_pairs(members):
            query = query_vectors[start + i]
            own = float(query @ doc_vectors[position[members[i][0].output]])
            beaten = [own > float(query @ doc_vectors[position[members[j][0].output]]) for j in rivals]
            by_label[members[i][1]].append(float(np.mean(beaten)))
        if by_label:
            scores[key] = {label: float(np.mean(values)) for label, values in by_label.items()}
    return scores


def summarise(scores: dict[tuple[str, str], dict[str, float]]) -> dict[str, dict]:
    """set -> {"all": figure, label: figure, ...}; a figure is mean, interval and group count."""

    def figure(values: list[float]) -> dict:
        return {"mean": float(np.mean(values)), "interval": bootstrap_interval(values), "groups": len(values)}

    by_set: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (set_name, _), labels in scores.items():
        by_set[set_name]["all"].append(float(np.mean(list(labels.values()))))
        for label, value in labels.items():
            by_set[set_name][label].append(value)
    return {set_name: {name: figure(values) for name, values in rows.items()} for set_name, rows in by_set.items()}


def main(
    records: Path = typer.Option(
        ..., help="Training records (JSONL), e.g. runs/RUN/data/train.jsonl or heldout.jsonl."
    ),
    model: str = typer.Option(None, help="Checkpoint or model folder (default: the shipped default)."),
    groups_per_set: int = typer.Option(60, help="Groups sampled from each set (0 = all)."),
    seed: int = typer.Option(0, help="Seed of the group sample."),
    sets: list[str] = typer.Option(
        None, "--set", help="Only these sets (climate_fever_stance, medquad_facets, nli_pairs); repeatable."
    ),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the result as JSON here."),
) -> None:
    """Score a model on a records file's contrast groups, with the records' own instructions."""
    from instemb_rag import InstEmbEncoder

    if not records.is_file():
        raise typer.BadParameter(f"{records} not found; a run writes its records to <output_dir>/data/")
    groups = sample_groups(
        contrast_groups(read_records(records), set(sets) if sets else None), groups_per_set or None, seed
    )
    if not groups:
        raise typer.BadParameter(
            f"{records} holds no contrast groups (climate_fever_stance, medquad_facets, nli_pairs or stance_pairs records)"
        )
    encoder = InstEmbEncoder.from_pretrained(model)
    result = {
        "model": model or "default",
        "fingerprint": encoder.fingerprint,
        "records": str(records),
        "groups_per_set": groups_per_set,
        "seed": seed,
        "only_sets": sorted(sets) if sets else None,
        "sets": summarise(score_groups(encoder, groups)),
    }
    typer.echo(json.dumps(result, indent=2))
    if output is not None:
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
