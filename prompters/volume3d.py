"""Initial prompters for 3D models (paper Table 4): random points, centre points, 3D box.

Coordinates are canonical voxel indices (z, y, x); boxes are inclusive. Only the target's
ground-truth mask is read.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.interfaces import PromptContext, Prompter
from intrabench.registry import prompters
from intrabench.types import Box3D, Prompt, interactions

from ._geometry import (
    centroid_point_2d,
    foreground_crop,
    foreground_slices,
    interpolate_track,
    mask_corners,
    positive_count,
    round_half_up,
    sample_pixels,
    seed_slices,
)


@prompters.register
class Box3DPrompter(Prompter):
    """The target's tight 3D bounding box (3 interactions)."""

    name: ClassVar[str] = "box-3d"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"box3d"})
    effort_rule: ClassVar[str] = "3D box = 3"

    def initial(self, context: PromptContext) -> Prompt:
        """The target's tight 3D bounding box.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        low, high = mask_corners(context.ground_truth)
        return Prompt(
            box3d=Box3D(*(int(v) for v in low), *(int(v) for v in high)),
            interactions=interactions("box3d", 1),
            effort_label="3",
        )


@prompters.register
class PointsPerVolume(Prompter):
    """``n_points`` positive clicks on foreground voxels drawn uniformly (paper "NPPV", N);
    from the clicking group in a robustness run (``context.clicks``)."""

    name: ClassVar[str] = "points-per-volume"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N clicks = N"

    def __init__(self, n_points: int = 1) -> None:
        self.n_points = positive_count(n_points)

    takes_click_policy: ClassVar[bool] = True

    def initial(self, context: PromptContext) -> Prompt:
        """``n_points`` positive clicks drawn uniformly from the target's voxels.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        if context.clicks is not None:  # a robustness run: its clicking group decides
            points = (
                context.clicks.choose(
                    sub,
                    self.n_points,
                    context.rng,
                    origin=tuple(offset),
                    spacing=context.spacing,
                    target=sub,
                )
                + offset
            )
        else:
            points = sample_pixels(sub, self.n_points, context.rng) + offset
        return Prompt(
            points=points,
            point_labels=np.ones(len(points), dtype=np.int8),
            interactions=interactions("click", len(points)),
            effort_label=str(self.n_points),
        )


@prompters.register
class CenterPointsPerVolume(Prompter):
    """``n_points`` positive clicks along the target's centre line (paper "N center PPV", N).

    The centre line is the point interpolation through ``line_slices`` seed slices (centroid of
    the largest component on each, linearly interpolated on every slice in between). The
    clicks sit at ``linspace(0, M - 1, N + 2)[1:-1]`` along that line, truncated as the
    reference does (the middle for N = 1; the lower middle on an even line), each moved to the
    nearest not yet clicked foreground voxel of its slice (of the volume if the slice has none
    left), so every click lies in the target and there are N distinct clicks (the reference
    drops repeats and returns fewer).
    Deterministic: ``context.rng`` is not used. In a robustness run (``context.clicks``) the
    clicks come from the run's clicking group instead (the baseline strategy: the target's
    deepest voxels).
    """

    name: ClassVar[str] = "center-points-per-volume"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N clicks = N"

    def __init__(self, n_points: int = 1, line_slices: int = 5) -> None:
        self.n_points = positive_count(n_points)
        self.line_slices = positive_count(line_slices, "line_slices")

    takes_click_policy: ClassVar[bool] = True

    def initial(self, context: PromptContext) -> Prompt:
        """``n_points`` positive clicks along the target's centre line.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        if context.clicks is not None:  # a robustness run: its clicking group decides
            points = (
                context.clicks.choose(
                    sub,
                    self.n_points,
                    context.rng,
                    origin=tuple(offset),
                    spacing=context.spacing,
                    target=sub,
                )
                + offset
            )
            return Prompt(
                points=points,
                point_labels=np.ones(len(points), dtype=np.int8),
                interactions=interactions("click", len(points)),
                effort_label=str(self.n_points),
            )
        fg = foreground_slices(sub)
        seeds = seed_slices(fg, self.line_slices)
        seed_yx = np.array(
            [centroid_point_2d(sub[z], origin=offset[1:]) for z in seeds], dtype=np.float64
        )
        line_z, line_yx = interpolate_track(seeds, seed_yx)
        line = np.column_stack([line_z, round_half_up(line_yx)])
        n = min(self.n_points, int(sub.sum()))
        # truncated, as the reference (``np.linspace(..., dtype=int)``): on an even line the
        # middle click is the lower of the two middle points
        picks = np.linspace(0, len(line) - 1, n + 2)[1:-1].astype(np.int64)
        taken = np.zeros(sub.shape, dtype=bool)
        points = []
        for index in picks:
            z, y, x = (int(v) for v in line[index])
            free = sub[z] & ~taken[z]
            if free.any():
                pixels = np.argwhere(free)
                yy, xx = pixels[np.argmin(((pixels - (y, x)) ** 2).sum(axis=1))]
                point = (z, int(yy), int(xx))
            else:
                voxels = np.argwhere(sub & ~taken)
                point = tuple(
                    int(v) for v in voxels[np.argmin(((voxels - (z, y, x)) ** 2).sum(axis=1))]
                )
            taken[point] = True
            points.append(point)
        points_array = np.array(points, dtype=np.int64).reshape(-1, 3) + offset
        return Prompt(
            points=points_array,
            point_labels=np.ones(len(points), dtype=np.int8),
            interactions=interactions("click", len(points)),
            effort_label=str(self.n_points),
        )
