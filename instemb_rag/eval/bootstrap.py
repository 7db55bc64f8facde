"""Bootstrap 95 % intervals for dev figures: resample the evaluated items (queries, stance
records, STS pairs) with replacement and take the 2.5th and 97.5th percentiles of the statistic.
With a few hundred items a difference smaller than these intervals is not a finding."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

RESAMPLES = 1000


def bootstrap_interval(
    values: Sequence[float] | None = None,
    *,
    statistic: Callable[[np.ndarray], float] | None = None,
    size: int | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[float]:
    """[low, high] of the statistic over resampled items.

    Either ``values`` (per-item scores; the statistic is their mean) or ``statistic`` (called with
    an index array into the ``size`` items, for figures that are not means, such as Spearman)."""
    if statistic is None:
        items = np.asarray(values, dtype=float)
        size = len(items)

        def statistic(index: np.ndarray) -> float:
            return float(items[index].mean())

    if not size:
        raise ValueError("bootstrap_interval needs at least one item")
    generator = np.random.default_rng(seed)
    draws = np.array([statistic(generator.integers(0, size, size)) for _ in range(resamples)])
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def intervals_for(per_item: dict[str, Sequence[float]], seed: int = 0) -> dict[str, list[float]]:
    """One interval per metric that has per-item scores whose mean is the metric."""
    return {name: bootstrap_interval(values, seed=seed) for name, values in per_item.items() if len(values)}
