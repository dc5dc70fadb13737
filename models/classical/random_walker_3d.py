"""A classical 3D baseline: random walker in a prompt-derived region of interest (CPU).

Seeds: positive clicks and scribbles are foreground; negative clicks, the ROI border and
everything outside a 3D box are background; without a positive click, the central part of the
box is foreground. When refining, the previous prediction (eroded) stays foreground and what
lies well outside it stays background, unless a new click says otherwise nearby; voxels are
added only in the pieces that hold a new positive click (negative clicks only carve out).
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
from scipy import ndimage

from intrabench.models.classical._classical import (
    VolumeBaseline,
    additions_from_new_positives,
    expand,
    mask_corners,
    solve_random_walker,
)
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

_FOREGROUND, _BACKGROUND = 1, 2


@models.register
class RandomWalker3D(VolumeBaseline):
    """3D random walker seeded by clicks, scribbles, a 3D box and the previous mask."""

    name: ClassVar[str] = "random-walker-3d"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box3d", "scribble", "mask"})

    def __init__(
        self,
        beta: float = 130.0,
        context_mm: float = 15.0,
        box_margin: float = 0.25,
        correction_radius_mm: float = 3.0,
    ) -> None:
        super().__init__()
        if not float(beta) > 0:
            raise ValueError(f"beta must be > 0 (the random walker's edge weight), not {beta}")
        self.beta = float(beta)
        self.context_mm = float(context_mm)
        self.box_margin = float(box_margin)
        self.correction_radius_mm = float(correction_radius_mm)

    def _roi(
        self, prompt: Prompt, points: np.ndarray, previous: np.ndarray | None
    ) -> tuple[slice, ...]:
        shape = self._image.shape
        lows, highs = [], []
        if prompt.box3d is not None:
            b = prompt.box3d
            lows.append(np.array([b.z_min, b.y_min, b.x_min]))
            highs.append(np.array([b.z_max, b.y_max, b.x_max]))
        if len(points):
            lows.append(points.min(0))
            highs.append(points.max(0))
        corners = mask_corners(previous)
        if corners is not None:
            lows.append(corners[0])
            highs.append(corners[1])
        low, high = np.min(lows, axis=0), np.max(highs, axis=0)
        context = [int(np.ceil(self.context_mm / s)) for s in self._image.spacing]
        if prompt.box3d is not None and not len(points) and previous is None:
            context = [
                max(1, int(round(self.box_margin * (high[a] - low[a] + 1)))) for a in range(3)
            ]
        return tuple(
            slice(lo, hi + 1)
            for lo, hi in (
                expand(int(low[a]), int(high[a]), context[a], shape[a]) for a in range(3)
            )
        )

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """The 3D random walker's 3D prediction for ``prompt`` on the case of :meth:`set_case`.

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
        shape = self._image.shape
        previous_mask = previous.mask if previous is not None else None
        if not len(points) and prompt.box3d is None:
            mask = previous_mask.copy() if previous_mask is not None else np.zeros(shape, bool)
            return Prediction(mask, mask)
        roi = self._roi(prompt, points, previous_mask)
        offset = np.array([s.start for s in roi])
        data = self._normalised[roi]
        seeds = np.zeros(data.shape, dtype=np.int32)
        for axis in range(3):  # the ROI border is background where it is not the image border
            for side, index in ((roi[axis].start, 0), (roi[axis].stop, -1)):
                if 0 < side < shape[axis]:
                    face = [slice(None)] * 3
                    face[axis] = index
                    seeds[tuple(face)] = _BACKGROUND
        if prompt.box3d is not None:
            b = prompt.box3d
            inside = np.zeros(data.shape, dtype=bool)
            box = (
                slice(b.z_min - offset[0], b.z_max - offset[0] + 1),
                slice(b.y_min - offset[1], b.y_max - offset[1] + 1),
                slice(b.x_min - offset[2], b.x_max - offset[2] + 1),
            )
            inside[box] = True
            seeds[~inside] = _BACKGROUND
            if not (labels == 1).any() and previous_mask is None:
                core = [
                    slice(s.start + (s.stop - s.start) // 3, s.stop - (s.stop - s.start) // 3)
                    for s in box
                ]
                core = [
                    c if c.stop > c.start else slice(s.start, s.stop) for c, s in zip(core, box)
                ]
                seeds[tuple(core)] = _FOREGROUND
        if previous_mask is not None:
            local = previous_mask[roi]
            seeds[ndimage.binary_erosion(local, iterations=1) & (seeds == 0)] = _FOREGROUND
            seeds[~ndimage.binary_dilation(local, iterations=2) & (seeds == 0)] = _BACKGROUND
            # new clicks override the old mask around them
            radius = [
                max(1, int(round(self.correction_radius_mm / s))) for s in self._image.spacing
            ]
            for point in points - offset:
                if np.all(point >= 0) and np.all(point < data.shape):
                    around = tuple(slice(max(0, p - r), p + r + 1) for p, r in zip(point, radius))
                    seeds[around] = 0
        for point, label in zip(points - offset, labels):
            if np.all(point >= 0) and np.all(point < data.shape):
                seeds[tuple(point)] = _FOREGROUND if label == 1 else _BACKGROUND
        mask = previous_mask.copy() if previous_mask is not None else np.zeros(shape, bool)
        if (seeds == _FOREGROUND).any() and (seeds == _BACKGROUND).any():
            result = solve_random_walker(data, seeds, self.beta)
            mask[roi] = result == _FOREGROUND
        elif (seeds == _FOREGROUND).any():
            mask[roi] = seeds == _FOREGROUND
        mask = additions_from_new_positives(mask, previous_mask, points[labels == 1])
        self._seconds += time.perf_counter() - started
        return Prediction(mask, mask)
