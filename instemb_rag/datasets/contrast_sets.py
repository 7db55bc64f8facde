"""Instruction-contrast records: sets where only the instruction (or one negation) changes the
wanted output, in the query direction retrieval sees (text = the user's query, instruction = what
they ask of it, output = the passage a retriever should return).

    medquad_facets         a disease/gene/drug (the focus) under a facet instruction ("What are the
                           symptoms?") -> that facet's passage; the focus's other facets are in
                           the same micro-batch as its hard negatives
    climate_fever_stance   a climate claim under "supports" / "refutes" -> that evidence sentence;
                           the opposite stance is the query-side negative
    scifact_stance_counterfactual  SciFact stance pairs in the query direction, plus the negated
                           claim under the opposite stance (how SciFact built its refuted claims)
    nli_pairs              SICK and the negation NLI sets: a premise under "follows from" /
                           "contradicts" -> the hypothesis with that relation
    stance_pairs           the same NLI premises as claims under the stance instructions
                           Climate-FEVER and SciFact use: "supports" -> an entailed hypothesis,
                           "refutes" -> a contradicting one, or where the premise has none, the
                           entailed hypothesis negated (a minimal pair: only the stance differs)

Each record carries a ``group`` (one focus, one claim, one premise), which is also the split
group, so no held-out focus or claim is read in training. The phrasings in ``*_PHRASINGS`` are
for training; the evaluation asks with ``*_EVAL_PHRASINGS``, which training never reads.
"""

from __future__ import annotations

import csv
import random
from collections import defaultdict
from pathlib import Path

from .grouped import GroupedRecord, read_source_jsonl, require_files
from .records import TrainingRecord

# ---------------------------------------------------------------------------- MedQuAD facets
FACET_PHRASINGS: dict[str, tuple[str, ...]] = {
    "information": ("What is it?", "Give me an overview of what this condition is.", "Describe what it is."),
    "symptoms": ("What are the symptoms?", "What signs and symptoms does it cause?", "How does it show itself?"),
    "treatment": ("How is it treated?", "What are the treatment options?", "What therapy is used for it?"),
    "causes": ("What causes it?", "Why does it happen?", "What are its causes?"),
    "inheritance": (
        "How is it inherited?",
        "Is it passed down in families, and how?",
        "What is its inheritance pattern?",
    ),
    "frequency": ("How common is it?", "How many people have it?", "How often does it occur?"),
    "genetic changes": (
        "What genetic changes are related to it?",
        "Which gene mutations cause it?",
        "What are the genetic causes?",
    ),
    "exams and tests": ("How is it diagnosed?", "What tests are used to detect it?", "Which exams find it?"),
    "research": (
        "What research is being done on it?",
        "What are scientists studying about it?",
        "Which clinical trials and studies exist?",
    ),
    "outlook": ("What is the outlook?", "What is the prognosis?", "What can people with it expect?"),
    "susceptibility": ("Who is at risk of it?", "Who is likely to get it?", "What are the risk factors?"),
    "considerations": (
        "What should people with it consider?",
        "What precautions matter for it?",
        "What special considerations apply?",
    ),
    "prevention": ("How can it be prevented?", "How do I avoid getting it?", "What lowers the chance of getting it?"),
    "stages": ("What are its stages?", "How is it staged?", "How does it progress through stages?"),
    "complications": (
        "What complications can it cause?",
        "What problems can it lead to?",
        "What are its complications?",
    ),
}
# Held out from training: the dev figure measures steering under wordings the model never read.
FACET_EVAL_PHRASINGS: dict[str, str] = {
    "information": "Explain what this is.",
    "symptoms": "Tell me the symptoms.",
    "treatment": "Tell me how doctors treat it.",
    "causes": "Tell me what leads to it.",
    "inheritance": "Tell me how it runs in families.",
    "frequency": "Tell me how widespread it is.",
    "genetic changes": "Tell me which genes are involved.",
    "exams and tests": "Tell me how it is detected.",
    "research": "Tell me about ongoing studies.",
    "outlook": "Tell me the long-term outlook.",
    "susceptibility": "Tell me who tends to get it.",
    "considerations": "Tell me what to keep in mind.",
    "prevention": "Tell me how to avoid it.",
    "stages": "Tell me the stages.",
    "complications": "Tell me what it can lead to.",
}


