"""The concatenated variant (eval/concatenated.py): two encoders side by side, cosine = w * A + (1 - w) * B."""

from __future__ import annotations

import numpy as np
import pytest

from instemb_rag.encoder.composed.concat import ConcatenatedEncoder, parse_reference
from instemb_rag.errors import InstEmbError


def test_the_cosine_is_the_weighted_sum_of_the_parts(tiny_two_tower, tiny_encoder):
    both = ConcatenatedEncoder(tiny_two_tower, tiny_encoder, weight=0.7)
    queries, docs = ["is the tent dry"], ["the tent keeps out rain", "the stove boils water fast"]
    scores = both.encode_queries(queries, "focus on weather") @ both.encode_documents(docs).T
    first = tiny_two_tower.encode_queries(queries, "focus on weather") @ tiny_two_tower.encode_documents(docs).T
    second = tiny_encoder.encode_queries(queries, "focus on weather") @ tiny_encoder.encode_documents(docs).T
    np.testing.assert_allclose(scores, 0.7 * first + 0.3 * second, atol=1e-5)
    assert both.dimension == tiny_two_tower.dimension + tiny_encoder.dimension
    # The documents are the two document sides: keyed on both document fingerprints, not the query LLMs.
    other = ConcatenatedEncoder(tiny_two_tower.with_projection(tiny_two_tower.projection), tiny_encoder, weight=0.7)
    assert other.document_fingerprint == both.document_fingerprint
    assert ConcatenatedEncoder(tiny_two_tower, tiny_encoder, 0.5).fingerprint != both.fingerprint


def test_references_name_two_models_and_a_weight_between_0_and_1():
    assert parse_reference("concat:a,default") == (0.5, ["a", "default"])
    assert parse_reference("concat:0.25:runs/x,default") == (0.25, ["runs/x", "default"])
    for bad in ("concat:a", "concat:1.5:a,b", "concat:a,b,c"):
        with pytest.raises(InstEmbError, match="concat:A,B"):
            parse_reference(bad)
