"""instemb_rag.queries and knobs: a query's inputs, checked once where they enter (no model needed)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from instemb_rag.errors import InstEmbError
from instemb_rag.knobs import KnobError
from instemb_rag.queries import EmptyQueryError, Query, QueryKnobs

TWO_SPACES = SimpleNamespace(takes_llm_weight=True)
EFFECT = SimpleNamespace(takes_instruction_strength=True)
ONE_SPACE = SimpleNamespace()


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, True, "0.5"])
def test_an_llm_weight_out_of_range_is_refused_naming_its_range(bad):
    with pytest.raises(KnobError, match="llm_weight=.*between 0 and 1") as caught:
        QueryKnobs.checked(llm_weight=bad)
    assert caught.value.knob == "llm_weight" and caught.value.code is None
    assert isinstance(caught.value, InstEmbError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("bad", [10.5, -1, math.inf, math.nan, "strong"])
def test_an_instruction_strength_out_of_range_is_refused_naming_its_range(bad):
    with pytest.raises(KnobError, match=r"instruction_strength=.*: give .*, a number between 0 and 10 \("):
        QueryKnobs.checked(instruction_strength=bad)


def test_knobs_in_range_are_floats_and_given_only_when_set():
    knobs = QueryKnobs.checked(llm_weight=1, instruction_strength=None)
    assert knobs == QueryKnobs(1.0, None) and knobs.given() == {"llm_weight": 1.0}
    assert QueryKnobs().given() == {}
    assert QueryKnobs(None, 2.0).or_else(QueryKnobs(0.3, 1.0)) == QueryKnobs(0.3, 2.0)


def test_a_knob_the_model_lacks_is_refused_naming_the_models_own():
    assert QueryKnobs(0.4).require(TWO_SPACES) == QueryKnobs(0.4)
    assert QueryKnobs().require(ONE_SPACE) == QueryKnobs()
    with pytest.raises(
        KnobError, match="instruction-effect model, whose query-time knob is instruction_strength"
    ) as caught:
        QueryKnobs(llm_weight=0.4).require(EFFECT)
    assert caught.value.code == "llm_weight_unsupported"
    with pytest.raises(KnobError, match="is not an instruction-effect model: it ranks by one space") as caught:
        QueryKnobs(instruction_strength=1.0).require(ONE_SPACE)
    assert caught.value.knob == "instruction_strength" and caught.value.code == "instruction_strength_unsupported"
    assert QueryKnobs(llm_weight=0.4).refused_by(ONE_SPACE) == "llm_weight"


def test_a_query_is_checked_once_as_it_enters():
    query = Query.checked("which tent ?", "  ", llm_weight=0.2)
    assert query == Query("which tent ?", None, QueryKnobs(0.2))
    assert Query.checked("which tent ?", " focus on weight ").instruction == " focus on weight "
    with pytest.raises(EmptyQueryError, match=r'^The query is empty: give the text to search for, e.g. x "y"\.$'):
        Query.checked(" \n", example='x "y"')
    with pytest.raises(InstEmbError, match="string or None, not int"):
        Query.checked("which tent ?", 3)


def test_texts_of_an_embedding_call_are_checked_by_one_validator():
    """check_texts: what the LlamaIndex embedding takes as queries and documents (its empty query is
    Query.checked's, the one message of the CLI, the server and Index.search)."""
    from instemb_rag.queries import check_texts

    check_texts(["which tent ?", "a tent \u00e9 ."], "query")
    check_texts(["", "  "], "document")  # an empty document is embedded, as LlamaIndex asks
    with pytest.raises(EmptyQueryError, match=r"^The query is empty: give the text to search for\.$"):
        check_texts([" \n"])
    with pytest.raises(EmptyQueryError, match=r"\(query #1\)\.$"):
        check_texts(["which tent ?", ""])
    with pytest.raises(InstEmbError, match=r"^The document #1 is bytes, not a string \(decode bytes first"):
        check_texts(["a tent .", b"a stove ."], "document")
    with pytest.raises(InstEmbError, match=r"query #0 is not valid Unicode: .*'\\udce9'\) at character 2"):
        check_texts(["a \udce9"])
