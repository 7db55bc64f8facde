"""No call this package makes into transformers/peft may be a deprecated one.

A deprecated keyword warns on every query today (the user sees a FutureWarning they cannot act
on) and breaks on a later upgrade. Imports happen before the strict block, so deprecations raised
by third-party imports themselves do not count; everything the package calls afterwards does.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest

from instemb_rag import InstEmbEncoder
from instemb_rag.encoder import shipped_llm_folder
from instemb_rag.encoder.fast.shared_prefix import encode_instructions
from instemb_rag.encoder.modules.forward import cache_keyword

TEXT = "The Ridgeline 2 tent weighs 1.9 kg; its fly is 70D ripstop nylon with taped seams."


@contextlib.contextmanager
def deprecations_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        yield


def embed_everything(encoder) -> None:
    encoder.encode_queries(["light tent for wind"], ["focus on durability"])
    encoder.encode_documents([TEXT])
    encode_instructions(encoder, TEXT, ["focus on weight", "focus on packed size"])  # the packed shared-prefix path


def test_tiny_model_embeds_without_deprecated_calls(tiny_model_dir):
    with deprecations_are_errors():
        encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=4, max_length=64)
        embed_everything(encoder)


@pytest.mark.slow
def test_default_model_loads_and_embeds_without_deprecated_calls():
    with deprecations_are_errors():
        # The shipped LLM (its LoRA through peft, transformers), whichever layout the default has.
        encoder = InstEmbEncoder.from_pretrained(shipped_llm_folder(), device="cpu")
        embed_everything(encoder)


def test_cache_keyword_follows_the_installed_signature():
    class BeforeRename:  # transformers < 5.24
        def forward(self, inputs_embeds=None, past_key_values=None, use_cache=None, **kwargs): ...

    class AfterRename:  # transformers >= 5.24
        def forward(self, inputs_embeds=None, cache=None, use_cache=None, **kwargs): ...

    assert cache_keyword(BeforeRename) == "past_key_values"
    assert cache_keyword(AfterRename) == "cache"
