"""The lasso: a closed freehand contour drawn around the target on one axial slice
(nnInteractive's lasso prompt; Isensee, Rokuss, Krämer et al., 2025).

A clinician circles the target loosely rather than tracing its edge. Simulated here as the
convex hull of the target's cross-section on its median foreground slice (the lower median of
the slices it occupies, as the other single-slice prompts), grown by ``margin_mm`` in the
slice plane: the contour is the hull's vertices in order, integer (y, x) pixel indices. Only
the ground truth is read; deterministic (``context.rng`` is not used). One lasso costs 3
interactions, as a scribble (one freehand stroke).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.errors import ConfigError
from intrabench.interfaces import PromptContext, Prompter
from intrabench.masks.distance import distance_transform
from intrabench.registry import prompters
from intrabench.types import Lasso, Prompt, interactions

from ._geometry import foreground_slices, median_slice


def hull_contour(region: np.ndarray) -> np.ndarray:
    """(K, 2) int (y, x) vertices, counter-clockwise in (x, y), of the convex hull of the
    pixel centres of a non-empty 2D mask; its corner pixels when they are collinear (a line
    or a single pixel: the contour degenerates to that segment or pixel).

    Args:
        region: A non-empty bool (y, x) mask.

    Returns:
        Int64 (K, 2) vertices as (y, x).
    """
    from scipy.spatial import ConvexHull, QhullError

    pixels = np.argwhere(region)
    try:
        hull = ConvexHull(pixels[:, ::-1].astype(np.float64))  # (x, y)
        return pixels[hull.vertices].astype(np.int64)
    except (QhullError, ValueError):  # fewer than 3 pixels, or all on one line
        ends = [pixels[np.lexsort((pixels[:, 1], pixels[:, 0]))[i]] for i in (0, -1)]
        return np.unique(np.array(ends, dtype=np.int64), axis=0)


@prompters.register
class LassoPrompter(Prompter):
    """A lasso around the target on its median slice (convex hull grown by ``margin_mm``)."""

    name: ClassVar[str] = "lasso"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"lasso"})
    effort_rule: ClassVar[str] = "1 lasso = 3"

    def __init__(self, margin_mm: float = 2.0) -> None:
        if not float(margin_mm) >= 0:
            raise ConfigError(f"lasso: margin_mm must be >= 0, got {margin_mm!r}")
        self.margin_mm = float(margin_mm)

    def initial(self, context: PromptContext) -> Prompt:
        """The lasso on the target's median slice.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        if not context.ground_truth.any():
            return Prompt()
        z = median_slice(foreground_slices(context.ground_truth))
        section = np.asarray(context.ground_truth[z], dtype=bool)
        if self.margin_mm > 0:
            section = distance_transform(~section, context.spacing[1:]) <= self.margin_mm
        return Prompt(
            lassos=(Lasso(z, hull_contour(section), 1),),
            interactions=interactions("lasso", 1),
            effort_label="3",
        )
