"""Instruction-steering tasks: the same query under different instructions must bring back
different passages, in pools where every competitor shares the query's topic.

- ``medquad-facets``: held-out MedQuAD foci (a disease, gene or drug). The query is the focus;
  each of its facets (symptoms, treatment, causes, ...) is asked for with an instruction worded as
  training never worded it. The pool is that focus's own passages, one per facet.
  ``steering_accuracy``: the asked facet's passage ranks first (random = the mean of 1/facets,
  reported as ``random_steering_accuracy``); ``pairwise_accuracy``: share of (query, other facet)
  pairs where the asked facet's passage scores higher (random = 0.5).
- ``climate-fever-stance``: held-out Climate-FEVER claims that have both a supporting and a
  refuting evidence sentence. Under "evidence in favour" the supporting sentence must score above
  the refuting one, under "evidence against" the reverse; ``pairwise_accuracy`` overall and per
  label (``pairwise_accuracy_supports``, ``pairwise_accuracy_refutes``), so a wording bias that
  prefers one label whatever the instruction shows as 1.0 / 0.0; ``instruction_effect`` (per
  claim, the two labels' accuracies summed minus 1) isolates what the instruction changes: 0 when
  the order of the two sentences is the same under both instructions, 1 when it always flips
  the right way, whatever the documents' own bias towards one label.
- ``perspectrum-stance``: the same measure on held-out PERSPECTRUM claims (perspectrum.py: the
  data set's own test split; training reads only its train split), one supporting and one
  undermining perspective per claim (a seeded choice), asked for with wordings training never
  uses ("Give me a perspective in favour of / that argues against this position.").
- ``nli-stance``: the same measure on held-out NLI premises (SICK, the negation NLI sets) asked
  as claims: an entailed sentence supports, a contradicting (or negated) one refutes. Premises
  that share a sentence with a training record are left out. Where the relation is written in
  the sentence (negation, antonyms), this shows whether the model learned it at all; Climate-FEVER
  needs world knowledge on top.

Held-out groups (but PERSPECTRUM's) come from the training builders' own split (datasets/builders.py, seed 0, the
sets' held-out fractions), so no group scored here was read by a model trained on the default
data settings. ``split="train"`` scores the training groups instead: a diagnostic that tells a
model that cannot fit the task from one that fits it and does not generalise (a dev figure is
always the held-out split). Per-item scores go back with the metrics for bootstrap intervals.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..choices import SteeringSplit, values
from ..datasets.builders import HELD_OUT_FRACTION, HELD_OUT_SEED
from .data import EvalDataError
from .reranked import reranked_matrix

SPLITS = values(SteeringSplit)


def _training_and_split_records(name: str, data_root: Path, split: str):
    """(the training records, the asked split's records) of one set, built once."""
    from ..datasets.builders import build_set

    if split not in SPLITS:
        raise EvalDataError(f"Unknown split '{split}' for {name}: use one of {', '.join(SPLITS)}.")
    train, heldout = build_set(name, data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    return train, (heldout if split == "heldout" else train)


def _split_records(name: str, data_root: Path, split: str):
    return _training_and_split_records(name, data_root, split)[1]


def _split_word(split: str) -> str:
    return "held-out" if split == "heldout" else "TRAINING (diagnostic, not a dev figure)"


def medquad_focus_and_facet(source: str) -> tuple[str, str]:
    """``medquad_facets:<focus>:<facet>``; a focus may hold a colon ("... of the young: type 2"),
    a facet never does, so the facet is what follows the last one."""
    focus, facet = source.split(":", 1)[1].rsplit(":", 1)
    return focus, facet


def _sample_groups(groups: list[str], limit: int | None, seed: int) -> list[str]:
    groups = sorted(groups)
    if limit is None or limit >= len(groups):
        return groups
    return sorted(random.Random(seed).sample(groups, limit))


def run_medquad_facets(context, data_root: Path, max_queries: int | None):
    """``max_queries`` limits the number of foci (each brings one query per facet)."""
    from ..datasets.contrast_sets import FACET_EVAL_PHRASINGS, medquad_query_text

    by_focus: dict[str, dict[str, str]] = {}
    for record in _split_records("medquad_facets", data_root, context.steering_split):
        focus, facet = medquad_focus_and_facet(record.source)
        by_focus.setdefault(focus, {})[facet] = record.output
    seen_notes = []
    if context.seen is not None:
        # MedQuAD repeats template passages across foci ("This condition is inherited in an
        # autosomal recessive pattern, ..."): a held-out focus can hold a passage training read.
        unseen = {f: facets for f, facets in by_focus.items() if not any(t in context.seen for t in facets.values())}
        seen_notes.append(context.seen.note(len(by_focus) - len(unseen), len(by_focus), "foci (a passage)"))
        by_focus = unseen
    foci = _sample_groups(list(by_focus), max_queries, context.seed)
    passages = [(focus, facet, by_focus[focus][facet]) for focus in foci for facet in sorted(by_focus[focus])]
    doc_matrix = context.encoder.encode_documents(
        [text for _, _, text in passages], batch_size=context.batch_size, show_progress=context.show_progress
    )
    queries = context.queries(
        [medquad_query_text(focus) for focus, _, _ in passages],
        [FACET_EVAL_PHRASINGS[facet] for _, facet, _ in passages],
    )
    top1, pairwise, chance = [], [], []
    start = 0
    for focus in foci:
        count = len(by_focus[focus])
        block = slice(start, start + count)
        scores = queries[block] @ doc_matrix[block].T  # [facets asked, facet passages]
        for row in range(count):
            others = np.delete(scores[row], row)
            top1.append(float(np.all(scores[row, row] > others)))
            pairwise.append(float(np.mean(scores[row, row] > others)))
            chance.append(1.0 / count)
        start += count
    metrics = {
        "steering_accuracy": float(np.mean(top1)),
        "pairwise_accuracy": float(np.mean(pairwise)),
        "random_steering_accuracy": float(np.mean(chance)),
    }
    per_item = {"steering_accuracy": top1, "pairwise_accuracy": pairwise}
    ids = [f"medquad:{focus}:{facet}" for focus, facet, _ in passages]
    counts = {"queries": len(passages), "documents": len(passages), "foci": len(foci)}
    notes = seen_notes + [
        f"{_split_word(context.steering_split)} foci: {len(foci)} of {len(by_focus)} (seed {context.seed}); pools are each focus's own passages"
    ]
    return metrics, counts, notes, per_item, {"steering_accuracy": ids, "pairwise_accuracy": ids}


def instruction_effect(asked_one: list[float], asked_other: list[float]) -> list[float]:
    """Per group, pairwise accuracy under one instruction plus under the opposite one, minus 1.

    Both lists hold one accuracy per group, in the same group order. A ranking the instruction
    does not change scores a and 1 - a, so 0, however lopsided a is; -1 means it always flips
    the wrong way."""
    if len(asked_one) != len(asked_other):
        raise ValueError(f"one accuracy per group under each instruction: {len(asked_one)} != {len(asked_other)}")
    return [one + other - 1.0 for one, other in zip(asked_one, asked_other)]


def _by_stance(records, group_of) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """group -> stance -> sentences, and group -> the claim asked, from stance records (the
    stance read back by ``contrast_label``)."""
    from ..datasets.contrast_sets import contrast_label

    by_group: dict[str, dict[str, list[str]]] = {}
    texts: dict[str, str] = {}
    for record in records:
        _, label = contrast_label(record.source)
        by_group.setdefault(group_of(record), {}).setdefault(label, []).append(record.output)
        texts[group_of(record)] = record.text
    return by_group, texts


def climate_claims(data_root: Path, split: str) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """The split's Climate-FEVER claims: claim id -> stance -> evidence sentences, and claim id -> claim."""
    records = _split_records("climate_fever_stance", data_root, split)
    return _by_stance(records, lambda record: record.source.split(":", 3)[1])


def nli_stance_premises(data_root: Path, split: str) -> tuple[dict[str, dict[str, list[str]]], dict[str, str], int]:
    """The split's NLI premises asked as claims (training's ``stance_pairs``): premise group ->
    stance -> sentence, group -> premise, and how many held-out groups were left out because a
    sentence of theirs (premise, supporting or refuting) occurs in a training record: SICK builds
    many pairs from one sentence, so a split by premise alone would let training read them."""
    trained, records = _training_and_split_records("stance_pairs", data_root, split)
    by_group, texts = _by_stance(records, lambda record: record.group)
    if split != "heldout":
        return by_group, texts, 0
    read = {record.text for record in trained} | {record.output for record in trained}
    clean = {
        group: labels
        for group, labels in by_group.items()
        if texts[group] not in read and not any(s in read for sentences in labels.values() for s in sentences)
    }
    return clean, {group: texts[group] for group in clean}, len(by_group) - len(clean)


@dataclass(frozen=True)
class StanceSet:
    """One set of stance groups: ``load(context, data_root)`` -> (group -> label -> sentences,
    group -> the claim asked, notes on groups left out); ``phrasings`` the evaluation wording per
    label; ``name`` the set's part of every item id."""

    name: str
    what: str
    load: Callable
    phrasings: dict[str, str]


def _load_climate(context, data_root: Path):
    by_claim, texts = climate_claims(data_root, context.steering_split)
    return by_claim, texts, []


def _load_nli(context, data_root: Path):
    by_premise, texts, left_out = nli_stance_premises(data_root, context.steering_split)
    notes = [f"{left_out} held-out premises left out: a sentence of theirs occurs in a training record"]
    return by_premise, texts, notes if left_out else []


def _load_perspectrum(context, data_root: Path):
    from .perspectrum import PERSPECTRUM_FILE, perspectrum_claims

    return perspectrum_claims(data_root / PERSPECTRUM_FILE, context.steering_split, context.seen)


def _stance_sets() -> dict[str, StanceSet]:
    from ..datasets.contrast_sets import STANCE_EVAL_PHRASINGS
    from .perspectrum import EVAL_PHRASINGS

    return {
        "climate-fever": StanceSet("climate-fever", "Climate-FEVER claims", _load_climate, STANCE_EVAL_PHRASINGS),
        "perspectrum": StanceSet("perspectrum", "PERSPECTRUM claims", _load_perspectrum, EVAL_PHRASINGS),
        "nli": StanceSet("nli", "NLI premises", _load_nli, STANCE_EVAL_PHRASINGS),
    }


def stance_set(name: str) -> StanceSet:
    return _stance_sets()[name]


def run_climate_fever_stance(context, data_root: Path, max_queries: int | None):
    """``max_queries`` limits the number of claims (each brings one query per label)."""
    return _run_stance_set(context, data_root, max_queries, stance_set("climate-fever"))


def run_nli_stance(context, data_root: Path, max_queries: int | None):
    """``max_queries`` limits the number of premises (each brings one query per label)."""
    return _run_stance_set(context, data_root, max_queries, stance_set("nli"))


def run_perspectrum_stance(context, data_root: Path, max_queries: int | None):
    """Held-out PERSPECTRUM claims (perspectrum.py: the data set's test split): per claim one
    supporting and one undermining perspective (seeded per claim); under "in favour" the
    supporting one must score higher, under "against" the undermining one. ``max_queries`` limits
    the number of claims (each brings one query per label)."""
    chosen = stance_set("perspectrum")
    return _run_stance_set(context, data_root, max_queries, chosen, one_each=True)


LABEL_WORDS = {"SUPPORTS": "support", "REFUTES": "refute"}


def stance_item_id(set_name: str, group: str, label: str) -> str:
    """``<set>:<group>:support`` / ``...:refute``: stable across encoders and limits, so
    ``instemb-rag compare`` pairs on it (results.item_cluster strips the label)."""
    return f"{set_name}:{group}:{LABEL_WORDS[label]}"


def one_per_stance(by_group: dict[str, dict[str, list[str]]], seed: int) -> dict[str, dict[str, list[str]]]:
    """One sentence per label and group, chosen with a generator seeded by (seed, group): the
    choice of a group never depends on which other groups are scored, so an item keeps its
    passages under any ``--max-queries``, and every item is a single 1/0 comparison."""
    return {
        group: {
            label: [random.Random(f"{seed}:{group}:{label}").choice(sorted(sentences))]
            for label, sentences in labels.items()
        }
        for group, labels in by_group.items()
    }


def stance_groups_with_both(context, by_group, max_groups: int | None, what: str) -> tuple[list[str], str]:
    """The seeded sample of groups holding both stances, and a note saying how many."""
    both = [
        group
        for group, labels in by_group.items()
        if len(labels.get("SUPPORTS", [])) and len(labels.get("REFUTES", []))
    ]
    if not both:
        raise EvalDataError(f"No {_split_word(context.steering_split)} {what} have both stances.")
    groups = _sample_groups(both, max_groups, context.seed)
    note = f"{_split_word(context.steering_split)} {what} with both stances: {len(groups)} of {len(both)} (seed {context.seed})"
    return groups, note


@dataclass
class StanceScores:
    """Per asked (group, label), in this order: every group under SUPPORTS, then every group under
    REFUTES (the order saved results have always had), the share of (wanted, unwanted) sentence
    pairs ranked the right way round: 1/0 where a group has one sentence per label."""

    asked: list[tuple[str, str]]
    values: list[float]
    sentences: int

    def label_values(self, label: str) -> list[float]:
        return [value for (_, asked), value in zip(self.asked, self.values) if asked == label]

    def ids(self, set_name: str, label: str | None = None) -> list[str]:
        return [stance_item_id(set_name, group, asked) for group, asked in self.asked if label in (None, asked)]


def score_stance_groups(context, by_group, texts, groups: list[str], phrasings: dict[str, str]) -> StanceScores:
    """The one pairwise-by-label scorer of the stance sets: each group's claim under each label's
    wording, against that group's sentences of both labels."""
    sentences = [
        (group, label, sentence)
        for group in groups
        for label in ("SUPPORTS", "REFUTES")
        for sentence in by_group[group][label]
    ]
    doc_matrix = context.encoder.encode_documents(
        [s for _, _, s in sentences], batch_size=context.batch_size, show_progress=context.show_progress
    )
    asked = [(group, label) for label in ("SUPPORTS", "REFUTES") for group in groups]
    query_texts, instructions = [texts[group] for group, _ in asked], [phrasings[label] for _, label in asked]
    queries = context.queries(query_texts, instructions)
    matrix = reranked_matrix(
        getattr(context, "rerank", None),
        queries @ doc_matrix.T,
        [s for _, _, s in sentences],
        query_texts,
        instructions,
    )
    values = []
    for row, (group, label) in enumerate(asked):
        wanted = [i for i, (owner, stance, _) in enumerate(sentences) if owner == group and stance == label]
        unwanted = [i for i, (owner, stance, _) in enumerate(sentences) if owner == group and stance != label]
        scores = matrix[row]
        values.append(float(np.mean([scores[w] > scores[u] for w in wanted for u in unwanted])))
    return StanceScores(asked, values, len(sentences))


def _run_stance_set(context, data_root: Path, max_queries, chosen: StanceSet, one_each: bool = False):
    """Pairwise accuracy overall and per label, and the instruction effect, on one stance set."""
    by_group, texts, notes = chosen.load(context, data_root)
    if one_each:
        by_group = one_per_stance(by_group, context.seed)
    groups, note = stance_groups_with_both(context, by_group, max_queries, chosen.what)
    scores = score_stance_groups(context, by_group, texts, groups, chosen.phrasings)
    supports, refutes = scores.label_values("SUPPORTS"), scores.label_values("REFUTES")
    effect = instruction_effect(supports, refutes)
    metrics = {
        "pairwise_accuracy": float(np.mean(scores.values)),
        "pairwise_accuracy_supports": float(np.mean(supports)),
        "pairwise_accuracy_refutes": float(np.mean(refutes)),
        "instruction_effect": float(np.mean(effect)),
    }
    per_item = {
        "pairwise_accuracy": scores.values,
        "pairwise_accuracy_supports": supports,
        "pairwise_accuracy_refutes": refutes,
        "instruction_effect": effect,
    }
    item_ids = {
        "pairwise_accuracy": scores.ids(chosen.name),
        "pairwise_accuracy_supports": scores.ids(chosen.name, "SUPPORTS"),
        "pairwise_accuracy_refutes": scores.ids(chosen.name, "REFUTES"),
        "instruction_effect": [f"{chosen.name}:{group}" for group in groups],
    }
    counts = {"queries": len(scores.asked), "documents": scores.sentences, "claims": len(groups)}
    return metrics, counts, notes + [note], per_item, item_ids
