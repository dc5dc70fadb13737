"""Point and box interpolation from a few seed slices (paper section 2.1, Fig. 3 c-d, Table 3).

The simulated user prompts ``n_slices`` foreground slices equally spaced from min(I) to
max(I) (I = foreground slices, both ends included); prompts on every slice in between are
linearly interpolated and cost nothing. Coordinates are canonical voxel indices (z, y, x);
boxes are inclusive.
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
    interpolate_track,
    positive_count,
    round_half_up,
    seed_slices,
    tight_box_2d,
)


@prompters.register
class PointInterpolation(Prompter):
    """Positive clicks on ``n_slices`` seed slices, linearly interpolated in between ("NP Inter").

    Each seed click is the centre of the largest component of its slice (``center``:
    "centroid" = centre of mass, "bbox" = bounding-box centre as the reference), snapped into
    that component. Interpolated clicks are rounded half up and may fall outside the target
    (that is the scheme's weakness the paper measures). Effort: one click per seed slice. In a
    robustness run (``context.clicks``) the seed clicks come from the run's clicking group on
    their slices, and the interpolation runs between them.
    """

    name: ClassVar[str] = "point-interpolation"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "1 click per seed slice = N; interpolated clicks free"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, n_slices: int = 3, center: str = "centroid") -> None:
        self.n_slices = positive_count(n_slices, "n_slices")
        if center not in ("centroid", "bbox"):
            raise ValueError(f"center must be 'centroid' or 'bbox', got {center!r}")
        self.center = center

    def initial(self, context: PromptContext) -> Prompt:
        """Clicks on the seed slices, interpolated in between.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        seeds = seed_slices(foreground_slices(sub), self.n_slices)
        if context.clicks is not None:  # a robustness run: the seed clicks follow its group
            seed_yx = np.array(
                [
                    context.clicks.choose(
                        sub[z],
                        1,
                        context.rng,
                        origin=(int(z + offset[0]), int(offset[1]), int(offset[2])),
                        spacing=context.spacing,
                        target=sub[z],
                    )[0]
                    for z in seeds
                ],
                np.float64,
            )
        else:
            seed_yx = np.array(
                [centroid_point_2d(sub[z], self.center, origin=offset[1:]) for z in seeds],
                np.float64,
            )
        all_z, yx = interpolate_track(seeds, seed_yx)
        points = np.column_stack([all_z, round_half_up(yx)]) + offset
        return Prompt(
            points=points,
            point_labels=np.ones(len(points), dtype=np.int8),
            interactions=interactions("click", len(seeds)),
            effort_label=str(self.n_slices),
        )


@prompters.register
class BoxInterpolation(Prompter):
    """2D boxes on ``n_slices`` seed slices, corners interpolated in between ("NB Inter").

    Seed boxes are tight; with ``shift`` > 0 every seed coordinate moves by an integer drawn
    uniformly from [-shift, shift] (the reference's "non-perfect" boxes; shift 3 or 5), is
    clipped to the image, and a min/max pair that crossed is swapped. Interpolated min corners
    are rounded down and max corners up, so the box never shrinks between two seeds.
    Effort: one 2D box (2) per seed slice.
    """

    name: ClassVar[str] = "box-interpolation"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"box2d"})
    effort_rule: ClassVar[str] = "1 box (2) per seed slice = 2N; interpolated boxes free"

    def __init__(self, n_slices: int = 3, shift: int = 0) -> None:
        self.n_slices = positive_count(n_slices, "n_slices")
        if int(shift) < 0:
            raise ValueError(f"shift must be >= 0, got {shift}")
        self.shift = int(shift)

    def _noisy(self, box: Box2D, shape: tuple[int, ...], rng: np.random.Generator) -> Box2D:
        if self.shift == 0:
            return box
        delta = rng.integers(-self.shift, self.shift + 1, size=4)
        y0, x0, y1, x1 = (np.array(box.as_tuple()) + delta).tolist()
        y0, y1 = (int(np.clip(v, 0, shape[1] - 1)) for v in (y0, y1))
        x0, x1 = (int(np.clip(v, 0, shape[2] - 1)) for v in (x0, x1))
        return Box2D(min(y0, y1), min(x0, x1), max(y0, y1), max(x0, x1))

    def initial(self, context: PromptContext) -> Prompt:
        """Boxes on the seed slices, corners interpolated in between.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        sub, offset = foreground_crop(context.ground_truth)
        seeds = seed_slices(foreground_slices(sub), self.n_slices)
        shape = context.ground_truth.shape
        corners = []
        for z in seeds:
            box = tight_box_2d(sub[z])
            box = Box2D(
                box.y_min + int(offset[1]),
                box.x_min + int(offset[2]),
                box.y_max + int(offset[1]),
                box.x_max + int(offset[2]),
            )
            corners.append(self._noisy(box, shape, context.rng).as_tuple())
        all_z, values = interpolate_track(seeds, np.array(corners, dtype=np.float64))
        lows = np.floor(values[:, :2] + 1e-9).astype(np.int64)
        highs = np.ceil(values[:, 2:] - 1e-9).astype(np.int64)
        boxes = {
            int(z + offset[0]): Box2D(int(lo[0]), int(lo[1]), int(hi[0]), int(hi[1]))
            for z, lo, hi in zip(all_z, lows, highs)
        }
        return Prompt(
            boxes=boxes,
            interactions=interactions("box2d", len(seeds)),
            effort_label=str(2 * self.n_slices),
        )
