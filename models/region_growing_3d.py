"""A classical 3D baseline: seeded confidence-connected region growing (SimpleITK), CPU.

Positive clicks (or the centre of a 3D box) seed the growth; the region is limited to the box
when one is given; negative clicks grow a background region that is carved out; the previous
prediction is kept where no negative evidence contradicts it.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.protocols import Model
from intrabench.registry import models
from intrabench.types import Prediction, Prompt
from intrabench.volume import Volume

from ._classical import expand, intensity_window, normalise


@models.register
class RegionGrowing3D(Model):
    """Seeded 3D confidence-connected region growing inside a prompt-derived ROI."""

    name: ClassVar[str] = "region-growing-3d"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box3d", "scribble", "mask"})

    def __init__(self, multiplier: float = 2.5, iterations: int = 3, context_mm: float = 25.0,
                 box_margin_voxels: int = 1) -> None:
        self.multiplier = float(multiplier)
        self.iterations = int(iterations)
        self.context_mm = float(context_mm)
        self.box_margin_voxels = int(box_margin_voxels)
        self._image: Volume | None = None
        self._normalised: np.ndarray | None = None
        self._seconds = 0.0

    def set_case(self, image: Volume) -> None:
        if image is not self._image:
            self._image = image
            self._normalised = normalise(image.array, intensity_window(image.array))

    def model_seconds(self) -> float:
        return self._seconds

    def reset_timer(self) -> None:
        self._seconds = 0.0

    def _roi(self, prompt: Prompt, points: np.ndarray) -> tuple[slice, slice, slice]:
        shape = self._image.shape
        if prompt.box3d is not None:
            b = prompt.box3d
            lows, highs = (b.z_min, b.y_min, b.x_min), (b.z_max, b.y_max, b.x_max)
            margins = [self.box_margin_voxels] * 3
        else:
            lows, highs = points.min(0), points.max(0)
            margins = [int(np.ceil(self.context_mm / s)) for s in self._image.spacing]
        return tuple(slice(lo, hi + 1) for lo, hi in
                     (expand(int(lows[a]), int(highs[a]), margins[a], shape[a]) for a in range(3)))

    def _grow(self, data: np.ndarray, seeds_zyx: np.ndarray) -> np.ndarray:
        if len(seeds_zyx) == 0:
            return np.zeros(data.shape, dtype=bool)
        image = sitk.GetImageFromArray(data)
        seed_list = [(int(x), int(y), int(z)) for z, y, x in seeds_zyx]
        grown = sitk.ConfidenceConnected(image, seedList=seed_list,
                                         numberOfIterations=self.iterations,
                                         multiplier=self.multiplier,
                                         initialNeighborhoodRadius=1, replaceValue=1)
        return sitk.GetArrayFromImage(grown).astype(bool)

    def predict(self, prompt: Prompt, previous: Prediction | None = None,
                update_slices: list[int] | None = None) -> Prediction:
        if self._image is None or self._normalised is None:
            raise RuntimeError("RegionGrowing3D: set_case() was not called")
        started = time.perf_counter()
        points, labels = prompt.model_points()
        positives = points[labels == 1]
        negatives = points[labels == 0]
        if len(positives) == 0 and prompt.box3d is not None:
            b = prompt.box3d
            positives = np.array([[(b.z_min + b.z_max) // 2, (b.y_min + b.y_max) // 2,
                                   (b.x_min + b.x_max) // 2]])
        mask = previous.mask.copy() if previous is not None else np.zeros(self._image.shape, bool)
        anchor = np.concatenate([positives, negatives]) if len(negatives) else positives
        if len(anchor) == 0:
            self._seconds += time.perf_counter() - started
            return Prediction(mask, mask)
        roi = self._roi(prompt, anchor)
        offset = np.array([s.start for s in roi])
        data = self._normalised[roi]
        grown = self._grow(data, positives - offset)
        if len(negatives):
            carved = self._grow(data, negatives - offset)
            grown &= ~carved
            mask[roi] &= ~carved
        if prompt.box3d is not None:
            b = prompt.box3d
            inside = np.zeros(data.shape, dtype=bool)
            inside[b.z_min - offset[0]: b.z_max - offset[0] + 1,
                   b.y_min - offset[1]: b.y_max - offset[1] + 1,
                   b.x_min - offset[2]: b.x_max - offset[2] + 1] = True
            grown &= inside
        mask[roi] |= grown
        self._seconds += time.perf_counter() - started
        return Prediction(mask, mask)
