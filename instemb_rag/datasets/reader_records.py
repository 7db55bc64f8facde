"""Training records for the reader (issue 67): (query, instruction, positive, negatives) groups.

Each record is one question a user could ask under one instruction, the passage that answers it
under that instruction, and passages that do not, chosen so that only reading the instruction with
the passage separates them:

- ``aspect`` (facet groups: reviews, man pages, NumPy/SciPy, PowerShell, hand-written training
  subjects): the same subject's other aspects, plus **rule-built traps**: another aspect's passage
  with one sentence that names the asked aspect only to set it aside ("It says nothing about X.",
  "X is covered on another page.", many wordings). Positives get such a sentence about *another*
  aspect as often, so a denial is read for what it denies, not counted as a bad sign.
- ``choose`` (the hand-written training subjects, several products or places of one domain): the
  passage that is strong on the asked aspect against other subjects' passages, some of which name
  the asked aspect as their weakness ("X is its weak point", "not the one for X", "if X matters,
  look elsewhere", "unlike our X model", ...), the dev traps' kind of page.
- ``stance`` (PERSPECTRUM, ArgKP, FNC-1 groups; Climate-FEVER's training claims): the other stance's
  evidence on the same claim.
- ``negation`` (the training split of ``stance_pairs``: SICK and the negation NLI sets): the
  sentence that the instruction's relation does not hold for, which repeats the premise's words.
- ``plain`` (MS MARCO's training questions, no instruction or a generic one): the passage that
  answers, against the sentence encoder's nearest other passages (the first stage's hard negatives).

Subjects are held out by the builders' own splits (runs/facets/train.jsonl leaves the dev subjects
and the Factbook source out; ``build_set`` keeps its held-out fraction), so dev figures read none of
these records; ``seen_records`` writes them in the ``--exclude-seen`` format all the same.
"""

from __future__ import annotations

import collections
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

__all__ = ["ReaderRecord", "build_reader_records", "read_reader_records", "seen_records", "write_reader_records"]

# A sentence that names an aspect only to set it aside: the page is about something else.
ASIDE_WORDINGS = (
    "It says nothing about {a}.",
    "{A} is covered on another page.",
    "This part does not discuss {a}.",
    "For {a}, see elsewhere.",
    "Nothing here is about {a}.",
    "Details on {a} are not included here.",
    "If you came for {a}, this is the wrong section.",
    "We do not go into {a} in this section.",
    "Questions about {a} are answered separately.",
    "This is not the page about {a}.",
    "See the next page for {a}; this one is about something else.",
    "{A} is outside the scope of this text.",
)
# A sentence that names an aspect as a weakness: the subject is the wrong pick for it.
WEAKNESS_WORDINGS = (
    "{A} is its weak point.",
    "It is not the one to pick for {a}.",
    "If {a} matters to you, look elsewhere.",
    "Unlike our model built for {a}, this one puts other things first.",
    "Do not choose it for {a}.",
    "Where it falls short is {a}.",
    "{A}? Not its strength.",
    "Reviewers found its {a} disappointing.",
    "We would not recommend it if you care about {a}.",
    "It was not designed with {a} in mind.",
    "Skip this one if {a} is your priority.",
    "On {a} it trails its rivals.",
    "Buyers who wanted good {a} were let down.",
    "Its {a} is below average for the price.",
    "It is a poor choice where {a} is concerned.",
    "Anyone who needs {a} should pick another option.",
)
CHOOSE_QUERIES = (
    "Which one should I pick?",
    "Which should I choose?",
    "What would you recommend?",
    "Which is the best choice for me?",
    "Help me choose.",
    "Which option fits me best?",
)
GENERIC_INSTRUCTIONS = (
    "Find relevant passages.",
    "Given a question, retrieve passages that answer it.",
    "Retrieve web passages that answer the query.",
    "Find an answer to this.",
    "Find the best matching passage.",
    "Get me the relevant documents.",
    "Search the collection for matching documents.",
    "Help me find material about this.",
)
# Many wordings of the two stance instructions (round 2): with the builders' three each, a reader
# learns those sentences rather than what "support" and "refute" ask for (round 1 lost refutes
# under other wordings). Written for this list, not taken from any evaluation.
STANCE_WORDINGS = {
    "SUPPORTS": (
        "Find evidence that supports this claim.",
        "Show me something that agrees with this.",
        "I want the sentence that backs this up.",
        "Which passage is consistent with this statement?",
        "Give me proof that this is true.",
        "Look for text confirming this.",
        "Find a source in favour of this claim.",
        "What says the same thing?",
        "Retrieve support for the following statement.",
        "Which text would a defender of this claim quote?",
        "Find a passage that agrees.",
        "Evidence for this, please.",
        "Show that this holds.",
        "Find something that corroborates this.",
        "Which sentence follows from this?",
        "I need a passage that verifies the statement.",
        "Find text that is in line with this claim.",
        "What evidence speaks for this?",
        "Retrieve the statement that is compatible with this one.",
        "Which passage endorses this view?",
    ),
    "REFUTES": (
        "Find evidence that refutes this claim.",
        "Show me something that disagrees with this.",
        "I want the sentence that contradicts this.",
        "Which passage is inconsistent with this statement?",
        "Give me proof that this is false.",
        "Look for text disputing this.",
        "Find a source against this claim.",
        "What says the opposite?",
        "Retrieve counter-evidence for the following statement.",
        "Which text would a critic of this claim quote?",
        "Find a passage that disagrees.",
        "Evidence against this, please.",
        "Show that this does not hold.",
        "Find something that undermines this.",
        "Which sentence cannot be true if this is?",
        "I need a passage that debunks the statement.",
        "Find text that conflicts with this claim.",
        "What evidence speaks against this?",
        "Retrieve the statement that is incompatible with this one.",
        "Which passage rejects this view?",
    ),
}
MAX_PASSAGE_CHARS = 900
MAX_NEGATIVES = 7


