"""Slice-by-slice initial prompters for 2D models (the paper's unrealistic upper bound, Table 2).

Every foreground slice gets its own prompt, so the effort grows with the target's extent: the
label is "NX" (N interactions per slice) and the computed effort is the real count.
Coordinates are canonical voxel indices (z, y, x); boxes are inclusive. Only the target's
ground-truth mask is read. In a robustness run (``context.clicks``) the click prompters draw
each slice's clicks from the run's clicking group on that slice (2D clicks).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.interfaces import PromptContext, Prompter
from intrabench.registry import prompters
from intrabench.types import Box2D, Prompt, interactions

from ._geometry import (
    centroid_point_2d,
    foreground_crop,
    foreground_slices,
    mask_corners,
    positive_count,
    ring_2d,
    sample_pixels,
    tight_box_2d,
)


def _policy_clicks(
    context: PromptContext,
    plane: np.ndarray,
    n: int,
    z: int,
    offset: np.ndarray,
    kind: str = "target",
    target: np.ndarray | None = None,
) -> np.ndarray:
    """``n`` (y, x) clicks on the crop's slice ``z`` (``plane``) from ``context.clicks``."""
    assert context.clicks is not None
    return context.clicks.choose(
        plane,
        n,
        context.rng,
        origin=(int(z + offset[0]), int(offset[1]), int(offset[2])),
        spacing=context.spacing,
        kind=kind,  # type: ignore[arg-type]
        target=plane if target is None else target,
    )


@prompters.register
class CenterPointPerSlice(Prompter):
    """One positive click per foreground slice at the largest component's centroid (1X)."""

    name: ClassVar[str] = "center-point-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "1 click per foreground slice (1X)"
    takes_click_policy: ClassVar[bool] = True

    def initial(self, context: PromptContext) -> Prompt:
        """One centre click on every foreground slice.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        points = []
        for z in foreground_slices(sub):
            if context.clicks is not None:  # a robustness run: its clicking group decides
                ((y, x),) = _policy_clicks(context, sub[z], 1, z, offset)
            else:
                y, x = centroid_point_2d(sub[z], origin=offset[1:])
            points.append((int(z) + offset[0], y + offset[1], x + offset[2]))
        return Prompt(
            points=points,
            point_labels=np.ones(len(points), dtype=np.int8),
            interactions=interactions("click", len(points)),
            effort_label="1X",
        )


@prompters.register
class PointsPerSlice(Prompter):
    """``n_points`` random positive clicks on every foreground slice (paper "NPPS", NX).

    Points are distinct foreground pixels drawn uniformly without replacement; a slice with
    fewer foreground pixels than ``n_points`` gets all of them (the effort counts the clicks
    actually made, the label stays "NX").
    """

    name: ClassVar[str] = "points-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N clicks per foreground slice (NX)"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, n_points: int = 1) -> None:
        self.n_points = positive_count(n_points)

    def initial(self, context: PromptContext) -> Prompt:
        """``n_points`` random positive clicks on every foreground slice.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        points = []
        for z in foreground_slices(sub):
            yx = (
                _policy_clicks(context, sub[z], self.n_points, z, offset)
                if context.clicks is not None
                else sample_pixels(sub[z], self.n_points, context.rng)
            )
            points.append(np.column_stack([np.full(len(yx), z), yx]) + offset)
        stacked = np.concatenate(points)
        return Prompt(
            points=stacked,
            point_labels=np.ones(len(stacked), dtype=np.int8),
            interactions=interactions("click", len(stacked)),
            effort_label=f"{self.n_points}X",
        )