def medquad_focus_passages(folder: Path) -> dict[str, dict[str, str]]:
    """focus (lower-cased) -> facet -> passage; one passage per facet (the first source's), and
    only foci with at least two facets, since one facet offers nothing to steer between."""
    require_files(folder, "medquad_qa.jsonl")
    by_focus: dict[str, dict[str, str]] = defaultdict(dict)
    for row in read_source_jsonl(folder / "medquad_qa.jsonl"):
        focus, facet, answer = row.get("focus", "").strip(), row.get("qtype", ""), row.get("answer", "")
        if focus and facet in FACET_PHRASINGS and len(answer.split()) >= 8:
            by_focus[focus.lower()].setdefault(facet, " ".join(answer.split()))
    return {focus: facets for focus, facets in by_focus.items() if len(facets) >= 2}


def medquad_query_text(focus: str) -> str:
    return focus[:1].upper() + focus[1:]


def build_medquad_facets(folder: Path) -> list[GroupedRecord]:
    grouped = []
    for focus, facets in sorted(medquad_focus_passages(folder).items()):
        chooser = random.Random(focus)
        for facet, passage in sorted(facets.items()):
            others = [f for f in facets if f != facet]
            record = TrainingRecord(
                text=medquad_query_text(focus),
                instruction=chooser.choice(FACET_PHRASINGS[facet]),
                output=passage,
                negative_instruction=chooser.choice(FACET_PHRASINGS[chooser.choice(others)]),
                group=f"medquad:{focus}",
                source=f"medquad_facets:{focus}:{facet}",
            )
            grouped.append(GroupedRecord(f"medquad:{focus}", record))
    return grouped


# ---------------------------------------------------------------------------- Climate-FEVER
STANCE_PHRASINGS: dict[str, tuple[str, ...]] = {
    "SUPPORTS": (
        "Find evidence that supports this claim.",
        "Retrieve a passage that confirms the claim.",
        "Which statement backs this claim up?",
    ),
    "REFUTES": (
        "Find evidence that refutes this claim.",
        "Retrieve a passage that disproves the claim.",
        "Which statement contradicts this claim?",
    ),
}
STANCE_EVAL_PHRASINGS = {
    "SUPPORTS": "Show me evidence in favour of this claim.",
    "REFUTES": "Show me evidence against this claim.",
}
OPPOSITE = {"SUPPORTS": "REFUTES", "REFUTES": "SUPPORTS"}


def climate_fever_claims(folder: Path) -> list[tuple[str, str, dict[str, list[str]]]]:
    """(claim id, claim, label -> evidence sentences) for claims with SUPPORTS or REFUTES evidence."""
    require_files(folder, "climate-fever.jsonl")
    claims = []
    for row in read_source_jsonl(folder / "climate-fever.jsonl"):
        evidence: dict[str, list[str]] = defaultdict(list)
        for item in row.get("evidences", []):
            if item.get("evidence_label") in OPPOSITE and item.get("evidence", "").strip():
                evidence[item["evidence_label"]].append(climate_evidence_text(item))
        if evidence:
            claims.append((str(row["claim_id"]), row["claim"].strip(), dict(evidence)))
    return claims


def climate_evidence_text(item: dict) -> str:
    """The sentence with its Wikipedia article as a title, as an indexed passage would read."""
    return f"{item.get('article', '').strip()}\n{item['evidence'].strip()}".strip()