@dataclass(frozen=True)
class ReaderRecord:
    id: str
    kind: str  # aspect | choose | stance | negation | plain
    source: str
    query: str
    instruction: str | None
    positive: str
    negatives: tuple[str, ...]
    group: str  # records of one group share texts: they are split together

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "negatives": list(self.negatives)}, ensure_ascii=False)


def _aspect_phrase(facet: str) -> str:
    """A facet label as a phrase in a sentence ("RETURN VALUE" -> "the return value", "FOOD#QUALITY" -> "food quality")."""
    words = facet.replace("#", " ").replace("_", " ").strip()
    return words.lower() if words.isupper() or "#" in facet else words


def _sentence(template: str, facet: str) -> str:
    phrase = _aspect_phrase(facet)
    return template.format(a=phrase, A=phrase[:1].upper() + phrase[1:])


def _with_sentence(text: str, sentence: str, rng: random.Random) -> str:
    text = text[:MAX_PASSAGE_CHARS].strip()
    return f"{sentence} {text}" if rng.random() < 0.3 else f"{text} {sentence}"


def _short(text: str) -> str:
    return text[:MAX_PASSAGE_CHARS].strip()


def aspect_records(
    groups: Sequence[dict], rng: random.Random, per_group: int, aside_share: float = 0.5, source: str = "facet_groups"
) -> Iterator[ReaderRecord]:
    """One record per chosen instruction of an aspect or stance group (see the module's docstring)."""
    for group in groups:
        passages = {passage["facet"]: passage["text"] for passage in group["passages"]}
        if len(passages) < 2:
            continue
        instructions = list(group["instructions"])
        rng.shuffle(instructions)
        is_aspect = group.get("kind", "aspect") == "aspect"
        for instruction in instructions[:per_group]:
            facet = instruction["facet"]
            others = [other for other in passages if other != facet]
            negatives = [_short(passages[other]) for other in others]
            positive = _short(passages[facet])
            if is_aspect:
                trap_facet = rng.choice(others)
                aside = rng.choice(ASIDE_WORDINGS)
                negatives.append(_with_sentence(passages[trap_facet], _sentence(aside, facet), rng))
                if rng.random() < aside_share:
                    positive = _with_sentence(
                        passages[facet], _sentence(rng.choice(ASIDE_WORDINGS), rng.choice(others)), rng
                    )
            rng.shuffle(negatives)
            yield ReaderRecord(
                id=f"{group['group']}:{facet}",
                kind="aspect" if is_aspect else "stance",
                source=str(group.get("source") or source),
                query=group["query"],
                instruction=instruction["text"],
                positive=positive,
                negatives=tuple(negatives[:MAX_NEGATIVES]),
                group=group["group"],
            )


