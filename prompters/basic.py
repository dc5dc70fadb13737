"""Basic initial prompters: a 3D box, a centre point per slice, a box per slice.

All coordinates are canonical voxel indices (z, y, x); boxes are inclusive. Only the target's
ground-truth mask is read.
"""

from __future__ import annotations

from typing import ClassVar

import cc3d
import numpy as np

from intrabench.protocols import PromptContext, Prompter
from intrabench.registry import prompters
from intrabench.types import Box2D, Box3D, Prompt, interactions


def foreground_slices(mask: np.ndarray) -> np.ndarray:
    """Sorted axial indices z whose slice contains foreground."""
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))


def bounding_box(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive (min, max) corner indices of a non-empty mask, per axis."""
    coords = [np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis)))
              for axis in range(mask.ndim)]
    return np.array([c[0] for c in coords]), np.array([c[-1] for c in coords])


def largest_component_2d(slice_mask: np.ndarray) -> np.ndarray:
    """Largest 8-connected component of a 2D mask."""
    labelled = cc3d.connected_components(slice_mask[None], connectivity=26)[0]
    if labelled.max() <= 1:
        return labelled > 0
    counts = np.bincount(labelled.ravel())
    counts[0] = 0
    return labelled == counts.argmax()


def centroid_point_2d(slice_mask: np.ndarray) -> tuple[int, int]:
    """Centroid of the largest component, moved to the nearest pixel of that component.

    (y, x); the snap matters for non-convex shapes whose centroid lies outside.
    """
    component = largest_component_2d(slice_mask)
    pixels = np.argwhere(component)
    centroid = pixels.mean(axis=0)
    nearest = pixels[np.argmin(((pixels - centroid) ** 2).sum(axis=1))]
    return int(nearest[0]), int(nearest[1])


def tight_box_2d(slice_mask: np.ndarray) -> Box2D:
    low, high = bounding_box(slice_mask)
    return Box2D(int(low[0]), int(low[1]), int(high[0]), int(high[1]))


@prompters.register
class Box3DPrompter(Prompter):
    """The target's tight 3D bounding box (3 interactions)."""

    name: ClassVar[str] = "box-3d"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"box3d"})
    effort_rule: ClassVar[str] = "3D box = 3"

    def initial(self, context: PromptContext) -> Prompt:
        low, high = bounding_box(context.ground_truth)
        return Prompt(box3d=Box3D(*(int(v) for v in low), *(int(v) for v in high)),
                      interactions=interactions("box3d", 1), effort_label="3")


@prompters.register
class CenterPointPerSlice(Prompter):
    """One positive click per foreground slice at the largest component's centroid (1X)."""

    name: ClassVar[str] = "center-point-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "1 click per foreground slice (1X)"

    def initial(self, context: PromptContext) -> Prompt:
        points = []
        for z in foreground_slices(context.ground_truth):
            y, x = centroid_point_2d(context.ground_truth[z])
            points.append((int(z), y, x))
        return Prompt(points=points, point_labels=np.ones(len(points), dtype=np.int8),
                      interactions=interactions("click", len(points)), effort_label="1X")


@prompters.register
class BoxPerSlice(Prompter):
    """A tight 2D box on every foreground slice (2 interactions each, 2X)."""

    name: ClassVar[str] = "box-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"box2d"})
    effort_rule: ClassVar[str] = "1 box (2) per foreground slice (2X)"

    def initial(self, context: PromptContext) -> Prompt:
        boxes = {int(z): tight_box_2d(context.ground_truth[z])
                 for z in foreground_slices(context.ground_truth)}
        return Prompt(boxes=boxes, interactions=interactions("box2d", len(boxes)),
                      effort_label="2X")
