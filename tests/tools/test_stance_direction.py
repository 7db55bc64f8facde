"""The stance-direction probe: finds a planted direction, reports chance where there is none,
and reads the eval's own claim splits."""

from __future__ import annotations

import numpy as np
import pytest

from tools.diagnostics.stance_direction import (
    claims_with_both_stances,
    mean_direction_probe,
    stance_differences,
)


def _differences(rng, count: int, planted: np.ndarray | None) -> np.ndarray:
    noise = rng.normal(size=(count, 32))
    return noise if planted is None else noise + 3.0 * planted


def test_probe_finds_a_planted_direction_and_reports_chance_without_one():
    rng = np.random.default_rng(0)
    planted = np.zeros(32)
    planted[3] = 1.0
    owners = [f"claim{i // 2}" for i in range(400)]
    found = mean_direction_probe(_differences(rng, 300, planted), _differences(rng, 400, planted), owners)
    assert found["heldout_accuracy"] > 0.95 and found["heldout_claims"] == 200
    absent = mean_direction_probe(_differences(rng, 300, None), _differences(rng, 400, None), owners)
    low, high = absent["heldout_interval"]
    assert 0.4 < absent["heldout_accuracy"] < 0.6 and low < 0.5 < high


def test_probe_refuses_differences_that_cancel():
    with pytest.raises(ValueError, match="average to zero"):
        mean_direction_probe(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.ones((1, 2)), ["a"])


def test_probe_reads_held_out_claims_of_the_dev_figure(tiny_encoder, shared_data_dir_or_skip):
    heldout = claims_with_both_stances(shared_data_dir_or_skip, "heldout")
    train = claims_with_both_stances(shared_data_dir_or_skip, "train")
    assert heldout and train and not set(heldout) & set(train)
    few = dict(list(heldout.items())[:3])
    differences, owners = stance_differences(tiny_encoder, few)
    pairs = sum(len(labels["SUPPORTS"]) * len(labels["REFUTES"]) for labels in few.values())
    assert differences.shape == (pairs, tiny_encoder.dimension) and set(owners) == set(few)