def choose_records(groups: Sequence[dict], rng: random.Random, per_instruction: int = 1) -> Iterator[ReaderRecord]:
    """Records that choose among several subjects of one domain (hand-written training groups)."""
    by_domain: dict[str, list[dict]] = collections.defaultdict(list)
    for group in groups:
        by_domain[group.get("domain", "")].append(group)
    for domain_groups in by_domain.values():
        if len(domain_groups) < 3:
            continue
        for group in domain_groups:
            passages = {passage["facet"]: passage["text"] for passage in group["passages"]}
            for instruction in group["instructions"]:
                facet = instruction["facet"]
                for copy in range(per_instruction):
                    rivals = rng.sample(
                        [other for other in domain_groups if other is not group], k=min(4, len(domain_groups) - 1)
                    )
                    negatives = []
                    for rival in rivals:
                        rival_passage = rng.choice(rival["passages"])["text"]
                        if rng.random() < 0.6:
                            rival_passage = _with_sentence(
                                rival_passage, _sentence(rng.choice(WEAKNESS_WORDINGS), facet), rng
                            )
                        negatives.append(_short(rival_passage))
                    own_others = [other for other in passages if other != facet]
                    if own_others:
                        negatives.append(_short(passages[rng.choice(own_others)]))
                    positive = _short(passages[facet])
                    if own_others and rng.random() < 0.5:
                        weak = _sentence(rng.choice(WEAKNESS_WORDINGS), rng.choice(own_others))
                        positive = _with_sentence(passages[facet], weak, rng)
                    rng.shuffle(negatives)
                    yield ReaderRecord(
                        id=f"choose:{group['group']}:{facet}:{copy}",
                        kind="choose",
                        source="facet_groups_train",
                        query=rng.choice(CHOOSE_QUERIES),
                        instruction=instruction["text"],
                        positive=positive,
                        negatives=tuple(negatives[:MAX_NEGATIVES]),
                        group=f"choose:{group['group']}",
                    )


def _stance_label(source: str) -> str | None:
    return next((label for label in STANCE_WORDINGS if f":{label}" in source), None)


def paired_records(
    records: Iterable, kind: str, set_name: str, rng: random.Random, limit: int, varied_share: float = 0.0
) -> Iterator[ReaderRecord]:
    """Records of a ``build_set`` set whose groups hold the same text under opposite instructions;
    ``varied_share`` of them asked in another of STANCE_WORDINGS' wordings of their label."""
    by_group: dict[str, list] = collections.defaultdict(list)
    for record in records:
        by_group[record.group or record.text].append(record)
    keys = sorted(key for key, members in by_group.items() if len({m.instruction for m in members}) >= 2)
    rng.shuffle(keys)
    made = 0
    for key in keys:
        members = by_group[key]
        for member in members:
            others = [other.output for other in members if other.instruction != member.instruction]
            negatives = [
                _short(text) for text in dict.fromkeys(others + list(member.negative_outputs)) if text != member.output
            ]
            if not negatives or made >= limit:
                continue
            made += 1
            instruction, label = member.instruction, _stance_label(member.source)
            if label is not None and varied_share and rng.random() < varied_share:
                instruction = rng.choice(STANCE_WORDINGS[label])
            yield ReaderRecord(
                id=f"{set_name}:{made}:{member.source}",
                kind=kind,
                source=set_name,
                query=member.text,
                instruction=instruction,
                positive=_short(member.output),
                negatives=tuple(negatives[:MAX_NEGATIVES]),
                group=f"{set_name}:{key}",
            )


def plain_records(
    records: Sequence, rng: random.Random, limit: int, encode=None, source: str = "msmarco_qa"
) -> Iterator[ReaderRecord]:
    """Questions (a record's ``instruction``) with their passage (its ``text``) against the nearest
    other passages of the set (``encode``: texts -> unit vectors, the sentence encoder; without it,
    random other passages): MS MARCO, and PubMedQA and COVID-QA for scientific text."""
    import numpy as np

    records = list(records)
    rng.shuffle(records)
    records = records[:limit]
    passages = [_short(record.text) for record in records]
    questions = [record.instruction for record in records]
    if encode is not None:
        similarity = encode(questions) @ encode(passages).T
        np.fill_diagonal(similarity, -np.inf)
        nearest = np.argsort(-similarity, axis=1)[:, :MAX_NEGATIVES]
    else:
        nearest = [
            [j for j in rng.sample(range(len(records)), MAX_NEGATIVES + 1) if j != i][:MAX_NEGATIVES]
            for i in range(len(records))
        ]
    for index, record in enumerate(records):
        instruction = rng.choice(GENERIC_INSTRUCTIONS) if rng.random() < 0.5 else None
        yield ReaderRecord(
            id=f"plain:{record.source}",
            kind="plain",
            source=source,
            query=record.instruction,
            instruction=instruction,
            positive=passages[index],
            negatives=tuple(passages[j] for j in nearest[index]),
            group=f"plain:{record.source}",
        )


