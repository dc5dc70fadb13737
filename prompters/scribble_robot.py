"""``scribble-robot``: the DAVIS interactive track's robot user, on axial slices.

DAVIS's robot looks at the frame with the worst prediction and draws scribbles in its largest
error region, "as a human would do". Here: among the axial slices that hold target or
prediction, the one with the lowest Dice (ties: the one with more misclassified voxels, then
the lower z); on it, the largest 8-connected false-negative or false-positive region (the
larger of the two; ties: the false negative); the scribble is that region's skeleton
(``skimage.morphology.skeletonize``), ordered along the region's principal axis, positive on a
false negative, negative on a false positive (a region too thin to have a skeleton gives its
deepest pixel). One scribble per step, effort 3, as the ``scribble`` refiner.

Differences from ``scribble`` (the IntraBench paper's refiner, see its docstring): that one
chooses positive/negative at random in proportion to the error volumes, draws positive
scribbles through the 3D false-negative component's centroids across slices and negative ones
along a contour on a coronal/sagittal plane; the robot stays on one axial slice (the one a
clinician would fix first, as DAVIS's frame) and follows the error's shape. Deterministic:
``context.rng`` is not used. Coordinates are canonical voxel indices (z, y, x).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from skimage.morphology import skeletonize

from intrabench.distance import deepest_voxels
from intrabench.protocols import RefineContext, Refiner
from intrabench.registry import refiners
from intrabench.types import Prompt, Scribble, interactions

from ._geometry import largest_component, union_crop


def worst_slice(gt: np.ndarray, prediction: np.ndarray) -> int | None:
    """Axial index (of these arrays) of the slice with the lowest Dice among slices holding
    target or prediction and an error; ties: more misclassified voxels, then lower z."""
    flat_gt = gt.reshape(gt.shape[0], -1)
    flat_pred = prediction.reshape(prediction.shape[0], -1)
    overlap = (flat_gt & flat_pred).sum(axis=1)
    sizes = flat_gt.sum(axis=1) + flat_pred.sum(axis=1)
    errors = (flat_gt ^ flat_pred).sum(axis=1)
    candidates = np.flatnonzero((sizes > 0) & (errors > 0))
    if candidates.size == 0:
        return None
    dice = 2.0 * overlap[candidates] / sizes[candidates]
    order = np.lexsort((candidates, -errors[candidates], dice))
    return int(candidates[order[0]])


def stroke(region: np.ndarray) -> np.ndarray:
    """(M, 2) pixels of the region's skeleton ordered along its principal axis; its deepest
    pixel when the skeleton is empty."""
    skeleton = skeletonize(region) & region
    pixels = np.argwhere(skeleton)
    if len(pixels) == 0:
        return deepest_voxels(np.pad(region, 1))[:1] - 1
    centred = pixels - pixels.mean(axis=0)
    if len(pixels) > 1:
        _, _, axes = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
        projection = centred @ axes[0]
        if projection[np.argmax(np.abs(projection))] < 0:  # a fixed direction for the sign
            projection = -projection
    else:
        projection = np.zeros(1)
    order = np.lexsort((pixels[:, 1], pixels[:, 0], projection))
    return pixels[order]


@refiners.register
class ScribbleRobot(Refiner):
    """DAVIS's robot: a skeleton scribble in the largest error of the worst axial slice."""

    name: ClassVar[str] = "scribble-robot"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"scribble", "point"})
    effort_rule: ClassVar[str] = "1 scribble = 3, on the worst slice"

    def refine(self, context: RefineContext) -> Prompt | None:
        crop = union_crop([context.ground_truth, context.prediction])
        if crop is None:
            return None
        gt, prediction = context.ground_truth[crop], context.prediction[crop]
        z = worst_slice(gt, prediction)
        if z is None:
            return None
        false_negative = largest_component(gt[z] & ~prediction[z])
        false_positive = largest_component(prediction[z] & ~gt[z])
        positive = false_negative.sum() >= false_positive.sum()
        region = false_negative if positive else false_positive
        pixels = stroke(region)
        offset = np.array([s.start for s in crop], dtype=np.int64)
        points = np.column_stack([np.full(len(pixels), z), pixels]) + offset
        return Prompt(scribbles=(Scribble(points=points, label=1 if positive else 0),),
                      interactions=interactions("scribble", 1), effort_label="3")
