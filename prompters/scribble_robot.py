"""``scribble-robot``: the DAVIS interactive track's robot user, on axial slices.

DAVIS's robot (davis-interactive: ``InteractiveScribblesRobot`` and the evaluation service
that picks its frame) looks at the frame with the worst prediction **among the frames it has
not annotated before** (all of them again once every frame was used), and there draws a
scribble along **every error component**: for each object id, background included, the
pixels that belong to it but were predicted otherwise, smoothed, skeletonised, split into
connected pieces (pieces of fewer than 4 skeleton pixels dropped), each piece's longest path
one scribble. ``mode`` chooses:

* ``davis`` (default): the slice with the lowest Dice among those holding target or
  prediction and an error (ties: more misclassified voxels, then the lower z), skipping the
  slices of earlier scribbles (``context.history``) while another slice qualifies; on it,
  one scribble per 8-connected false-negative component (positive) and per false-positive
  component (negative) whose skeleton has at least 4 pixels, false negatives first, each in
  descending size (when every component is smaller, the largest one's stroke, so that a step
  never stays silent where an error is left). Effort 3 per scribble.
* ``largest`` (IntraBench's earlier robot): the worst slice, used slices included, and only
  its largest false-negative or false-positive region (the larger; ties: the false
  negative). One scribble per step.

A scribble is the region's skeleton (``skimage.morphology.skeletonize``) ordered along the
region's principal axis, positive on a false negative, negative on a false positive (a region
too thin to have a skeleton gives its deepest pixel). Not reproduced from DAVIS: its
morphological smoothing with a radius of 7.5% of the region's side, and the Bezier resampling
of the path (the scribble's voxels are what a model receives).

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

from intrabench.interfaces import RefineContext, Refiner
from intrabench.masks.distance import deepest_voxels
from intrabench.registry import refiners
from intrabench.types import Prompt, Scribble, interactions

from ._geometry import largest_component, union_crop


def worst_slice(gt: np.ndarray, prediction: np.ndarray, skip: set[int] | None = None) -> int | None:
    """Axial index (of these arrays) of the slice with the lowest Dice among slices holding
    target or prediction and an error; ties: more misclassified voxels, then lower z. Slices
    in ``skip`` are passed over while another one qualifies.

    Args:
        gt: The bool (z, y, x) ground truth.
        prediction: The bool prediction, same shape.
        skip: Slices (z) to avoid, e.g. those scribbled on already; None for none.

    Returns:
        The slice's z, or None when no slice has an error.
    """
    flat_gt = gt.reshape(gt.shape[0], -1)
    flat_pred = prediction.reshape(prediction.shape[0], -1)
    overlap = (flat_gt & flat_pred).sum(axis=1)
    sizes = flat_gt.sum(axis=1) + flat_pred.sum(axis=1)
    errors = (flat_gt ^ flat_pred).sum(axis=1)
    candidates = np.flatnonzero((sizes > 0) & (errors > 0))
    if candidates.size == 0:
        return None
    fresh = np.array([c for c in candidates if int(c) not in (skip or set())], dtype=np.int64)
    if fresh.size:
        candidates = fresh
    dice = 2.0 * overlap[candidates] / sizes[candidates]
    order = np.lexsort((candidates, -errors[candidates], dice))
    return int(candidates[order[0]])


def stroke(region: np.ndarray) -> np.ndarray:
    """(M, 2) pixels of the region's skeleton ordered along its principal axis; its deepest
    pixel when the skeleton is empty.

    Args:
        region: A non-empty bool (y, x) mask.

    Returns:
        Int64 (M, 2) (y, x) pixels in stroke order.
    """
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


#: DAVIS's ``min_nb_nodes``: skeleton pieces with fewer pixels give no scribble
MIN_SKELETON_PIXELS = 4
MODES = ("davis", "largest")


def components(mask: np.ndarray) -> list[np.ndarray]:
    """The 8-connected components of a 2D mask, largest first (ties: lower label).

    Args:
        mask: Bool (y, x) mask.

    Returns:
        One bool (y, x) mask per component ([] for an empty mask).
    """
    from intrabench.masks import connected_components

    if not mask.any():
        return []
    labelled, count = connected_components(mask, connectivity=8, return_N=True)
    sizes = np.bincount(labelled.ravel(), minlength=count + 1)[1:]
    order = sorted(range(count), key=lambda index: (-sizes[index], index))
    return [labelled == index + 1 for index in order]


def used_slices(history: list[Prompt]) -> set[int]:
    """Axial slices that earlier scribbles were drawn on.

    Args:
        history: The episode's earlier prompts.

    Returns:
        Their scribbles' z indices.
    """
    return {
        int(z)
        for prompt in history
        for scribble in prompt.scribbles
        for z in np.unique(scribble.points[:, 0])
    }


@refiners.register
class ScribbleRobot(Refiner):
    """DAVIS's robot: skeleton scribbles on every error of the worst not yet used axial slice."""

    name: ClassVar[str] = "scribble-robot"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"scribble", "point"})
    effort_rule: ClassVar[str] = (
        "1 scribble = 3 (davis: one per error component), on the worst slice"
    )

    def __init__(self, mode: str = "davis") -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not '{mode}'")
        self.mode = mode

    def refine(self, context: RefineContext) -> Prompt | None:
        """Skeleton scribbles on every error of the worst axial slice not used yet.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        crop = union_crop([context.ground_truth, context.prediction])
        if crop is None:
            return None
        gt, prediction = context.ground_truth[crop], context.prediction[crop]
        offset = np.array([s.start for s in crop], dtype=np.int64)
        skip = set()
        if self.mode == "davis":
            skip = {z - int(offset[0]) for z in used_slices(context.history)}
        z = worst_slice(gt, prediction, skip)
        if z is None:
            return None
        false_negative, false_positive = gt[z] & ~prediction[z], prediction[z] & ~gt[z]
        if self.mode == "largest":
            largest_fn = largest_component(false_negative)
            largest_fp = largest_component(false_positive)
            positive = largest_fn.sum() >= largest_fp.sum()
            regions = [(largest_fn if positive else largest_fp, 1 if positive else 0)]
        else:
            candidates = [(region, 1) for region in components(false_negative)] + [
                (region, 0) for region in components(false_positive)
            ]
            regions = [
                (region, label)
                for region, label in candidates
                if (skeletonize(region) & region).sum() >= MIN_SKELETON_PIXELS
            ]
            if not regions:
                regions = [max(candidates, key=lambda item: int(item[0].sum()))]
        scribbles = tuple(
            Scribble(
                points=np.column_stack([np.full(len(pixels), z), pixels]) + offset, label=label
            )
            for pixels, label in ((stroke(region), label) for region, label in regions)
        )
        return Prompt(
            scribbles=scribbles,
            interactions=interactions("scribble", len(scribbles)),
            effort_label="3",
        )
