"""Is there one direction in document-embedding space that tells supporting from refuting evidence?

    python -m tools.diagnostics.stance_direction --model instemb_rag/default_checkpoint -o out.json

Documents are embedded once, without the claim, so an instruction can steer the Climate-FEVER
stance task only by moving the query along a direction on which, for every claim, the supporting
sentence S and the refuting sentence R differ the same way. This probe measures whether such a
direction exists in a model's document embeddings: it averages the unit-normalised differences
S - R over the *training* claims (the mean-difference probe, which cannot overfit 576 dimensions
from ~100 claims the way a fitted classifier does) and reports, on the held-out claims, the share
of (S, R) pairs with S - R on the positive side, per claim then averaged, with a bootstrap 95 %
interval. 0.5 means no such direction: the query side alone cannot reach the goal, whatever it is
trained on, and the document embedding must change. The splits are the eval's
(eval/steering.py), so the held-out claims are those of the dev figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import typer

from instemb_rag.eval.bootstrap import bootstrap_interval

STANCES = ("SUPPORTS", "REFUTES")


def claims_with_both_stances(data_root: Path, split: str) -> dict[str, dict[str, list[str]]]:
    """claim id -> stance -> evidence sentences, for the split's claims that have both stances."""
    from instemb_rag.eval.steering import climate_claims

    by_claim, _ = climate_claims(data_root, split)
    return {claim_id: labels for claim_id, labels in by_claim.items() if set(STANCES) <= set(labels)}


def stance_differences(encoder, claims: dict[str, dict[str, list[str]]]) -> tuple[np.ndarray, list[str]]:
    """[P, d] unit-embedding differences S - R for every (supporting, refuting) pair of each claim,
    and the claim each pair belongs to."""
    texts, spans = [], []
    for claim_id, labels in claims.items():
        start = len(texts)
        texts += labels["SUPPORTS"]
        middle = len(texts)
        texts += labels["REFUTES"]
        spans.append((claim_id, start, middle, len(texts)))
    vectors = np.asarray(encoder.encode_documents(texts), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows, owners = [], []
    for claim_id, start, middle, end in spans:
        for s in range(start, middle):
            for r in range(middle, end):
                rows.append(vectors[s] - vectors[r])
                owners.append(claim_id)
    return np.stack(rows), owners


def mean_direction_probe(
    train: np.ndarray, heldout: np.ndarray, heldout_owners: list[str]
) -> dict[str, float | list[float] | int]:
    """Accuracy of sign((S - R) . w), w = the mean training difference; held-out accuracy is per
    claim, then averaged over claims (as the dev figure averages), with its bootstrap interval."""
    direction = train.mean(axis=0)
    norm = np.linalg.norm(direction)
    if norm == 0:
        raise ValueError("the training differences average to zero: no direction to probe")
    direction /= norm
    correct = heldout @ direction > 0
    per_claim: dict[str, list[bool]] = {}
    for owner, hit in zip(heldout_owners, correct):
        per_claim.setdefault(owner, []).append(bool(hit))
    claim_scores = [float(np.mean(hits)) for hits in per_claim.values()]
    return {
        "train_accuracy": float(np.mean(train @ direction > 0)),
        "heldout_accuracy": float(np.mean(claim_scores)),
        "heldout_interval": bootstrap_interval(claim_scores),
        "heldout_claims": len(claim_scores),
        "heldout_pairs": int(len(heldout)),
    }


def main(
    model: str = typer.Option(None, help="Checkpoint or model folder (default: the shipped default)."),
    data_root: Path = typer.Option(Path("../shared/data"), help="Folder holding climate_fever/."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the result as JSON here."),
) -> None:
    """Probe a model's document embeddings for a claim-independent stance direction."""
    from instemb_rag import InstEmbEncoder

    if not (data_root / "climate_fever").is_dir():
        raise typer.BadParameter(f"{data_root / 'climate_fever'} is absent; point --data-root at the shared data")
    encoder = InstEmbEncoder.from_pretrained(model)
    train, _ = stance_differences(encoder, claims_with_both_stances(data_root, "train"))
    heldout, owners = stance_differences(encoder, claims_with_both_stances(data_root, "heldout"))
    result = {
        "model": model or "default",
        "fingerprint": encoder.fingerprint,
        **mean_direction_probe(train, heldout, owners),
    }
    typer.echo(json.dumps(result, indent=2))
    if output is not None:
        output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
