"""Per-step metrics between a prediction and its target's ground truth.

Conventions
-----------
* Masks are boolean numpy arrays indexed ``(z, y, x)`` on the same grid (the canonical space of
  :mod:`intrabench.io.volume`). ``spacing`` is the voxel size in mm **in the same (z, y, x) array
  order** (not SimpleITK's (x, y, z)).
* Instance-wise: the prediction of a target is compared with that target's mask only (the
  prompt-to-target pairing is known; no matching).
* Empty masks: an empty prediction of a non-empty target scores Dice = IoU = NSD = 0 and
  HD95 = NaN. Two empty masks score Dice = IoU = NSD = 1 (nothing to find, nothing found) and
  HD95 = NaN. HD95 is NaN whenever it is not finite.
* Surfaces and distances follow MONAI (``monai.metrics``, ``use_subvoxels=False``): the surface
  of a mask is the set of its voxels with at least one 6-neighbour outside the mask (``mask XOR
  binary_erosion(mask)``, outside the array counts as background); distances are exact
  Euclidean distances in mm between voxel centres of surface voxels.

Work is cropped to the bounding box of ``prediction | ground_truth`` padded by one voxel (enough
for the erosion; every surface voxel lies inside the box, so nearest-surface distances are exact),
so cost scales with the objects, not with the volume.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from intrabench.evaluation.metric_registry import (  # noqa: F401 - the old private names
    METRICS,
    TIE_MARGIN,
    Metric,
    StepPair,
)
from intrabench.evaluation.metric_registry import dice_from_counts as _dice_from_counts
from intrabench.evaluation.metric_registry import hd95_from_distances as _hd95
from intrabench.evaluation.metric_registry import iou_from_counts as _iou_from_counts
from intrabench.evaluation.metric_registry import nsd_from_distances as _nsd
from intrabench.masks.boxes import (  # noqa: F401 - bounding_box & co: the old names, for plugins
    bounding_box,
    bounding_box_within,
    masks_equal,
    union_of_boxes,
    with_box,
)
from intrabench.masks.distance import nearest_distances

#: Default tolerance of the normalised surface Dice (mm), as the CVPR 2025 challenge.
DEFAULT_NSD_TOLERANCE_MM = 2.0

Spacing = tuple[float, float, float]


def freeze_with_box(mask: np.ndarray, box: tuple[slice, ...] | None) -> np.ndarray:
    """Kept for plugins: :func:`intrabench.masks.with_box` (use the returned array).

    Args:
        mask: A bool (z, y, x) mask; it is made read-only in place.
        box: Its bounding box (half-open slices), or None when it is empty.

    Returns:
        The read-only mask carrying ``box``, as :func:`intrabench.masks.with_box` returns it.
    """
    return with_box(mask, box)


def crop_pair(
    prediction: np.ndarray, ground_truth: np.ndarray, margin: int = 1
) -> tuple[np.ndarray, np.ndarray] | None:
    """Both masks cropped to the bounding box of their union and zero-padded by ``margin``.

    Returns None when both are empty. Padding (rather than widening the crop) keeps objects
    that touch the volume border correct: outside the array counts as background.

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool mask of the same shape.
        margin: Voxels of False padding added on each side of every axis.

    Returns:
        The two cropped, padded bool copies (prediction, ground truth), or None when both
        masks are empty.
    """
    box = union_of_boxes((bounding_box(prediction), bounding_box(ground_truth)))
    if box is None:
        return None
    pad = [(margin, margin)] * prediction.ndim
    return (
        np.pad(np.asarray(prediction[box], dtype=bool), pad),
        np.pad(np.asarray(ground_truth[box], dtype=bool), pad),
    )


def surface(mask: np.ndarray) -> np.ndarray:
    """Surface voxels: mask voxels with a 6-connected (face) neighbour outside the mask.

    Equals ``mask ^ scipy.ndimage.binary_erosion(mask)`` (the default cross structuring element,
    border as background), computed with shifted slices.

    Args:
        mask: Bool (z, y, x) mask (three axes).

    Returns:
        Bool array of ``mask``'s shape, True on its surface voxels.
    """
    interior = mask.copy()
    interior[0] = interior[-1] = False
    interior[:, 0] = interior[:, -1] = False
    interior[:, :, 0] = interior[:, :, -1] = False
    for axis in range(mask.ndim):
        before = [slice(None)] * mask.ndim
        after = [slice(None)] * mask.ndim
        center = [slice(None)] * mask.ndim
        before[axis], center[axis], after[axis] = slice(0, -2), slice(1, -1), slice(2, None)
        interior[tuple(center)] &= mask[tuple(before)] & mask[tuple(after)]
    return mask & ~interior


def surface_distances(
    prediction: np.ndarray, ground_truth: np.ndarray, spacing: Spacing
) -> tuple[np.ndarray, np.ndarray] | None:
    """The directed surface distances of two masks, in mm.

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool (z, y, x) mask of the same shape.
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        (prediction surface -> ground-truth surface, ground-truth surface -> prediction
        surface): float64 arrays, one distance per surface voxel; None if either mask is empty.
    """
    cropped = crop_pair(prediction, ground_truth)
    if cropped is None:
        return None
    pred, gt = cropped
    if not pred.any() or not gt.any():
        return None
    sampling = np.asarray(spacing, dtype=np.float64)
    pred_surface, gt_surface = surface(pred), surface(gt)
    return (
        nearest_distances(pred_surface, gt_surface, sampling),
        nearest_distances(gt_surface, pred_surface, sampling),
    )


def confusion(prediction: np.ndarray, ground_truth: np.ndarray) -> tuple[int, int, int]:
    """Voxel counts of two bool (z, y, x) masks of one shape.

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool mask of the same shape.

    Returns:
        (true positives, false positives, false negatives).
    """
    cropped = crop_pair(prediction, ground_truth, margin=0)
    if cropped is None:
        return 0, 0, 0
    pred, gt = cropped
    tp = int(np.count_nonzero(pred & gt))
    fp = int(np.count_nonzero(pred)) - tp
    fn = int(np.count_nonzero(gt)) - tp
    return tp, fp, fn


def dice(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Dice = 2|P&G| / (|P| + |G|) of two bool (z, y, x) masks of one shape.

    Args:
        prediction: Bool (z, y, x) mask (P).
        ground_truth: Bool mask of the same shape (G).

    Returns:
        Dice in [0, 1]. An empty prediction of a non-empty target is 0; two empty masks give 1
        (nothing to find, nothing found).
    """
    return _dice_from_counts(*confusion(prediction, ground_truth))


