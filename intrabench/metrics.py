"""Per-step overlap metrics between a prediction and its target's ground truth.

All masks are boolean (z, y, x) arrays on the same grid; spacing is in mm in (z, y, x) order.
Work is cropped to the bounding box of prediction | ground truth, so cost scales with the
objects, not the volume.
"""

from __future__ import annotations

import numpy as np


def union_bbox(*masks: np.ndarray) -> tuple[slice, ...] | None:
    """Bounding box (as slices) of the union of masks, or None if all are empty."""
    union = np.zeros(masks[0].shape, dtype=bool)
    for mask in masks:
        union |= mask
    if not union.any():
        return None
    bounds = []
    for axis in range(union.ndim):
        other = tuple(a for a in range(union.ndim) if a != axis)
        present = np.flatnonzero(union.any(axis=other))
        bounds.append(slice(int(present[0]), int(present[-1]) + 1))
    return tuple(bounds)


def confusion(prediction: np.ndarray, ground_truth: np.ndarray) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) voxel counts."""
    tp = int(np.count_nonzero(prediction & ground_truth))
    fp = int(np.count_nonzero(prediction)) - tp
    fn = int(np.count_nonzero(ground_truth)) - tp
    return tp, fp, fn


def dice(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Dice = 2|P&G| / (|P| + |G|). An empty prediction of a non-empty target is 0; two empty
    masks give 1 (nothing to find, nothing found)."""
    tp, fp, fn = confusion(prediction, ground_truth)
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2.0 * tp / denominator


def iou(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Intersection over union (Jaccard); two empty masks give 1."""
    tp, fp, fn = confusion(prediction, ground_truth)
    denominator = tp + fp + fn
    return 1.0 if denominator == 0 else tp / denominator


def step_metrics(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: tuple[float, float, float],
) -> dict[str, float]:
    """The metrics recorded for every step of every episode."""
    tp, fp, fn = confusion(prediction, ground_truth)
    denominator = 2 * tp + fp + fn
    return {
        "dice": 1.0 if denominator == 0 else 2.0 * tp / denominator,
        "iou": 1.0 if tp + fp + fn == 0 else tp / (tp + fp + fn),
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "voxel_volume_mm3": float(np.prod(spacing)),
    }
