"""One forward pass, many (pooling, L) variants: each equals a stand-alone encoder; and the
evaluation's exclusion of queries seen in training."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import QUERIES, write_beir_folder

from instemb_rag.encoder.modules.pooling import POOLING_MODES
from instemb_rag.eval import evaluate
from instemb_rag.eval.seen import SeenTexts
from instemb_rag.eval.shared_forward import SharedForward, truncate_lookahead_mask

TEXTS = [
    "this tent is light and packed size is compact .",
    "the stove burner is durable",
    "a nylon tent with a pole and floor seam for cold night .",
]
INSTRUCTIONS = ["focus on durability", None, "focus on weight"]
VARIANTS = [(mode, 4) for mode in POOLING_MODES] + [("daap", 0), ("daap", 1), ("special_mean", 2)]


def standalone(encoder, mode: str, length: int):
    """An encoder configured with this pooling and inference L on its own (same weights)."""
    return encoder.with_options(pooling=mode, lookahead_length=length)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_every_view_equals_the_standalone_encoder(tiny_encoder, padding_side):
    tiny_encoder.padding_side = padding_side
    shared = SharedForward(tiny_encoder, VARIANTS)
    views = {variant: shared.view(*variant) for variant in VARIANTS}
    from_views = {variant: view.encode_queries(TEXTS, INSTRUCTIONS, batch_size=3) for variant, view in views.items()}
    for (mode, length), view in views.items():
        alone = standalone(tiny_encoder, mode, length)
        expected = alone.encode_queries(TEXTS, INSTRUCTIONS, batch_size=2)
        np.testing.assert_allclose(from_views[(mode, length)], expected, atol=1e-5)
        assert view.fingerprint == alone.fingerprint  # same identity as the stand-alone encoder


def test_views_share_one_forward_per_input(tiny_encoder):
    shared = SharedForward(tiny_encoder, VARIANTS)
    calls = []
    original = tiny_encoder.states
    tiny_encoder.states = lambda batch, **kw: calls.append(len(batch["input_ids"])) or original(batch, **kw)
    for variant in VARIANTS:
        shared.view(*variant).encode_documents(TEXTS, batch_size=8)
    assert calls == [len(TEXTS)]
    distinct = {shared.view(*variant).fingerprint for variant in VARIANTS}
    assert len(distinct) == len(VARIANTS)


def test_variants_longer_than_the_encoder_are_refused(tiny_encoder):
    with pytest.raises(ValueError, match="more look-ahead tokens"):
        SharedForward(tiny_encoder, [("daap", 5)])


def test_truncated_mask_ends_at_the_kept_slot_for_both_padding_sides():
    right = np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    left = right[:, ::-1].copy()
    import torch

    kept = truncate_lookahead_mask(torch.tensor(right), full_length=3, keep=1)
    assert kept.tolist() == [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]]
    kept = truncate_lookahead_mask(torch.tensor(left), full_length=3, keep=1)
    assert kept.tolist() == [[0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0]]


def write_training_records(path, instructions):
    lines = [
        json.dumps({"text": "some passage about gear", "instruction": item, "output": "an answer"})
        for item in instructions
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_queries_seen_in_training_are_left_out(tmp_path, tiny_encoder, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    queries = [dict(query) for query in QUERIES]
    queries[0]["text"] = "Is the light tent for rain durable enough for a week in the hills?"
    folder = write_beir_folder(tmp_path / "gear", queries=queries)
    records = write_training_records(
        tmp_path / "train.jsonl",
        [
            "Find a study that supports this. Claim: is the LIGHT tent for rain "
            "durable   enough for a week in the hills?"
        ],
    )
    seen = SeenTexts(records)
    assert queries[0]["text"] in seen
    assert "compact stove" not in seen  # too short to count as seen, and absent anyway

    result = evaluate(tiny_encoder, str(folder), exclude_seen=records, cache=False)
    assert result["counts"]["queries"] == len(queries) - 1
    assert any("1 of 3 queries left out" in note for note in result["notes"])
    assert result["limits"]["exclude_seen"] == str(records)
    assert evaluate(tiny_encoder, str(folder), cache=False)["counts"]["queries"] == len(queries)


def test_stance_records_seen_in_training_are_left_out(tmp_path, tiny_encoder):
    claim_seen = "The tent pole and floor seam survive a cold night of wind."
    claim_new = "A compact gas stove burner is good for a camp trip in the cold."
    folder = tmp_path / "stance"
    write_beir_folder(folder)
    with (folder / "stance.jsonl").open("w") as handle:
        for claim_id, claim, doc in (("c1", claim_seen, "d5"), ("c2", claim_new, "d2")):
            handle.write(
                json.dumps(
                    {
                        "claim_id": claim_id,
                        "claim": claim,
                        "doc_id": doc,
                        "label": "SUPPORT",
                        "instruction_match": "Find a study that supports this claim.",
                        "instruction_mismatch": "Find a study that contradicts this claim.",
                    }
                )
                + "\n"
            )
    records = write_training_records(tmp_path / "train.jsonl", [f"Claim: {claim_seen}"])
    (tmp_path / "root").mkdir()  # the registered task reads <data root>/scifact/stance.jsonl
    (tmp_path / "root" / "scifact").symlink_to(folder)
    result = evaluate(tiny_encoder, "scifact-stance", data_root=tmp_path / "root", cache=False, exclude_seen=records)
    assert result["counts"]["queries"] == 1
    assert any("1 of 2 stance records left out" in note for note in result["notes"])
