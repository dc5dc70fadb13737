"""Statistics of one column that several features use (the attributes' strata, the review's
ratings): a percentile-bootstrap CI of a mean, and Spearman's rho with its p-value (SciPy).
It sits beside the aggregation it builds on and imports no feature's module.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_mean_ci(
    values: np.ndarray, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean of ``values`` (finite ones), resampled with
    replacement ``n_boot`` times (the dataset bootstrap of
    :func:`intrabench.evaluation.aggregate.bootstrap_ci` on one column); NaN for none.

    Args:
        values: One value per case (any unit); NaN and infinite ones are dropped.
        n_boot: The number of resamples.
        seed: The resampling generator's seed.
        confidence: The interval's coverage, in (0, 1).

    Returns:
        (low, high) in the values' unit; NaN when no value is finite.
    """
    from intrabench.evaluation.aggregate import bootstrap_ci

    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    return bootstrap_ci(values[:, None], n_boot=n_boot, confidence=confidence, seed=seed)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, int]:
    """Spearman's rho of the finite pairs, its two-sided p-value and the number of pairs; NaN
    with fewer than three pairs or a constant side.

    Args:
        x: First values; pairs where either value is not finite are dropped.
        y: Second values, as many as ``x``.

    Returns:
        (rho in [-1, 1], p-value, number of finite pairs).
    """
    from scipy import stats

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan"), float("nan"), int(x.size)
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue), int(x.size)
