"""A classical 2D baseline: random-walker segmentation per axial slice (no weights, CPU).

Clinics use seed-based tools like this today, so it is an honest row in the tables, and it
lets the demo and the CPU tests produce meaningful Dice without downloads.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy import ndimage

from intrabench.interfaces import SliceModel, SliceOutput
from intrabench.io.volume import Volume
from intrabench.models.classical._classical import (
    additions_from_new_positives,
    expand,
    intensity_window,
    normalise,
    solve_random_walker,
)
from intrabench.registry import models
from intrabench.types import SlicePrompt

_FOREGROUND, _BACKGROUND = 1, 2


@models.register
class RandomWalker2D(SliceModel):
    """Random walker per axial slice, seeded by points, boxes and the previous mask."""

    name: ClassVar[str] = "random-walker-2d"
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "box3d", "scribble", "mask"})

    def __init__(
        self,
        beta: float = 130.0,
        context_mm: float = 12.0,
        box_margin: float = 0.2,
        seed_radius: int = 1,
    ) -> None:
        super().__init__()
        if not float(beta) > 0:
            raise ValueError(f"beta must be > 0 (the random walker's edge weight), not {beta}")
        self.beta = float(beta)
        self.context_mm = float(context_mm)
        self.box_margin = float(box_margin)
        self.seed_radius = int(seed_radius)
        self._window = (0.0, 1.0)

    def on_new_case(self, image: Volume) -> None:
        """Take the new case's intensity window (its voxels' percentiles), used for every slice."""
        self._window = intensity_window(image.array)

    def _roi(self, prompt: SlicePrompt, shape: tuple[int, int]) -> tuple[slice, slice]:
        spacing_y, spacing_x = self.image.spacing[1], self.image.spacing[2]
        if prompt.box is not None:
            box = prompt.box
            margin_y = max(3, int(round(self.box_margin * (box.y_max - box.y_min + 1))))
            margin_x = max(3, int(round(self.box_margin * (box.x_max - box.x_min + 1))))
            y0, y1 = expand(box.y_min, box.y_max, margin_y, shape[0])
            x0, x1 = expand(box.x_min, box.x_max, margin_x, shape[1])
        else:
            margin_y = int(np.ceil(self.context_mm / spacing_y))
            margin_x = int(np.ceil(self.context_mm / spacing_x))
            y0, y1 = expand(
                int(prompt.points[:, 0].min()), int(prompt.points[:, 0].max()), margin_y, shape[0]
            )
            x0, x1 = expand(
                int(prompt.points[:, 1].min()), int(prompt.points[:, 1].max()), margin_x, shape[1]
            )
        return slice(y0, y1 + 1), slice(x0, x1 + 1)

    def _seeds(
        self,
        prompt: SlicePrompt,
        roi: tuple[slice, slice],
        shape: tuple[int, int],
        previous: np.ndarray | None,
    ) -> np.ndarray:
        height = roi[0].stop - roi[0].start
        width = roi[1].stop - roi[1].start
        seeds = np.zeros((height, width), dtype=np.int32)
        # the ROI border is background unless it is the image border itself
        seeds[0, :] = seeds[-1, :] = _BACKGROUND
        seeds[:, 0] = seeds[:, -1] = _BACKGROUND
        if previous is not None:
            local = previous[roi]
            seeds[ndimage.binary_erosion(local, iterations=2)] = _FOREGROUND
            seeds[~ndimage.binary_dilation(local, iterations=3) & (seeds == 0)] = _BACKGROUND
        if prompt.box is not None:
            box = prompt.box
            inside = np.zeros_like(seeds, dtype=bool)
            inside[
                box.y_min - roi[0].start : box.y_max - roi[0].start + 1,
                box.x_min - roi[1].start : box.x_max - roi[1].start + 1,
            ] = True
            seeds[~inside] = _BACKGROUND
            if not (prompt.labels == 1).any() and previous is None:
                cy = (box.y_min + box.y_max) // 2 - roi[0].start
                cx = (box.x_min + box.x_max) // 2 - roi[1].start
                ry = max(0, (box.y_max - box.y_min) // 6)
                rx = max(0, (box.x_max - box.x_min) // 6)
                seeds[cy - ry : cy + ry + 1, cx - rx : cx + rx + 1] = _FOREGROUND
        radius = self.seed_radius
        for (py, px), label in zip(prompt.points, prompt.labels):
            ly, lx = int(py) - roi[0].start, int(px) - roi[1].start
            if not (0 <= ly < height and 0 <= lx < width):
                continue
            value = _FOREGROUND if label == 1 else _BACKGROUND
            seeds[max(0, ly - radius) : ly + radius + 1, max(0, lx - radius) : lx + radius + 1] = (
                value
            )
        return seeds

    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        """The random walker's mask of one slice, inside the ROI of its box or clicks.

        Args:
            prompt: The slice's clicks (y, x) with labels and box, in canonical voxels.
            feedback: The previous mask of this slice (bool (y, x)), or None.

        Returns:
            The mask, bool (y, x), empty without a box or click; its own feedback.
        """
        image = self.image.array[prompt.z]
        shape = image.shape
        if prompt.box is None and len(prompt.points) == 0:
            return SliceOutput(np.zeros(shape, dtype=bool), None)
        roi = self._roi(prompt, shape)
        previous = feedback if isinstance(feedback, np.ndarray) else None
        seeds = self._seeds(prompt, roi, shape, previous)
        mask = np.zeros(shape, dtype=bool)
        if (seeds == _FOREGROUND).any():
            if (seeds == _BACKGROUND).any():
                data = normalise(image[roi], self._window)
                labels = solve_random_walker(data, seeds, self.beta)
                mask[roi] = labels == _FOREGROUND
            else:
                mask[roi] = seeds == _FOREGROUND
        positives = np.asarray(prompt.points).reshape(-1, 2)[np.asarray(prompt.labels) == 1]
        mask = additions_from_new_positives(mask, previous, positives)
        return SliceOutput(mask, mask.copy())
