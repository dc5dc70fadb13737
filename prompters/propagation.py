"""Point and box propagation from the median slice (paper section 2.1, Fig. 3 e-f, Table 3).

The simulated user gives the boundary slices min(I) and max(I) (I = foreground slices) and one
prompt on the median slice. The model segments that slice; the prompt for the next slice is
derived from that prediction (its largest component's centre of mass for points, its tight
box for boxes), downwards to min(I), then upwards to max(I). Propagation stops early when the
model predicts nothing. Only 2D models: ``context.segment_slice`` queries the model.

Effort = seed prompt + 2 boundary slices ("5P Prop" = 5 + 2 = 7, "B Prop" = 2 + 2 = 4).
Coordinates are canonical voxel indices (z, y, x); boxes are inclusive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from intrabench.errors import UserError
from intrabench.interfaces import PromptContext, Prompter
from intrabench.registry import prompters
from intrabench.types import Box2D, Prompt, SlicePrompt, interactions

from ._geometry import (
    centroid_point_2d,
    foreground_slices,
    median_slice,
    positive_count,
    sample_pixels,
    tight_box_2d,
)

_NO_POINTS = np.zeros((0, 2), dtype=np.int64)
_NO_LABELS = np.zeros((0,), dtype=np.int8)


def _segmenter(context: PromptContext, name: str) -> Callable[[SlicePrompt], np.ndarray]:
    if context.segment_slice is None:
        raise UserError(
            f"prompter '{name}' propagates through a 2D model's predictions; "
            "use it with a 2D (slice) model"
        )
    return context.segment_slice


def _walk(
    start_mask: np.ndarray,
    start: int,
    stop: int,
    step: int,
    next_prompt: Callable[[int, np.ndarray], SlicePrompt],
    segment: Callable[[SlicePrompt], np.ndarray],
) -> list[SlicePrompt]:
    """Prompts for start+step ... stop (inclusive), each derived from the previous prediction."""
    produced = []
    mask = start_mask
    for z in range(start + step, stop + step, step):
        if not mask.any():
            break
        prompt = next_prompt(z, mask)
        produced.append(prompt)
        mask = segment(prompt)
    return produced


@prompters.register
class PointPropagation(Prompter):
    """``n_points`` random clicks on the median slice, centre clicks propagated ("NP Prop")."""

    name: ClassVar[str] = "point-propagation"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N seed clicks + 2 boundary slices = N + 2 (5P Prop = 7)"
    needs_model: ClassVar[bool] = True

    def __init__(self, n_points: int = 5) -> None:
        self.n_points = positive_count(n_points)

    def initial(self, context: PromptContext) -> Prompt:
        """Clicks on the median slice; the others follow by propagation.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        segment = _segmenter(context, self.name)
        gt = context.ground_truth
        if not gt.any():
            return Prompt()
        fg = foreground_slices(gt)
        m = median_slice(fg)
        seed_yx = sample_pixels(gt[m], self.n_points, context.rng)
        seed = SlicePrompt(z=m, points=seed_yx, labels=np.ones(len(seed_yx), np.int8), box=None)
        seed_mask = segment(seed)

        def next_prompt(z: int, previous: np.ndarray) -> SlicePrompt:
            y, x = centroid_point_2d(previous)
            return SlicePrompt(
                z=z,
                points=np.array([[y, x]], dtype=np.int64),
                labels=np.ones(1, dtype=np.int8),
                box=None,
            )

        walked = _walk(seed_mask, m, int(fg[0]), -1, next_prompt, segment) + _walk(
            seed_mask, m, int(fg[-1]), +1, next_prompt, segment
        )
        points = [np.column_stack([np.full(len(seed_yx), m), seed_yx])]
        points += [np.array([[p.z, *p.points[0]]]) for p in walked]
        stacked = np.concatenate(points)
        return Prompt(
            points=stacked,
            point_labels=np.ones(len(stacked), dtype=np.int8),
            interactions=(interactions("click", len(seed_yx)) + interactions("boundary_slice", 2)),
            effort_label=str(self.n_points + 2),
        )


@prompters.register
class BoxPropagation(Prompter):
    """A tight box on the median slice; each next slice gets the box of the last prediction."""

    name: ClassVar[str] = "box-propagation"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"box2d"})
    effort_rule: ClassVar[str] = "1 seed box (2) + 2 boundary slices = 4"
    needs_model: ClassVar[bool] = True

    def initial(self, context: PromptContext) -> Prompt:
        """A tight box on the median slice; the others follow by propagation.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        segment = _segmenter(context, self.name)
        gt = context.ground_truth
        if not gt.any():
            return Prompt()
        fg = foreground_slices(gt)
        m = median_slice(fg)
        seed = SlicePrompt(z=m, points=_NO_POINTS, labels=_NO_LABELS, box=tight_box_2d(gt[m]))
        seed_mask = segment(seed)

        def next_prompt(z: int, previous: np.ndarray) -> SlicePrompt:
            return SlicePrompt(
                z=z, points=_NO_POINTS, labels=_NO_LABELS, box=tight_box_2d(previous)
            )

        walked = _walk(seed_mask, m, int(fg[0]), -1, next_prompt, segment) + _walk(
            seed_mask, m, int(fg[-1]), +1, next_prompt, segment
        )
        boxes: dict[int, Box2D] = {m: seed.box}
        boxes.update({p.z: p.box for p in walked})
        return Prompt(
            boxes=boxes,
            interactions=interactions("box2d", 1) + interactions("boundary_slice", 2),
            effort_label="4",
        )
