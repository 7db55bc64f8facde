"""The one registry of data sources: a source is added here, under the products it yields.

A development set under the data root (``paths.data_root()``) can give three products:

- ``RECORD_SETS``: training records (text, instruction, output) for the look-ahead trainer
  (`build-data`, ``data.build_sets``; builders.py splits and caps them);
- ``ITEM_SOURCES``: embedding items (queries with instructions, passages) a geometry run embeds
  with a sentence-encoder teacher (`build-distill-texts`; geometry_texts.py);
- ``FACET_SOURCES``: facet groups (a subject, a passage per aspect; `build-facet-groups`;
  facet_sources/build.py).

A new source is one reader function (in the module of its kind) and one entry here. An item
source names the record sets whose held-out split it must respect (``splits``), so no text a
dev figure scores is embedded in training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .contrast_sets import (
    build_climate_fever_stance,
    build_medquad_facets,
    build_nli_pairs,
    build_scifact_stance_counterfactual,
    build_stance_pairs,
)
from .facet_sources.argkp import read_argkp
from .facet_sources.drafts import SubjectDraft
from .facet_sources.factbook import read_factbook
from .facet_sources.fnc1 import read_fnc1
from .facet_sources.references import read_manpages, read_numpy_scipy, read_powershell
from .facet_sources.reviews import read_absa, read_subjqa
from .facet_sources.stance import read_perspectrum
from .generic_sets import build_covid_qa, build_race
from .geometry_sources import (
    ReadContext,
    ReadResult,
    read_climate_fever,
    read_condaqa,
    read_covid_qa,
    read_medquad,
    read_msmarco,
    read_pubmedqa,
    read_race,
    read_scifact,
    read_sick,
    read_stsb,
    read_vaswani,
)
from .grouped import GroupedRecord
from .qa_sets import (
    build_condaqa,
    build_msmarco_passages,
    build_msmarco_qa,
    build_pubmedqa,
    build_scifact_stance,
    build_scifact_stance_query,
    scifact_stance_rows,
)

__all__ = ["FACET_SOURCES", "ITEM_SOURCES", "RECORD_SETS", "FacetSource", "ItemSource", "RecordSet"]


@dataclass(frozen=True)
class RecordSet:
    folder: str  # under the data root ("" = the root itself, for builders that read several folders)
    build: Callable[[Path], list[GroupedRecord]]
    # Held-out share of groups when it must differ from data.heldout_fraction: Climate-FEVER has
    # only 154 claims with both stances, and its dev figure needs more than 15 of them.
    heldout_fraction: float | None = None


@dataclass(frozen=True)
class ItemSource:
    folder: str  # under the data root
    files: tuple[str, ...]
    read: Callable[[Path, ReadContext], ReadResult]
    splits: tuple[str, ...] = ()  # RECORD_SETS whose held-out split the items respect


@dataclass(frozen=True)
class FacetSource:
    folder: str  # under the data root
    file: str
    read: Callable[[Path], list[SubjectDraft]]


RECORD_SETS: dict[str, RecordSet] = {
    "msmarco_qa": RecordSet("msmarco_qa", build_msmarco_qa),
    "msmarco_passages": RecordSet("msmarco_qa", build_msmarco_passages),
    "pubmedqa": RecordSet("pubmedqa", build_pubmedqa),
    "condaqa": RecordSet("condaqa", build_condaqa),
    "scifact_stance": RecordSet("scifact", build_scifact_stance),
    "scifact_stance_query": RecordSet("scifact", build_scifact_stance_query),
    "scifact_stance_counterfactual": RecordSet(
        "scifact", lambda folder: build_scifact_stance_counterfactual(folder, scifact_stance_rows)
    ),
    "medquad_facets": RecordSet("medquad", build_medquad_facets),
    "climate_fever_stance": RecordSet("climate_fever", build_climate_fever_stance, heldout_fraction=0.3),
    "nli_pairs": RecordSet("", build_nli_pairs),
    "stance_pairs": RecordSet("", build_stance_pairs),
    "race": RecordSet("race", build_race),
    "covid_qa": RecordSet("covid_qa", build_covid_qa),
}

ITEM_SOURCES: dict[str, ItemSource] = {
    "msmarco": ItemSource("msmarco_qa", ("corpus.jsonl", "queries.jsonl", "qrels.tsv"), read_msmarco, ("msmarco_qa",)),
    "race": ItemSource("race", ("race_articles.jsonl",), read_race, ("race",)),
    "medquad": ItemSource("medquad", ("medquad_qa.jsonl",), read_medquad, ("medquad_facets",)),
    "covid_qa": ItemSource("covid_qa", ("covid_qa.json",), read_covid_qa, ("covid_qa",)),
    "pubmedqa": ItemSource("pubmedqa", ("pqal.jsonl",), read_pubmedqa, ("pubmedqa",)),
    "scifact": ItemSource(
        "scifact", ("corpus.jsonl", "qrels.tsv", "stance.jsonl"), read_scifact, ("scifact_stance_query",)
    ),
    "vaswani": ItemSource("vaswani", ("corpus.jsonl", "queries.jsonl", "qrels.tsv"), read_vaswani),
    "climate_fever": ItemSource(
        "climate_fever", ("climate-fever.jsonl",), read_climate_fever, ("climate_fever_stance",)
    ),
    "condaqa": ItemSource("condaqa", ("dev.jsonl",), read_condaqa, ("condaqa",)),
    "sick": ItemSource("sick", ("SICK.txt",), read_sick, ("nli_pairs", "stance_pairs")),
    # STS-B and SICK share caption sentences
    "stsb": ItemSource("stsb", ("train.jsonl", "dev.jsonl"), read_stsb, ("nli_pairs", "stance_pairs")),
}

FACET_SOURCES: dict[str, FacetSource] = {
    "absa": FacetSource("facets_general", "absa16_restaurants_laptops.jsonl", read_absa),
    "subjqa": FacetSource("facets_general", "subjqa_reviews.jsonl", read_subjqa),
    "manpages": FacetSource("facets_general", "manpages.jsonl", read_manpages),
    "numpy_scipy": FacetSource("facets_general", "numpy_scipy_docstrings.jsonl", read_numpy_scipy),
    "powershell": FacetSource("facets_general", "powershell_cmdlets.jsonl", read_powershell),
    "factbook": FacetSource("facets_general", "factbook_fields.jsonl", read_factbook),
    "perspectrum": FacetSource("stance_args", "perspectrum.jsonl", read_perspectrum),
    "argkp": FacetSource("stance_args", "argkp.jsonl", read_argkp),
    "fnc1": FacetSource("stance_args", "fnc1_stances.jsonl", read_fnc1),  # and fnc1_bodies.jsonl beside it
}
