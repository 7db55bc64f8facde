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


def intervals_for(
    per_item: dict[str, Sequence[float]], seed: int = 0, clusters: dict[str, Sequence] | None = None
) -> dict[str, list[float]]:
    """One interval per metric that has per-item scores whose mean is the metric. Where
    ``clusters[metric]`` groups some items together (one claim asked under both stances), whole
    groups are resampled (clustered_interval); otherwise single items."""
    intervals = {}
    for name, values in per_item.items():
        if not len(values):
            continue
        groups = (clusters or {}).get(name)
        if groups is not None and len(set(groups)) < len(groups):
            intervals[name] = clustered_interval(values, groups, seed=seed)
        else:
            intervals[name] = bootstrap_interval(values, seed=seed)
    return intervals


def cluster_bootstrap_means(
    values: Sequence[float],
    clusters: Sequence | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> np.ndarray:
    """Means of ``values`` over ``resamples`` draws that resample whole clusters with replacement.

    Items of one cluster (the instructions of one facet group: the same query, the same passages)
    are not independent; resampling clusters keeps their correlation, so the interval is honest
    where resampling single items would be too narrow. ``clusters=None``: every item alone."""
    items = np.asarray(values, dtype=float)
    if not items.size:
        raise ValueError("cluster_bootstrap_means needs at least one item")
    labels = np.arange(items.size) if clusters is None else np.asarray(clusters)
    if labels.shape != items.shape:
        raise ValueError(f"one cluster label per item: {labels.shape} labels for {items.shape} items")
    _, codes = np.unique(labels, return_inverse=True)
    sums, counts = np.bincount(codes, weights=items), np.bincount(codes)
    picks = np.random.default_rng(seed).integers(0, sums.size, (resamples, sums.size))
    return sums[picks].sum(axis=1) / counts[picks].sum(axis=1)


def clustered_interval(
    values: Sequence[float], clusters: Sequence | None = None, *, resamples: int = RESAMPLES, seed: int = 0
) -> list[float]:
    """[low, high] 95 % interval of the mean of ``values``, resampling clusters (see above)."""
    draws = cluster_bootstrap_means(values, clusters, resamples=resamples, seed=seed)
    low, high = np.percentile(draws, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def paired_gain(
    candidate: Sequence[float],
    baseline: Sequence[float],
    clusters: Sequence | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict:
    """Paired bootstrap of ``mean(candidate) - mean(baseline)`` over the same items, in the same order.

    Returns ``gain`` (the observed difference), ``interval`` (its 95 % bootstrap interval),
    ``above_zero`` (the whole interval lies above zero: the candidate wins beyond resampling
    noise) and ``share_not_above_zero`` (the share of draws where the gain is <= 0, a one-sided
    p-value in spirit). Pairing matters: both systems face the same hard items, so the difference
    varies far less than either score alone."""
    first, second = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"paired scores need the same items: {first.shape} != {second.shape}")
    differences = first - second
    draws = cluster_bootstrap_means(differences, clusters, resamples=resamples, seed=seed)
    low, high = np.percentile(draws, [2.5, 97.5])
    return {
        "gain": round(float(differences.mean()), 4),
        "interval": [round(float(low), 4), round(float(high), 4)],
        "above_zero": bool(low > 0),
        "share_not_above_zero": round(float(np.mean(draws <= 0)), 4),
    }