@dataclass(frozen=True)
class ReaderDataPlan:
    facet_groups: Path  # runs/facets/train.jsonl (build-facet-groups)
    written_groups: Path | None  # hand-written training subjects (the facet-groups format), or none
    data_root: Path
    seed: int = 0
    aspect_per_group: int = 1
    stance_limit: int = 1500
    negation_limit: int = 1500
    plain_limit: int = 1500
    max_aspect_groups: int = 2600
    scientific_plain: bool = False  # PubMedQA and COVID-QA questions beside MS MARCO's (round 2)
    varied_stance_share: float = 0.0  # share of stance and negation records asked in STANCE_WORDINGS' wordings


def _read_groups(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def build_reader_records(plan: ReaderDataPlan, encode=None) -> list[ReaderRecord]:
    """Every kind's records, shuffled (``encode``: the sentence encoder for MS MARCO's hard negatives)."""
    from .builders import HELD_OUT_FRACTION, HELD_OUT_SEED, build_set

    rng = random.Random(plan.seed)
    groups = _read_groups(plan.facet_groups)
    aspect_groups = [group for group in groups if group.get("kind", "aspect") == "aspect"]
    stance_groups = [group for group in groups if group.get("kind") == "stance"]
    rng.shuffle(aspect_groups)
    records = list(aspect_records(aspect_groups[: plan.max_aspect_groups], rng, plan.aspect_per_group))
    records += list(aspect_records(stance_groups, rng, per_group=4))
    if plan.written_groups is not None and plan.written_groups.is_file():
        written = _read_groups(plan.written_groups)
        records += list(aspect_records(written, rng, per_group=8, source="facet_groups_train"))
        records += list(choose_records(written, rng, per_instruction=2))
    climate, _ = build_set("climate_fever_stance", plan.data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    varied = plan.varied_stance_share
    records += list(paired_records(climate, "stance", "climate_fever_stance", rng, plan.stance_limit, varied))
    pairs, _ = build_set("stance_pairs", plan.data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    records += list(paired_records(pairs, "negation", "stance_pairs", rng, plan.negation_limit, varied))
    msmarco, _ = build_set("msmarco_qa", plan.data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
    records += list(plain_records(msmarco, rng, plan.plain_limit, encode))
    if plan.scientific_plain:
        for name in ("pubmedqa", "covid_qa"):
            scientific, _ = build_set(name, plan.data_root, HELD_OUT_FRACTION, HELD_OUT_SEED)
            unique = list({record.text: record for record in scientific}.values())
            records += list(plain_records(unique, rng, plan.plain_limit, encode, source=name))
    rng.shuffle(records)
    return records


def write_reader_records(records: Sequence[ReaderRecord], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    with open(partial, "w", encoding="utf-8") as stream:
        stream.writelines(record.to_json() + "\n" for record in records)
    partial.replace(path)
    return path


def read_reader_records(path: str | Path) -> list[ReaderRecord]:
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                records.append(ReaderRecord(**{**raw, "negatives": tuple(raw["negatives"])}))
            except (json.JSONDecodeError, TypeError, KeyError) as error:
                from .records import RecordError

                raise RecordError(
                    f"{path}, line {number}: not a reader record ({error}); each line holds id, kind, source, query, "
                    "instruction, positive, negatives, group (instemb-rag build-reader-data writes them)."
                ) from error
    return records


def seen_records(records: Sequence[ReaderRecord]) -> Iterator[dict]:
    """The records as ``eval --exclude-seen`` reads them: every text a record read."""
    for record in records:
        for text in (record.positive, *record.negatives):
            yield {
                "text": record.query,
                "instruction": record.instruction,
                "output": text,
                "source": f"reader:{record.source}",
            }
