"""PERSPECTRUM: claims with perspectives that support or undermine them (society, politics,
health, education ...). A subject is one claim of the data set's **train** split (its dev and
test claims are left to evaluation: eval's perspectrum-stance reads the test split); the two
aspects are the claim's supporting and its undermining perspectives (up to two of each, joined).
The query is the claim itself; the instruction asks for one stance."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ...jsonl import read_jsonl
from .drafts import SubjectDraft
from .passages import join
from .wording import Aspect

TRAINING_SPLIT = "train"
PERSPECTIVES_PER_STANCE = 2
STANCE_ASPECTS = {
    "support": Aspect(
        "support",
        ("arguments in favour", "reasons that support it", "evidence for it", "the case for it"),
        ("Find arguments that support this claim.", "What speaks for this?", "Why might this be true?",
         "Give me reasons to agree.", "Which arguments back this up?"),
    ),
    "undermine": Aspect(
        "undermine",
        ("arguments against it", "reasons to reject it", "counter-arguments", "the case against it"),
        ("Find arguments that undermine this claim.", "What speaks against this?", "Why might this be wrong?",
         "Give me reasons to disagree.", "Which arguments refute this?"),
    ),
}  # fmt: skip
_STANCE_KEY = {"SUPPORT": "support", "UNDERMINE": "undermine"}


def read_perspectrum(stance_folder: Path) -> list[SubjectDraft]:
    claims: dict[str, str] = {}
    perspectives: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for _, row in read_jsonl(stance_folder / "perspectrum.jsonl"):
        if row.get("split") != TRAINING_SPLIT or row.get("stance") not in _STANCE_KEY:
            continue
        claim_id = str(row["claim_id"])
        claims[claim_id] = row["claim"].strip()
        perspectives[claim_id][_STANCE_KEY[row["stance"]]].append(row["perspective"].strip())
    drafts = []
    for claim_id, by_stance in perspectives.items():
        if len(by_stance) < 2:
            continue
        passages = {stance: join(texts[:PERSPECTIVES_PER_STANCE]) for stance, texts in by_stance.items()}
        drafts.append(
            SubjectDraft(
                "perspectrum",
                claim_id,
                claims[claim_id],
                "debate",
                passages,
                STANCE_ASPECTS,
                ("{s}",),
                kind="stance",
                bare_query_share=1.0,
            )  # fmt: skip
        )
    return drafts