def build_climate_fever_stance(folder: Path) -> list[GroupedRecord]:
    grouped = []
    for claim_id, claim, evidence in climate_fever_claims(folder):
        chooser = random.Random(claim_id)
        group = f"climate_fever:{claim_id}"
        # A claim's supporting and refuting sentences share a micro-batch (the group), so each is
        # the other instruction's document-side hard negative.
        for label, sentences in sorted(evidence.items()):
            for position, sentence in enumerate(sentences):
                source = f"climate_fever_stance:{claim_id}:{label}:{position}"
                grouped.append(stance_record(chooser, claim, label, sentence, group, source))
    return grouped


def stance_record(chooser: random.Random, claim: str, label: str, sentence: str, group: str, source: str):
    """A claim under one stance's training wording -> the sentence with that stance; the other
    stance's wording is its query-side negative."""
    record = TrainingRecord(
        text=claim,
        instruction=chooser.choice(STANCE_PHRASINGS[label]),
        output=sentence,
        negative_instruction=chooser.choice(STANCE_PHRASINGS[OPPOSITE[label]]),
        group=group,
        source=source,
    )
    return GroupedRecord(group, record)


def contrast_label(source: str) -> tuple[str, str] | None:
    """(set, label) of a record these builders wrote, read back from its ``source``: the stance
    (Climate-FEVER), the facet (MedQuAD) or the relation (NLI). None for sets whose records
    carry no competing label within their group (the counterfactual SciFact pairs share one
    abstract) and for records from elsewhere."""
    name, _, rest = source.partition(":")
    fields = rest.split(":")
    if name == "climate_fever_stance" and len(fields) == 3:
        return name, fields[1]
    if name == "medquad_facets" and len(fields) >= 2:
        return name, fields[-1]
    if name == "nli_pairs" and len(fields) == 1:
        return name, fields[0]
    if name == "stance_pairs" and len(fields) == 2:
        return name, fields[0]
    return None


# ---------------------------------------------------------------------------- SciFact, counterfactual
def negate_claim(claim: str) -> str:
    """A claim with the opposite truth value: what refutes the claim supports its negation."""
    body = claim.strip().rstrip(".")
    if body[:1].isupper() and not body[:2].isupper():
        body = body[:1].lower() + body[1:]
    return f"It is not true that {body}."


def build_scifact_stance_counterfactual(folder: Path, stance_rows) -> list[GroupedRecord]:
    """Each stance pair twice: the claim under its label's instruction, and the negated claim
    under the opposite instruction, both -> the same abstract. The model cannot answer from the
    instruction word alone: "support" is right for one claim and wrong for its negation."""
    grouped = []
    for group, row, abstract in stance_rows(folder):
        for text, instruction, negative in (
            (row["claim"], row["instruction_match"], row["instruction_mismatch"]),
            (negate_claim(row["claim"]), row["instruction_mismatch"], row["instruction_match"]),
        ):
            record = TrainingRecord(
                text=text,
                instruction=instruction,
                output=abstract,
                negative_instruction=negative,
                group=f"scifact:{group}",
                source=f"scifact_stance_counterfactual:{row['claim_id']}:{row['doc_id']}",
            )
            grouped.append(GroupedRecord(group, record))
    return grouped


# ---------------------------------------------------------------------------- NLI pairs
RELATION_PHRASINGS: dict[str, tuple[str, ...]] = {
    "entailment": (
        "Find a sentence that follows from this one.",
        "Which statement is implied by this?",
        "Retrieve a sentence that this one entails.",
    ),
    "contradiction": (
        "Find a sentence that contradicts this one.",
        "Which statement cannot be true if this is?",
        "Retrieve a sentence that this one rules out.",
    ),
}


