"""Clickability maps from clicks people made (RClicks section 4.3), in mm on 2D or 3D grids.

Given where people clicked and the region they were asked to click (the error mask):

1. start from zeros; 2. add one at every clicked voxel; 3. smooth with a Gaussian of
``click_sigma_mm`` (the density of clicks around the observed ones); 4. multiply by the error
mask smoothed with a Gaussian of ``error_sigma_mm`` (a soft mask: clicks just outside the
outline stay possible, as RClicks counted clicks near the border as valid); 5. divide by the
sum. Sigmas are in mm and turned into voxels per axis with the grid's spacing (RClicks gives
them in pixels: 1% of the image diagonal for the error mask, and chose the click sigma by an
ablation; docs/realistic-clicks.md says what we chose and why).

Arrays: ``shape`` and ``error_mask`` (z, y, x) or (y, x); clicks are (N, ndim) integer indices
in the same order; ``spacing`` in mm per axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage


def map_from_clicks(
    clicks: np.ndarray | Sequence[Sequence[int]],
    error_mask: np.ndarray,
    spacing: Sequence[float] | None = None,
    click_sigma_mm: float = 5.0,
    error_sigma_mm: float = 2.0,
) -> np.ndarray:
    """The clickability map (float64, sums to 1) of ``clicks`` on ``error_mask``'s grid.

    Clicks outside the grid raise ValueError; a map that vanishes (no click near the error
    mask) raises ValueError too: it carries no information about this region.

    Args:
        clicks: Observed clicks, (N, ndim) voxel indices on ``error_mask``'s grid ((y, x) or
            (z, y, x)).
        error_mask: The bool region the clicks were made in.
        spacing: Voxel spacing in mm per axis, same order; None for 1 mm.
        click_sigma_mm: The Gaussian's sigma around each click, in mm.
        error_sigma_mm: The sigma that softens the error mask, in mm.

    Returns:
        The map, float64 of ``error_mask``'s shape.

    Raises:
        ValueError: No click, a click outside the grid, or no click near the error mask.
    """
    error_mask = np.asarray(error_mask, dtype=bool)
    spacing = np.ones(error_mask.ndim) if spacing is None else np.asarray(spacing, dtype=float)
    points = np.asarray(clicks, dtype=np.int64).reshape(-1, error_mask.ndim)
    if len(points) == 0:
        raise ValueError("map_from_clicks needs at least one click")
    if ((points < 0) | (points >= np.array(error_mask.shape))).any():
        raise ValueError(f"clicks outside the grid of shape {error_mask.shape}")
    counts = np.zeros(error_mask.shape, dtype=np.float64)
    np.add.at(counts, tuple(points.T), 1.0)
    density = ndimage.gaussian_filter(
        counts, click_sigma_mm / spacing, mode="constant", truncate=4.0
    )
    soft = ndimage.gaussian_filter(
        error_mask.astype(np.float64), error_sigma_mm / spacing, mode="constant", truncate=4.0
    )
    clickability = density * soft
    total = clickability.sum()
    if not total > 0:
        raise ValueError("no click lies near the error mask: the map is empty")
    return clickability / total
