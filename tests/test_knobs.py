"""The query-time knobs' declarations (knobs.py): the routes that take them, one range, one default,
and the refusals every entry gives, read from them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from instemb_rag.encoder.composed.routes import EffectQueries, LLMQueries, TwoSpacesQueries
from instemb_rag.encoder.protocol import query_knob, query_knobs
from instemb_rag.knobs import INSTRUCTION_STRENGTH, KNOBS, LLM_WEIGHT, KnobError, check_knobs
from instemb_rag.queries import Query, QueryKnobs


def test_each_query_route_declares_the_knobs_it_takes_and_its_field_defaults_to_the_declaration():
    assert TwoSpacesQueries.knobs == (LLM_WEIGHT,) and EffectQueries.knobs == (INSTRUCTION_STRENGTH,)
    assert LLMQueries.knobs == ()
    assert TwoSpacesQueries().llm_weight == LLM_WEIGHT.default
    assert EffectQueries().instruction_strength == INSTRUCTION_STRENGTH.default
    with pytest.raises(KnobError, match="between 0 and 10"):  # a folder's own value: the same range
        EffectQueries(instruction_strength=INSTRUCTION_STRENGTH.high + 1)


@pytest.mark.parametrize("knob", list(KNOBS.values()), ids=list(KNOBS))
def test_a_range_error_names_the_bound_once(knob):
    bad = knob.high + 7.25
    with pytest.raises(KnobError) as caught:
        QueryKnobs.checked({knob.name: bad})
    message = str(caught.value)
    assert caught.value.knob == knob.name and message.startswith(f"{knob.name}={bad!r}: give {knob.meaning}")
    assert message.count(f"between {knob.low:g} and {knob.high:g}") == 1
    assert f"[{knob.low:g}, {knob.high:g}]" not in message  # the range said once, not twice


def test_the_knobs_pass_as_one_mapping_or_by_name_alike():
    name = INSTRUCTION_STRENGTH.name
    assert QueryKnobs.checked({name: 2}) == QueryKnobs.checked(**{name: 2}) == {name: 2.0}
    assert QueryKnobs.checked({name: None}) == QueryKnobs() == {}
    query = Query.checked("which tent?", None, knobs={name: 2})
    assert query.knobs == {name: 2.0} and getattr(query.knobs, name) == 2.0
    with pytest.raises(
        KnobError, match="'temperature' is not a query-time knob: the knobs are llm_weight, instruction"
    ):
        check_knobs({"temperature": 0.5})


@pytest.mark.parametrize("knob", list(KNOBS.values()), ids=list(KNOBS))
def test_a_knob_given_to_a_model_without_it_is_refused_in_the_declarations_words(knob):
    other = next(each for each in KNOBS.values() if each is not knob)
    model = SimpleNamespace(**{f"takes_{other.name}": True})
    assert query_knobs(model) == (other.name,) and query_knob(model) == other.name
    with pytest.raises(KnobError) as caught:
        QueryKnobs.checked({knob.name: knob.low}).require(model)
    # The query service's one wording (queries.refused_knob), for this model rather than an index's.
    assert str(caught.value) == (
        f"{knob.name} ({knob.option}) {knob.sets}, but this model is {other.model}, whose query-time knob is "
        f"{other.name} ({other.option}). Drop the option, or set {other.name} ({other.option}) instead."
    )
    assert caught.value.code == f"{knob.name}_unsupported"


@pytest.mark.parametrize("knob", list(KNOBS.values()), ids=list(KNOBS))
def test_the_model_card_and_the_request_schema_list_the_knobs_from_the_declarations(knob):
    from instemb_rag.serve.routes import knob_cards
    from instemb_rag.serve.schemas import ModelCard, SearchRequest

    model = SimpleNamespace(**{f"takes_{knob.name}": True}, knob_default=lambda name: 0.25)
    cards = knob_cards(model)
    assert set(cards) == set(KNOBS) and cards[knob.name] == {"default": 0.25, "minimum": knob.low, "maximum": knob.high}
    assert all(card is None for name, card in cards.items() if name != knob.name)
    assert knob.meaning in ModelCard.model_fields[knob.name].description
    assert knob.meaning in SearchRequest.model_fields[knob.name].description
    with pytest.raises(ValueError, match=f"between {knob.low:g} and {knob.high:g}"):
        SearchRequest(query="which tent?", **{knob.name: knob.high + 1})