def _decoded_lines(path: Path) -> list[str]:
    """The negation NLI files mix in Windows-1252 punctuation; UTF-8 where it decodes."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("cp1252", errors="replace")
    return text.splitlines()


def _nli_rows(data_root: Path) -> list[tuple[str, str, str]]:
    """(premise, hypothesis, entailment|contradiction) from SICK and the negation NLI sets."""
    rows = []
    sick = data_root / "sick" / "SICK.txt"
    require_files(sick.parent, sick.name)
    with open(sick, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            label = row["entailment_label"].lower()
            rows.append((row["sentence_A"], row["sentence_B"], label))
    for name in ("MNLI.txt", "SNLI.txt", "RTE.txt"):
        path = data_root / "negation_nli" / name
        require_files(path.parent, name)
        for row in csv.DictReader(_decoded_lines(path), delimiter="\t"):
            rows.append((row["Text"], row["Hypothesis"], row["gold_label"].lower()))
    return [
        (p.strip(), h.strip(), label) for p, h, label in rows if label in RELATION_PHRASINGS and p.strip() and h.strip()
    ]


def _nli_by_premise(data_root: Path) -> dict[str, dict[str, list[str]]]:
    """premise -> entailment|contradiction -> its hypotheses, in file order."""
    by_premise: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for premise, hypothesis, label in _nli_rows(data_root):
        by_premise[premise][label].append(hypothesis)
    return by_premise


def build_nli_pairs(data_root: Path) -> list[GroupedRecord]:
    """A premise under a relation instruction -> a hypothesis with that relation. Where the same
    premise has the other relation too, both records share a group (and so a micro-batch): each
    hypothesis is the other query's document-side hard negative."""
    by_premise = _nli_by_premise(data_root)
    grouped = []
    for premise, relations in sorted(by_premise.items()):
        chooser = random.Random(premise)
        group = f"nli:{premise[:200]}"
        other_of = {"entailment": "contradiction", "contradiction": "entailment"}
        for label, hypotheses in sorted(relations.items()):
            other = other_of[label]
            record = TrainingRecord(
                text=premise,
                instruction=chooser.choice(RELATION_PHRASINGS[label]),
                output=hypotheses[0],
                negative_instruction=chooser.choice(RELATION_PHRASINGS[other]),
                group=group,
                source=f"nli_pairs:{label}",
            )
            grouped.append(GroupedRecord(group, record))
    return grouped


# ---------------------------------------------------------------------------- stance minimal pairs
# Verbs after which English puts "not"; a sentence whose first such verb is found gets "not" after
# it ("A man is playing" -> "A man is not playing"). Contractions and "do"-support are left out:
# a sentence without one of these verbs is not negated (the builder then skips it).
_NEGATABLE_VERBS = frozenset(
    "is are was were can could will would should may might must has have had does do did".split()
)
_ALREADY_NEGATED = frozenset({"not", "no", "never", "n't", "nobody", "nothing", "none", "cannot"})


def negate_sentence(sentence: str) -> str | None:
    """The sentence with "not" after its first auxiliary verb, or None where it has none or is
    already negated (negating those by rule reads wrong too often to train on)."""
    words = sentence.split()
    if any(word.lower().strip(".,;:!?") in _ALREADY_NEGATED for word in words):
        return None
    for position, word in enumerate(words):
        if word.lower() in _NEGATABLE_VERBS:
            return " ".join([*words[: position + 1], "not", *words[position + 1 :]])
    return None


def build_stance_pairs(data_root: Path) -> list[GroupedRecord]:
    """Each NLI premise with an entailed hypothesis becomes a claim with both stances, in the
    stance wordings the evaluated sets use: ~3k both-stance groups against Climate-FEVER's ~100.
    The refuting sentence is a real contradiction where the premise has one, else the entailed
    sentence negated, so the two outputs share their topic and only the stance tells them apart."""
    by_premise = _nli_by_premise(data_root)
    grouped = []
    for premise, relations in sorted(by_premise.items()):
        if not relations.get("entailment"):
            continue
        supporting = relations["entailment"][0]
        natural = relations.get("contradiction", [])
        refuting = natural[0] if natural else negate_sentence(supporting)
        if refuting is None:
            continue
        chooser = random.Random(premise)
        group = f"stance_pairs:{premise[:200]}"
        origin = "natural" if natural else "negated"
        for label, sentence in (("SUPPORTS", supporting), ("REFUTES", refuting)):
            grouped.append(stance_record(chooser, premise, label, sentence, group, f"stance_pairs:{label}:{origin}"))
    return grouped
