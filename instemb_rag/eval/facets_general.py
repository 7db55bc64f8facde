"""Facet groups from a source of ../shared/data/facets_general (one row per subject and facet:
``subject``, ``facet``, ``passage``), for scoring a held-out source in the facet-groups harness.

The shipped default read none of facets_general; models trained on its sources (the training
facet-sources builder) hold ``factbook`` out, so score ``factbook_sections`` for those. A group is one subject
with one passage per chosen facet (its first ``MAX_PASSAGE_WORDS`` words), the neutral query of
the source, and one instruction per facet from a few fixed wordings (picked by a seeded hash),
which name the facet the way a user would, not by the passage's own heading::

    python -m instemb_rag.eval.facets_general factbook_sections OUT.jsonl --subjects 30
    instemb-rag eval facet-groups --groups OUT.jsonl [--hybrid rrf]

The file is written wherever OUT points (keep it outside the checkout: it is derived data).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

MAX_PASSAGE_WORDS = 120

# source -> (domain, query template, {facet: instruction wordings})
SOURCES: dict[str, tuple[str, str, dict[str, tuple[str, ...]]]] = {
    "manpages": (
        "software",
        "What should I know about {subject}?",
        {
            "DESCRIPTION": ("What does it do, in general?", "Give me an overview of how it works."),
            "RETURN VALUE": ("What do I get back when it succeeds or fails?", "Which value comes back from a call?"),
            "ERRORS": ("What can go wrong, and which error codes mean what?", "I need the failure cases it reports."),
            "EXAMPLES": ("Show me how it is used in practice.", "I want a worked usage sample I can copy."),
        },
    ),
    "factbook_sections": (
        "countries",
        "Tell me about {subject}.",
        {
            "Geography": ("Where is it and what is the land like?", "I care about its location, terrain and area."),
            "Economy": ("How does the country make its money?", "I want to know about its industries and growth."),
            "Government": ("How is the country run politically?", "Who holds power and under which constitution?"),
            "Military and Security": ("What armed forces does it have?", "I care about its defence and army."),
        },
    ),
}


def read_source(path: Path) -> dict[str, dict[str, str]]:
    """subject -> facet -> passage (the first row of a facet wins)."""
    by_subject: dict[str, dict[str, str]] = defaultdict(dict)
    with path.open(encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            by_subject[row["subject"]].setdefault(row["facet"], row["passage"])
    return by_subject


def groups_from_source(data_root: Path, source: str, subjects: int, seed: int = 0) -> list[dict]:
    """Facet-group records (instemb_rag/facet_groups.py format) of ``subjects`` seeded subjects
    holding every facet the source's wordings name."""
    from .data import EvalDataError

    if source not in SOURCES:
        raise EvalDataError(f"facets_general source {source!r} has no wordings here; use one of {', '.join(SOURCES)}.")
    path = Path(data_root) / "facets_general" / f"{source}.jsonl"
    if not path.is_file():
        raise EvalDataError(f"{path} is absent; point INSTEMB_DATA_ROOT at the development data.")
    domain, query, wordings = SOURCES[source]
    by_subject = read_source(path)
    eligible = sorted(subject for subject, facets in by_subject.items() if all(facet in facets for facet in wordings))
    chosen = sorted(random.Random(seed).sample(eligible, min(subjects, len(eligible))))
    records = []
    for number, subject in enumerate(chosen, start=1):
        group = f"{source}-{number:03d}"
        passages = [
            {
                "id": f"{group}-p{i}",
                "facet": facet,
                "text": " ".join(by_subject[subject][facet].split()[:MAX_PASSAGE_WORDS]),
            }
            for i, facet in enumerate(wordings, start=1)
        ]
        instructions = [
            {"facet": facet, "text": _wording(options, subject, seed)} for facet, options in wordings.items()
        ]
        records.append(
            {
                "group": group,
                "domain": domain,
                "subject": subject,
                "kind": "aspect",
                "query": query.format(subject=subject),
                "passages": passages,
                "instructions": instructions,
            }
        )
    return records


def _wording(options: tuple[str, ...], subject: str, seed: int) -> str:
    digest = hashlib.sha256(f"{seed}:{subject}:{options[0]}".encode()).digest()
    return options[digest[0] % len(options)]


def main(argv: list[str] | None = None) -> None:
    from ..paths import data_root

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", choices=sorted(SOURCES))
    parser.add_argument("output", type=Path)
    parser.add_argument("--subjects", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", type=Path, default=None)
    args = parser.parse_args(argv)
    records = groups_from_source(args.data_root or data_root(), args.source, args.subjects, args.seed)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    print(f"{len(records)} groups written to {args.output}")


if __name__ == "__main__":
    main()
