"""``contrast-aware``: an image-conditioned clickability map without a trained network.

RClicks (sections 3-4) observes that people click inside the object, away from its boundary,
on its visually salient part, and avoid the thin or faint parts that a distance transform
alone favours or ignores. This map multiplies three terms, each in (0, 1]:

* **depth**: ``(d / d_max) ** exponent``, d the distance in mm to the region's boundary (as
  ``distance``): clicks away from the outline;
* **edges**: ``1 / (1 + (g / g_ref) ** 2)``, g the gradient magnitude (intensity per mm) of the
  image smoothed with a Gaussian of ``smoothing_mm``, g_ref the median of g over the region
  (the region's own texture): fewer clicks on strong edges inside the region (a lesion's
  rim, a vessel crossing it), where a person's eye does not rest;
* **contrast**: ``1 - exp(-s)``, s = |I - mu| / sigma the smoothed intensity's distance to the
  surroundings in their standard deviations (mu, sigma over a shell of ``shell_mm`` around
  the region): fewer clicks on the faint parts that look like the background.

Voxels without image (NaN: outside the window the simulated user was given) get 1 for the
image terms. Every region voxel keeps at least ``floor`` times the largest weight, so that
the least likely clicking group still exists. Without an image (``needs_image`` unmet) the
map is the depth term alone.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy import ndimage

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.masks.distance import distance_transform
from intrabench.prompters.clickability._common import boundary_distance
from intrabench.registry import clickability


@clickability.register
class ContrastAwareClickability(ClickabilityModel):
    """Depth x edge x contrast terms (see the module docstring)."""

    name: ClassVar[str] = "contrast-aware"
    needs_image: ClassVar[bool] = True
    description: ClassVar[str] = (
        "image-conditioned: away from the boundary, off edges and faint parts"
    )

    def __init__(
        self,
        exponent: float = 1.0,
        smoothing_mm: float = 1.0,
        shell_mm: float = 3.0,
        floor: float = 1e-3,
    ) -> None:
        if not exponent >= 0:
            raise ValueError(f"exponent must be >= 0, got {exponent}")
        if not smoothing_mm >= 0 or not shell_mm > 0:
            raise ValueError("smoothing_mm must be >= 0 and shell_mm > 0")
        if not 0 < floor <= 1:
            raise ValueError(f"floor must be in (0, 1], got {floor}")
        self.exponent = float(exponent)
        self.smoothing_mm = float(smoothing_mm)
        self.shell_mm = float(shell_mm)
        self.floor = float(floor)

    def weights(self, region: ClickRegion) -> np.ndarray:
        """Unnormalised click weights: float64, the region mask's shape, 0 outside the mask.

        Args:
            region: The region to click in: bool (y, x) or (z, y, x) mask, spacing in mm and,
                when given, the image crop (NaN where unknown).

        Returns:
            The weights, at least ``floor`` times the peak inside the mask.
        """
        mask = region.mask
        depth = boundary_distance(mask, region.spacing)
        weights = (depth / depth.max()) ** self.exponent if depth.max() > 0 else mask * 1.0
        if region.image is not None and np.isfinite(region.image[mask]).any():
            weights = weights * self.image_terms(region)
        weights = np.where(mask, weights, 0.0)
        peak = weights.max()
        if peak <= 0:
            return mask.astype(np.float64)
        return np.where(mask, np.maximum(weights, self.floor * peak), 0.0)

    def image_terms(self, region: ClickRegion) -> np.ndarray:
        """The edge and contrast terms multiplied, 1 where the image is missing.

        Args:
            region: The region with its image crop (intensities, NaN where unknown).

        Returns:
            Float64 factors in [0, 1] of the mask's shape.
        """
        mask, spacing = region.mask, np.asarray(region.spacing, dtype=np.float64)
        image = np.asarray(region.image, dtype=np.float64)
        known = np.isfinite(image)
        filled = np.where(known, image, np.nanmedian(image[mask]) if known[mask].any() else 0.0)
        sigma = self.smoothing_mm / spacing
        smooth = ndimage.gaussian_filter(filled, sigma) if self.smoothing_mm > 0 else filled
        gradient = np.sqrt(sum(g**2 for g in np.gradient(smooth, *spacing)))
        inside = mask & known
        reference = float(np.median(gradient[inside])) if inside.any() else 0.0
        if reference > 0:
            edges = 1.0 / (1.0 + (gradient / reference) ** 2)
        else:  # a flat region: only its outline has a gradient
            edges = np.where(gradient > 0, 0.5, 1.0)
        outside = distance_transform(~mask, tuple(spacing))  # to the region, mm
        shell = (~mask) & (outside <= self.shell_mm) & known
        if shell.sum() >= 2:
            mu, spread = float(smooth[shell].mean()), float(smooth[shell].std())
            scale = spread if spread > 0 else max(abs(float(smooth[inside].mean()) - mu), 1e-6)
            contrast = 1.0 - np.exp(-np.abs(smooth - mu) / scale)
        else:
            contrast = np.ones(mask.shape)
        return np.where(known, edges * contrast, 1.0)
