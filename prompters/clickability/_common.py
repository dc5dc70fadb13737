"""Helpers shared by the built-in clickability models (arrays as in :mod:`intrabench.clicks.base`)."""

from __future__ import annotations

import numpy as np

from intrabench.masks.distance import distance_transform


def boundary_distance(mask: np.ndarray, spacing: tuple[float, ...]) -> np.ndarray:
    """Distance in mm of every voxel of ``mask`` to the nearest voxel outside it (the array's
    border counts as outside: one background voxel of padding), 0 outside; float64."""
    padded = np.pad(np.asarray(mask, dtype=bool), 1)
    distance = distance_transform(padded, spacing)
    return distance[tuple(slice(1, -1) for _ in range(mask.ndim))]