def iou(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Intersection over union (Jaccard) = |P&G| / |P|G| of two bool (z, y, x) masks.

    Args:
        prediction: Bool (z, y, x) mask (P).
        ground_truth: Bool mask of the same shape (G).

    Returns:
        IoU in [0, 1]; two empty masks give 1.
    """
    return _iou_from_counts(*confusion(prediction, ground_truth))


def normalized_surface_dice(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: Spacing,
    tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM,
) -> float:
    """NSD = (|{p in S_P: d(p, S_G) <= tau}| + |{g in S_G: d(g, S_P) <= tau}|) / (|S_P| + |S_G|).

    ``S_P``, ``S_G``: surface voxels (see :func:`surface`), ``d``: Euclidean distance in mm.

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool (z, y, x) mask of the same shape.
        spacing: Voxel spacing in mm, (z, y, x).
        tolerance_mm: ``tau``, in mm.

    Returns:
        NSD in [0, 1]. Exactly one empty mask: 0; both empty: 1.
    """
    distances = surface_distances(prediction, ground_truth, spacing)
    if distances is None:
        return 1.0 if not prediction.any() and not ground_truth.any() else 0.0
    return _nsd(distances, tolerance_mm)


def hausdorff_distance_95(
    prediction: np.ndarray, ground_truth: np.ndarray, spacing: Spacing
) -> float:
    """Symmetric 95th-percentile Hausdorff distance (MONAI's definition).

    The larger of the 95th percentiles (linear interpolation) of the two directed
    surface-distance sets.

    Args:
        prediction: Bool (z, y, x) mask.
        ground_truth: Bool (z, y, x) mask of the same shape.
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The distance in mm; NaN if either mask is empty.
    """
    distances = surface_distances(prediction, ground_truth, spacing)
    return float("nan") if distances is None else _hd95(distances)


def step_metrics(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: Spacing,
    nsd_tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM,
    with_surface: bool = True,
    metrics: Iterable[Metric] | None = None,
) -> dict[str, float]:
    """The metrics recorded for every step of every episode.

    One crop of the union bounding box serves all, and the surface distances are computed
    once for every metric that needs them.

    Args:
        prediction: Bool (z, y, x) mask of one target.
        ground_truth: Bool (z, y, x) mask of the same shape.
        spacing: Voxel spacing in mm, (z, y, x).
        nsd_tolerance_mm: The NSD tolerance, in mm.
        with_surface: False skips the surface distances: the metrics that need surfaces are
            NaN (not computed).
        metrics: The declarations to compute (default: the registered ones). The engine
            passes the run's, so that a worker process computes what its parent registered.

    Returns:
        Every registered metric (:data:`~intrabench.evaluation.metric_registry.METRICS`, in
        order: dice, iou, nsd at ``nsd_tolerance_mm``, hd95 in mm, and any added), then the
        voxel counts, the voxel volume and the tolerance used, by column name.
    """
    pair = step_pair(prediction, ground_truth, spacing, nsd_tolerance_mm)
    values = {
        metric.name: float(metric.compute(pair))
        if with_surface or not metric.needs_surface
        else float("nan")
        for metric in (METRICS.values() if metrics is None else metrics)
    }
    tp, fp, fn = pair.counts
    return {
        **values,
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "voxel_volume_mm3": float(np.prod(spacing)),
        "nsd_tolerance_mm": float(nsd_tolerance_mm),
    }


def step_pair(
    prediction: np.ndarray,
    ground_truth: np.ndarray,
    spacing: Spacing,
    nsd_tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM,
) -> StepPair:
    """What the registered metric functions read: both (z, y, x) masks cropped to their
    union's box padded by one voxel, their voxel counts, and the surface distances in mm
    (``spacing`` (z, y, x)) measured on first use.

    Args:
        prediction: Bool (z, y, x) mask of the step.
        ground_truth: The target's bool mask, same shape.
        spacing: Voxel size in mm, (z, y, x).
        nsd_tolerance_mm: The NSD tolerance in mm, carried for the metrics that read it.

    Returns:
        The pair: cropped masks (None when both are empty), (TP, FP, FN) voxel counts and a
        lazy measure of the two directed surface-distance arrays in mm (None when either
        mask is empty).
    """
    cropped = crop_pair(prediction, ground_truth, margin=1)
    if cropped is None:
        return StepPair(None, None, (0, 0, 0), spacing, nsd_tolerance_mm, lambda: None)
    pred, gt = cropped
    tp = int(np.count_nonzero(pred & gt))
    counts = (tp, int(np.count_nonzero(pred)) - tp, int(np.count_nonzero(gt)) - tp)

    def measure() -> tuple[np.ndarray, np.ndarray] | None:
        if counts[0] + counts[1] == 0 or counts[0] + counts[2] == 0:
            return None
        sampling = np.asarray(spacing, dtype=np.float64)
        pred_surface, gt_surface = surface(pred), surface(gt)
        return (
            nearest_distances(pred_surface, gt_surface, sampling),
            nearest_distances(gt_surface, pred_surface, sampling),
        )

    return StepPair(pred, gt, counts, spacing, nsd_tolerance_mm, measure)


def surface_at(setting: str | Sequence[int], step: int, last_step: int) -> bool:
    """Whether step ``step`` of an episode whose last step is ``last_step`` gets surface
    metrics under the run's ``surface_metrics_at`` ``setting`` ("all", "final",
    "initial-and-final" or step numbers).

    Args:
        setting: "all", "final", "initial-and-final", or the step numbers (0 the initial
            prompt's step) that get them.
        step: The step (0 for the initial prompt, 1.. for the corrections).
        last_step: The episode's last step number.

    Returns:
        True when NSD and HD95 are computed at this step.
    """
    if setting == "all":
        return True
    if setting == "final":
        return step == last_step
    if setting == "initial-and-final":
        return step in (0, last_step)
    return step in setting
