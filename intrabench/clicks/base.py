"""The clickability-model protocol: where, in a region, a person is likely to click.

Array conventions: a region is a boolean array of 2 axes (y, x: a click on the axial slice
the user looks at) or 3 axes (z, y, x: a click in the volume), cropped with a margin around
its voxels so that its boundary lies inside the array. ``spacing`` is in mm per axis, in the
same order. Every other array of a :class:`ClickRegion` has the region's shape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

RegionKind = Literal["target", "false_negative", "false_positive"]


@dataclass(eq=False)
class ClickRegion:
    """What a clickability model sees of one click.

    ``mask``: the voxels the user may click (the target for an initial click; the error
    component being corrected). ``kind``: which of those it is. ``target``: the ground truth
    on the same crop (what the user wants segmented). ``image``: intensities on the crop
    (NaN where the simulated user was not given the image), or None when the model did not
    ask for the image (``needs_image``). ``origin``, ``identity`` and ``step`` place the
    region in the run (recorded clicks are looked up by them).
    """

    mask: np.ndarray
    spacing: tuple[float, ...]
    kind: RegionKind = "target"
    target: np.ndarray | None = None
    image: np.ndarray | None = None
    #: full-volume (z, y, x) index of the crop's first voxel (for a 2D region, z is its slice)
    origin: tuple[int, int, int] = (0, 0, 0)
    #: (dataset, case, target) of the episode, and its step (0: the initial prompt)
    identity: tuple[str, str, str] = ("", "", "")
    step: int = 0

    def __post_init__(self) -> None:
        self.mask = np.asarray(self.mask, dtype=bool)
        if self.mask.ndim not in (2, 3):
            raise ValueError(f"a click region has 2 or 3 axes, got {self.mask.ndim}")
        if len(self.spacing) != self.mask.ndim:
            raise ValueError(f"spacing {self.spacing} does not fit a {self.mask.ndim}D region")
        for name in ("target", "image"):
            value = getattr(self, name)
            if value is not None and value.shape != self.mask.shape:
                raise ValueError(f"{name} has shape {value.shape}, the region {self.mask.shape}")


class ClickabilityModel(ABC):
    """A distribution of clicks over a region (RClicks' clickability map, section 4).

    Register implementations with ``@intrabench.registry.clickability.register`` or the entry
    point group ``intrabench.clickability``; configs name them under ``robustness:
    clickability:``.
    """

    name: ClassVar[str] = ""
    #: whether :attr:`ClickRegion.image` must be filled (the simulated user then carries a
    #: crop of the image around the target)
    needs_image: ClassVar[bool] = False
    #: a one-line description for listings and docs
    description: ClassVar[str] = ""

    @abstractmethod
    def weights(self, region: ClickRegion) -> np.ndarray:
        """Non-negative, finite float64 weights of the region's shape, zero outside
        ``region.mask``; proportional to the probability of each voxel being clicked (they
        are normalised by the caller). All-zero weights fall back to a uniform distribution.

        Args:
            region: The region to click in: its bool (y, x) or (z, y, x) mask, spacing in mm
                and, where asked for, the target and image on the same crop.

        Returns:
            Float64 weights of ``region.mask``'s shape.
        """

    def weights_and_source(self, region: ClickRegion) -> tuple[np.ndarray, str]:
        """:meth:`weights` and which map gave them: this model's name, or, for a model that
        hands some regions to another (``recorded`` without clicks there), ``fallback:<its
        name>``. Runs count the fallbacks (``click_map_fallbacks`` in the results).

        Args:
            region: The region to click in, as for :meth:`weights`.

        Returns:
            (weights, source): the weights as :meth:`weights` gives them, and the map's name.
        """
        return self.weights(region), self.name


def probabilities(
    model: ClickabilityModel, region: ClickRegion, sources: Counter | None = None
) -> np.ndarray:
    """``model``'s weights on ``region`` checked and normalised to sum 1 (float64); the map
    that gave them is counted in ``sources`` (see :meth:`ClickabilityModel.weights_and_source`).

    Raises ValueError for weights of the wrong shape, negative or non-finite weights; weights
    outside the region are dropped; all-zero weights become uniform over the region.

    Args:
        model: The clickability model.
        region: The region to click in (bool (y, x) or (z, y, x) mask, spacing in mm).
        sources: A counter of the maps used, updated in place; None to count nothing.

    Returns:
        Float64 probabilities of the region's shape, 0 outside ``region.mask``, summing to 1.

    Raises:
        ValueError: As above, or the region has no voxel.
    """
    weights, source = model.weights_and_source(region)
    if sources is not None:
        sources[source] += 1
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != region.mask.shape:
        raise ValueError(
            f"clickability model '{model.name}' returned weights of shape "
            f"{weights.shape} for a region of shape {region.mask.shape}"
        )
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError(
            f"clickability model '{model.name}' returned negative or non-finite weights"
        )
    weights = np.where(region.mask, weights, 0.0)
    total = weights.sum()
    if total <= 0:
        weights = region.mask.astype(np.float64)
        total = weights.sum()
    if total <= 0:
        raise ValueError("a click region needs at least one voxel")
    return weights / total
