"""Clicking groups (RClicks section 5): a region's voxels sorted by click probability and cut
into groups of equal probability mass.

The voxels with a positive probability are sorted from the least to the most likely (ties in
an order drawn from the episode's generator, so that equal probabilities carry no raster
order) and laid end to end on [0, 1], each taking an interval as long as its probability.
Group g of G (1-based, G1 = the least likely clicks) is the interval [(g - 1) / G, g / G]:
a voxel whose interval straddles a cut belongs to both groups with the two parts of its
mass. Every group therefore holds exactly 1 / G of the mass, and a click drawn from group g
picks a voxel with probability (its mass in g) * G: proportional to its probability, except
for the two voxels cut at the group's ends.

Arrays: probabilities of any shape (summing to 1); voxel indices returned are flat (C order)
indices into that array.
"""

from __future__ import annotations

import numpy as np


def sorted_candidates(
    probabilities: np.ndarray, rng: np.random.Generator | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(flat indices, their probabilities) of the voxels with positive probability, from
    the least to the most likely; ties in a random order from ``rng`` (C order without).

    Args:
        probabilities: A clickability map of any shape ((y, x) or (z, y, x)), non-negative.
        rng: Breaks ties between equal probabilities; None keeps C order.

    Returns:
        (flat indices int64, probabilities float64), both ascending by probability.
    """
    flat = np.asarray(probabilities, dtype=np.float64).ravel()
    candidates = np.flatnonzero(flat > 0)
    values = flat[candidates]
    tie_break = rng.permutation(len(candidates)) if rng is not None else np.arange(len(candidates))
    order = np.lexsort((tie_break, values))
    return candidates[order], values[order]


def group_shares(sorted_probabilities: np.ndarray, group: int, n_groups: int) -> np.ndarray:
    """The mass each voxel of an ascending ``sorted_probabilities`` has in ``group`` (1-based)
    of ``n_groups``; sums to 1 / n_groups (the probabilities are renormalised to sum 1).

    Args:
        sorted_probabilities: Positive probabilities in ascending order
            (:func:`sorted_candidates`).
        group: The group, 1 (least likely voxels) to ``n_groups`` (most likely).
        n_groups: The number of groups of equal mass.

    Returns:
        Float64 share per voxel, in the input's order (0 outside the group).

    Raises:
        ValueError: ``group`` is outside 1..n_groups, or no probability is positive.
    """
    if not 1 <= group <= n_groups:
        raise ValueError(f"group must be in 1..{n_groups}, got {group}")
    values = np.asarray(sorted_probabilities, dtype=np.float64)
    total = values.sum()
    if total <= 0:
        raise ValueError("no voxel has a positive probability")
    upper = np.cumsum(values) / total
    upper[-1] = 1.0
    lower = np.concatenate([[0.0], upper[:-1]])
    low, high = (group - 1) / n_groups, group / n_groups
    return np.clip(np.minimum(upper, high) - np.maximum(lower, low), 0.0, None)


def group_masses(
    probabilities: np.ndarray, n_groups: int = 10, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The probability mass of each of the ``n_groups`` groups, (n_groups,) float64.

    Args:
        probabilities: A clickability map of any shape, non-negative.
        n_groups: The number of groups of equal mass.
        rng: Breaks ties between equal probabilities; None keeps C order.

    Returns:
        The masses, group 1 first (each 1 / n_groups of the total).
    """
    _, values = sorted_candidates(probabilities, rng)
    return np.array([group_shares(values, g, n_groups).sum() for g in range(1, n_groups + 1)])


def clicking_groups(
    probabilities: np.ndarray, n_groups: int = 10, rng: np.random.Generator | None = None
) -> np.ndarray:
    """A map of the probabilities' shape with the group (1..n_groups) that holds the middle of
    each voxel's mass, 0 where the probability is 0 (to draw the groups, as RClicks' Figure 6).

    Args:
        probabilities: A clickability map of any shape, non-negative.
        n_groups: The number of groups of equal mass.
        rng: Breaks ties between equal probabilities; None keeps C order.

    Returns:
        Int16 group numbers of the probabilities' shape.
    """
    indices, values = sorted_candidates(probabilities, rng)
    out = np.zeros(np.asarray(probabilities).size, dtype=np.int16)
    if len(values):
        middle = (np.cumsum(values) - values / 2.0) / values.sum()
        out[indices] = np.minimum(np.floor(middle * n_groups).astype(np.int64) + 1, n_groups)
    return out.reshape(np.asarray(probabilities).shape)


def sample_from_group(
    probabilities: np.ndarray, group: int, n_groups: int, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` distinct flat voxel indices drawn from ``group`` of ``n_groups`` (fewer when the
    group has fewer voxels), each with probability proportional to its mass in the group.
    The first draw is one ``rng.random()`` inverted on the group's cumulative mass; later
    draws (``n`` > 1) come from ``rng.choice`` without replacement.

    Args:
        probabilities: A clickability map of any shape, non-negative, some positive.
        group: The group to draw from, 1..n_groups (1: the least likely voxels).
        n_groups: The number of groups of equal mass.
        n: How many distinct voxels to draw.
        rng: The generator of the draws (and of the tie order).

    Returns:
        Int64 flat indices into ``probabilities`` (``np.unravel_index`` gives (z, y, x)).
    """
    indices, values = sorted_candidates(probabilities, rng)
    shares = group_shares(values, group, n_groups)
    inside = np.flatnonzero(shares > 0)
    weights = shares[inside] / shares[inside].sum()
    if n == 1:
        position = np.searchsorted(np.cumsum(weights), rng.random() * weights.sum(), side="right")
        return indices[inside[[min(int(position), len(inside) - 1)]]]
    count = min(int(n), len(inside))
    chosen = rng.choice(len(inside), size=count, replace=False, p=weights)
    return indices[inside[chosen]]
