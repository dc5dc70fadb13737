"""``distance``: clicks away from the region's boundary (RClicks' distance-transform baseline)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.prompters.clickability._common import boundary_distance
from intrabench.registry import clickability


@clickability.register
class DistanceClickability(ClickabilityModel):
    """Weight ``d ** exponent``, d the Euclidean distance in mm from the voxel to the nearest
    voxel outside the region (on the slice for 2D clicks, in the volume for 3D clicks).

    ``exponent`` 1 is RClicks' distance baseline; 0 is uniform; larger values concentrate
    clicks on the medial axis (the baseline strategy's centre click is the limit). The weight
    peaks on the region's medial axis, where the distance is largest.
    """

    name: ClassVar[str] = "distance"
    description: ClassVar[str] = "weight = (distance to the region's boundary, mm) ** exponent"

    def __init__(self, exponent: float = 1.0) -> None:
        if not exponent >= 0:
            raise ValueError(f"exponent must be >= 0, got {exponent}")
        self.exponent = float(exponent)

    def weights(self, region: ClickRegion) -> np.ndarray:
        """Unnormalised click weights: the distance to the region's boundary in mm to the power
        ``exponent``, float64 of the mask's shape, 0 outside it.

        Args:
            region: The region to click in: bool (y, x) or (z, y, x) mask, spacing in mm.

        Returns:
            The weights (1 inside the mask for ``exponent`` 0).
        """
        distance = boundary_distance(region.mask, region.spacing)
        if self.exponent == 0:
            return region.mask.astype(np.float64)
        return np.where(region.mask, distance**self.exponent, 0.0)