@prompters.register
class AlternatingPointsPerSlice(Prompter):
    """``n_points`` alternating positive/negative clicks per foreground slice (paper "N±PPS").

    ceil(N/2) positive points inside the target and floor(N/2) negative points in the
    reference's ring on the same slice, ``dil(dil(GT, disk inner), disk (outer - inner)) -
    dil(GT, disk inner)`` (2 and 5: about 3-5 px outside; see ``ring_2d``), ordered +, -, +,
    ...; each capped by what the slice offers.
    """

    name: ClassVar[str] = "alternating-points-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N clicks (ceil(N/2) +, floor(N/2) -) per foreground slice (NX)"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, n_points: int = 2, inner: float = 2.0, outer: float = 5.0) -> None:
        self.n_points = positive_count(n_points)
        if not 0 <= inner < outer:
            raise ValueError(f"need 0 <= inner < outer, got inner={inner}, outer={outer}")
        self.inner, self.outer = float(inner), float(outer)

    def initial(self, context: PromptContext) -> Prompt:
        """``n_points`` alternating positive and negative clicks on every foreground slice.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        margin = int(np.ceil(self.outer)) + 1
        sub, offset = foreground_crop(context.ground_truth, margin=margin)
        n_pos = (self.n_points + 1) // 2
        n_neg = self.n_points // 2
        points, labels = [], []
        for z in foreground_slices(sub):
            ring = ring_2d(sub[z], self.inner, self.outer) if n_neg else None
            if context.clicks is not None:  # a robustness run: its clicking group decides
                positives = _policy_clicks(context, sub[z], n_pos, z, offset)
                negatives = (
                    _policy_clicks(context, ring, n_neg, z, offset, "false_positive", sub[z])
                    if n_neg
                    else np.zeros((0, 2), np.int64)
                )
            else:
                positives = sample_pixels(sub[z], n_pos, context.rng)
                negatives = (
                    sample_pixels(ring, n_neg, context.rng) if n_neg else np.zeros((0, 2), np.int64)
                )
            for i in range(max(len(positives), len(negatives))):
                for group, label in ((positives, 1), (negatives, 0)):
                    if i < len(group):
                        points.append(
                            (z + offset[0], group[i][0] + offset[1], group[i][1] + offset[2])
                        )
                        labels.append(label)
        return Prompt(
            points=points,
            point_labels=labels,
            interactions=interactions("click", len(points)),
            effort_label=f"{self.n_points}X",
        )


@prompters.register
class BoxPerSlice(Prompter):
    """A tight 2D box on every foreground slice (2 interactions each, paper "Box PS", 2X)."""

    name: ClassVar[str] = "box-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"box2d"})
    effort_rule: ClassVar[str] = "1 box (2) per foreground slice (2X)"

    def initial(self, context: PromptContext) -> Prompt:
        """A tight 2D box on every foreground slice.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        boxes = {}
        for z in foreground_slices(sub):
            box = tight_box_2d(sub[z])
            boxes[int(z + offset[0])] = Box2D(
                box.y_min + int(offset[1]),
                box.x_min + int(offset[2]),
                box.y_max + int(offset[1]),
                box.x_max + int(offset[2]),
            )
        return Prompt(
            boxes=boxes, interactions=interactions("box2d", len(boxes)), effort_label="2X"
        )


@prompters.register
class BoxPerSliceFrom3DBox(Prompter):
    """The xy box of the target's 3D bounding box on every slice of its z-range (one 3D box, 3).

    Slices inside the z-range without foreground get the box too (the user drew one 3D box and
    the tool slices it). For models that take 2D boxes but no 3D box.
    """

    name: ClassVar[str] = "box-per-slice-from-3d-box"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"box2d"})
    effort_rule: ClassVar[str] = "one 3D box = 3, sliced into 2D boxes"

    def initial(self, context: PromptContext) -> Prompt:
        """The 3D box's xy box on every slice of its z-range.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        low, high = mask_corners(context.ground_truth)
        box = Box2D(int(low[1]), int(low[2]), int(high[1]), int(high[2]))
        boxes = {z: box for z in range(int(low[0]), int(high[0]) + 1)}
        return Prompt(boxes=boxes, interactions=interactions("box3d", 1), effort_label="3")
