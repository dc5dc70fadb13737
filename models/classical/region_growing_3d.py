"""A classical 3D baseline: seeded region growing with robust intensity statistics (CPU).

The foreground intensity model is the median and MAD of the image in the 3x3x3 neighbourhood
of the first positive seed (the box centre for a box), as interactive region-growing tools fix
the range at the first click and keep it across corrections (it travels in
``Prediction.feedback``); corrections landing on partial-volume rims then cannot widen it.
Voxels within ``multiplier`` robust
standard deviations of that median, inside the ROI (and the 3D box when given), 26-connected to
a positive seed, form the region. Negative clicks carve out the connected part of the region
around them that is nearer (in mm) to them than to any positive seed. A correction adds voxels
only where a new positive click (outside the previous mask) grows them: negative clicks never
add (otherwise the larger ROI of a correction would let the old seed grow further: a kidney
would go from 4,643 to 17,450 voxels on one negative click).
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from intrabench.masks import connected_components
from intrabench.masks.distance import deepest_voxels, nearest_distances
from intrabench.models.classical._classical import (
    VolumeBaseline,
    additions_from_new_positives,
    expand,
    mask_corners,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt


@models.register
class RegionGrowing3D(VolumeBaseline):
    """Seeded 3D region growing with robust (median/MAD) intensity limits inside a prompt ROI."""

    name: ClassVar[str] = "region-growing-3d"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box3d", "scribble", "mask"})

    def __init__(
        self,
        multiplier: float = 2.5,
        context_mm: float = 25.0,
        box_margin_voxels: int = 1,
        min_spread: float = 0.01,
    ) -> None:
        super().__init__()
        self.multiplier = float(multiplier)
        self.context_mm = float(context_mm)
        self.box_margin_voxels = int(box_margin_voxels)
        self.min_spread = float(min_spread)

    def _roi(
        self, prompt: Prompt, points: np.ndarray, previous: np.ndarray | None
    ) -> tuple[slice, slice, slice]:
        shape = self._image.shape
        if prompt.box3d is not None:
            # the box bounds the search, but corrective clicks may land outside it (a refiner
            # clicks where the error is): the ROI grows to hold every click
            b = prompt.box3d
            box = [
                expand(lo, hi, self.box_margin_voxels, shape[a])
                for a, (lo, hi) in enumerate(
                    ((b.z_min, b.z_max), (b.y_min, b.y_max), (b.x_min, b.x_max))
                )
            ]
            low, high = points.min(0), points.max(0)
            return tuple(
                slice(min(lo, int(low[a])), max(hi, int(high[a])) + 1)
                for a, (lo, hi) in enumerate(box)
            )
        lows, highs = [points.min(0)], [points.max(0)]
        corners = mask_corners(previous)
        if corners is not None:
            lows.append(corners[0])
            highs.append(corners[1])
        low, high = np.min(lows, axis=0), np.max(highs, axis=0)
        margins = [int(np.ceil(self.context_mm / s)) for s in self._image.spacing]
        return tuple(
            slice(lo, hi + 1)
            for lo, hi in (
                expand(int(low[a]), int(high[a]), margins[a], shape[a]) for a in range(3)
            )
        )

    @staticmethod
    def _neighbourhood_values(data: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        values = []
        for z, y, x in seeds:
            values.append(
                data[max(0, z - 1) : z + 2, max(0, y - 1) : y + 2, max(0, x - 1) : x + 2].ravel()
            )
        return np.concatenate(values)

    def _limits(self, samples: np.ndarray) -> tuple[float, float]:
        median = float(np.median(samples))
        spread = max(1.4826 * float(np.median(np.abs(samples - median))), self.min_spread)
        return median - self.multiplier * spread, median + self.multiplier * spread

    def _nearer_to(self, near: np.ndarray, far: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Voxels closer (in mm) to a seed of ``near`` than to any seed of ``far``."""
        everywhere = np.ones(shape, dtype=bool)

        def distance_to(seeds: np.ndarray) -> np.ndarray:
            marked = np.zeros(shape, dtype=bool)
            marked[tuple(seeds.T)] = True
            return nearest_distances(everywhere, marked, self._image.spacing).reshape(shape)

        return distance_to(near) < distance_to(far)

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """Region growing's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous step's prediction (its mask and feedback), or None.
            update_slices: Unused by 3D models (2D models predict only these slices again).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the model's seconds and feedback.

        Raises:
            RuntimeError: :meth:`set_case` was not called.
            ValueError: The prompt has no kind the model takes.
        """
        self._require_case()
        started = time.perf_counter()
        points, labels = prompt.model_points()
        positives, negatives = points[labels == 1], points[labels == 0]
        if len(positives) == 0 and prompt.box3d is not None:
            b = prompt.box3d
            positives = np.array(
                [[(b.z_min + b.z_max) // 2, (b.y_min + b.y_max) // 2, (b.x_min + b.x_max) // 2]]
            )
        previous_mask = previous.mask if previous is not None else None
        feedback = previous.feedback if previous is not None else None
        limits = feedback.get("limits") if isinstance(feedback, dict) else None
        mask = (
            previous_mask.copy() if previous_mask is not None else np.zeros(self._image.shape, bool)
        )
        anchors = np.concatenate([positives, negatives]) if len(negatives) else positives
        if len(anchors) == 0:
            self._seconds += time.perf_counter() - started
            return Prediction(mask, {"limits": limits})
        roi = self._roi(prompt, anchors, previous_mask)
        offset = np.array([s.start for s in roi])
        data = self._normalised[roi]
        local_positives = positives - offset
        local_negatives = negatives - offset
        grown = np.zeros(data.shape, dtype=bool)
        if len(local_positives):
            # like interactive region-growing tools, the intensity range is set by the first
            # positive click and kept across corrections (carried in the feedback); later
            # clicks extend the region through connectivity
            if limits is None:
                limits = self._limits(self._neighbourhood_values(data, local_positives[:1]))
            low, high = limits
            candidate = (data >= low) & (data <= high)
            candidate[tuple(local_positives.T)] = True
            if prompt.box3d is not None:
                b = prompt.box3d
                inside = np.zeros(data.shape, dtype=bool)
                inside[
                    b.z_min - offset[0] : b.z_max - offset[0] + 1,
                    b.y_min - offset[1] : b.y_max - offset[1] + 1,
                    b.x_min - offset[2] : b.x_max - offset[2] + 1,
                ] = True
                candidate &= inside
            components = connected_components(candidate, connectivity=26)
            keep = np.unique(components[tuple(local_positives.T)])
            grown = np.isin(components, keep[keep > 0])
        if previous_mask is not None:
            grown = additions_from_new_positives(
                grown | previous_mask[roi], previous_mask[roi], local_positives
            )
        mask[roi] |= grown
        if len(local_negatives):
            region = mask[roi]
            components = connected_components(region, connectivity=26)
            touched = np.unique(components[tuple(local_negatives.T)])
            carved = np.isin(components, touched[touched > 0])
            keep_near = local_positives
            if not len(keep_near) and region.any():
                # negative clicks only (earlier prompts dropped): protect the core of what was
                # predicted, its voxel deepest inside, instead of carving the whole object away
                keep_near = deepest_voxels(region, self._image.spacing)[:1]  # first in C order
            if len(keep_near):
                carved &= self._nearer_to(local_negatives, keep_near, data.shape)
            region &= ~carved
            mask[roi] = region
        self._seconds += time.perf_counter() - started
        return Prediction(mask, {"limits": limits})
