"""``uniform``: every voxel of the region equally likely (RClicks' uniform baseline)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.registry import clickability


@clickability.register
class UniformClickability(ClickabilityModel):
    """Weight 1 on every voxel of the region."""

    name: ClassVar[str] = "uniform"
    description: ClassVar[str] = "every voxel of the region equally likely"

    def weights(self, region: ClickRegion) -> np.ndarray:
        """Uniform click weights: 1.0 inside the region mask, 0.0 outside (float64, the mask's
        shape).

        Args:
            region: The region to click in (only its mask is read).

        Returns:
            The weights.
        """
        return region.mask.astype(np.float64)
