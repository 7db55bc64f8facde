"""The group-fit diagnostic: labels read back from the builders' sources, competitors chosen
within a group, scores that follow the embedding geometry."""

from __future__ import annotations

import numpy as np

from instemb_rag.datasets.contrast_sets import build_climate_fever_stance, contrast_label
from instemb_rag.datasets.records import TrainingRecord
from tools.diagnostics.group_fit import (
    competing_pairs,
    contrast_groups,
    sample_groups,
    score_groups,
    summarise,
)


def _record(text, output, source, group, instruction="which one?"):
    return TrainingRecord(text=text, instruction=instruction, output=output, source=source, group=group)


def test_labels_are_read_back_from_each_builders_source():
    assert contrast_label("climate_fever_stance:1751:SUPPORTS:2") == ("climate_fever_stance", "SUPPORTS")
    assert contrast_label("medquad_facets:graves' disease: type 2:causes") == ("medquad_facets", "causes")
    assert contrast_label("nli_pairs:contradiction") == ("nli_pairs", "contradiction")
    # one abstract for the claim and its negation: no competing output, so no label
    assert contrast_label("scifact_stance_counterfactual:1209:4347374") is None
    assert contrast_label("race:12:3") is None


def test_real_climate_records_carry_their_stance(shared_data_dir_or_skip):
    records = [grouped.record for grouped in build_climate_fever_stance(shared_data_dir_or_skip / "climate_fever")]
    labels = {contrast_label(record.source)[1] for record in records}
    assert labels == {"SUPPORTS", "REFUTES"}


def test_competitors_are_other_labels_of_the_same_text():
    members = [
        (_record("claim", "s1", "x", "g"), "SUPPORTS"),
        (_record("claim", "s2", "x", "g"), "SUPPORTS"),
        (_record("claim", "r1", "x", "g"), "REFUTES"),
        (_record("another premise", "r2", "x", "g"), "REFUTES"),
    ]
    # s1 and s2 are both right for "supports"; the other premise's hypothesis answers another query
    assert competing_pairs(members) == [(0, [2]), (1, [2]), (2, [0, 1])]


class KnownGeometry:
    """Queries and documents placed by hand, so the expected ranking is known."""

    def __init__(self, queries: dict, documents: dict):
        self.queries, self.documents = queries, documents

    def encode_queries(self, texts, instructions):
        return np.array([self.queries[(text, instruction)] for text, instruction in zip(texts, instructions)])

    def encode_documents(self, texts):
        return np.array([self.documents[text] for text in texts])


def test_scores_follow_the_geometry_and_summarise_per_set_and_label():
    records = [
        _record("c1", "c1 support", "climate_fever_stance:1:SUPPORTS:0", "g1", "support"),
        _record("c1", "c1 refute", "climate_fever_stance:1:REFUTES:0", "g1", "refute"),
        _record("c2", "c2 support", "climate_fever_stance:2:SUPPORTS:0", "g2", "support"),
        _record("c2", "c2 refute", "climate_fever_stance:2:REFUTES:0", "g2", "refute"),
        _record("other", "unlabelled", "race:1:0", "g3"),
        _record("c3", "c3 support", "climate_fever_stance:3:SUPPORTS:0", "g4", "support"),  # one stance: no rival
    ]
    up, right = [1.0, 0.0], [0.0, 1.0]
    encoder = KnownGeometry(
        # every query points at the supporting sentence, whatever the instruction: support wins, refute loses
        {(f"c{i}", ins): up for i in (1, 2) for ins in ("support", "refute")},
        {"c1 support": up, "c2 support": up, "c1 refute": right, "c2 refute": right},
    )
    groups = contrast_groups(records)
    assert set(groups) == {("climate_fever_stance", "g1"), ("climate_fever_stance", "g2")}
    assert contrast_groups(records, {"nli_pairs"}) == {}
    summary = summarise(score_groups(encoder, groups))["climate_fever_stance"]
    assert summary["SUPPORTS"]["mean"] == 1.0 and summary["REFUTES"]["mean"] == 0.0
    assert summary["all"]["mean"] == 0.5 and summary["all"]["groups"] == 2


def test_a_sample_keeps_at_most_the_asked_groups_of_each_set():
    groups = {("a", f"g{i}"): [] for i in range(10)} | {("b", "g0"): []}
    sampled = sample_groups(groups, 3, seed=0)
    assert sum(key[0] == "a" for key in sampled) == 3 and ("b", "g0") in sampled
    assert sample_groups(groups, 3, seed=0) == sampled
    assert len(sample_groups(groups, None, seed=0)) == 11


def test_a_real_encoder_scores_each_record_against_its_rival(tiny_encoder):
    records = [
        _record("c1", "sea level rose", "climate_fever_stance:1:SUPPORTS:0", "g1", "support"),
        _record("c1", "sea level fell", "climate_fever_stance:1:REFUTES:0", "g1", "refute"),
    ]
    scores = score_groups(tiny_encoder, contrast_groups(records))[("climate_fever_stance", "g1")]
    # one rival each: every record either beats it or not
    assert set(scores) == {"SUPPORTS", "REFUTES"} and set(scores.values()) <= {0.0, 1.0}
