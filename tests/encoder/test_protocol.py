"""The encoder protocols (encoder/protocol.py): what the index, eval, server and trainer call is
there, and each encoder that travels under one has its members."""

from __future__ import annotations

from instemb_rag.encoder.protocol import Encoder, ForwardEncoder, LocalEncoder
from instemb_rag.eval.shared_forward import SharedForward


def test_the_encoder_is_all_three_and_one_fingerprint_serves_documents_too(tiny_encoder):
    assert isinstance(tiny_encoder, Encoder)
    assert isinstance(tiny_encoder, LocalEncoder)
    assert isinstance(tiny_encoder, ForwardEncoder)
    assert tiny_encoder.document_fingerprint == tiny_encoder.fingerprint  # symmetric: one model embeds both


def test_a_shared_forward_view_is_an_encoder(tiny_encoder):
    view = SharedForward(tiny_encoder, [("daap", 4), ("input_last", 2)]).view("input_last", 2)
    assert isinstance(view, Encoder) and not isinstance(view, LocalEncoder)
    assert view.document_fingerprint == view.fingerprint
    assert view.encode_queries(["the tent is light ."], [" "]).shape == (1, tiny_encoder.dimension)
