"""precision="int8" on the shipped LLM (the default, or a two-space default's LLM): embeddings of development texts stay within
cosine 0.99 of fp32 (the quality figures are in benchmarks/README.md)."""

from __future__ import annotations

import json

import pytest
from testing import shared_data_or_skip

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder import shipped_llm_folder

pytestmark = pytest.mark.slow


def dev_texts(count: int) -> list[str]:
    """SciFact abstracts and claims (documents and queries), cut to keep the test short."""
    folder = shared_data_or_skip("scifact")
    texts = []
    with (folder / "corpus.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            texts.append(f"{row.get('title', '')}\n{row['text']}"[:1200])
            if len(texts) == count:
                break
    queries = folder / "queries.jsonl"
    if queries.is_file():
        with queries.open() as handle:
            for line in handle:
                texts.append(json.loads(line)["text"])
                if len(texts) == 2 * count:
                    break
    return texts


# Issue 16 asks for cosine >= 0.99 to fp32 on dev texts. With per-token 8-bit activations
# (quantize.RECIPE 2) the shipped default reaches min 0.996 / mean 0.998 on 16 held-out SciFact
# and Vaswani texts (benchmarks/README.md); per-tensor activations gave min 0.958. On a CPU without
# VNNI the weights get 7 bits and the guard keeps more layers in float (an AVX2-only AMD EPYC, issue
# 47: 166 of 210 layers int8, min cosine 0.995 on documents).
INT8_COSINE_FLOOR = 0.99
INT8_COSINE_MEAN_FLOOR = 0.995


def test_int8_stays_close_to_fp32_on_dev_texts(default_encoder):
    texts = dev_texts(12)
    instructions = [None] * 12 + ["Given a scientific claim, retrieve documents that support or refute the claim"] * (
        len(texts) - 12
    )
    low = InstEmbEncoder.from_pretrained(
        shipped_llm_folder(), device="cpu", precision="int8"
    )  # the LLM, as default_encoder
    reference = default_encoder.encode_queries(texts, instructions)
    quantized = low.encode_queries(texts, instructions)
    cosines = (reference * quantized).sum(axis=1)
    assert cosines.min() >= INT8_COSINE_FLOOR, sorted(cosines)[:5]
    assert cosines.mean() >= INT8_COSINE_MEAN_FLOOR, cosines.mean()
    assert low.quantization_report["activation_scale"] == "per_token"
    assert low.fingerprint != default_encoder.fingerprint
