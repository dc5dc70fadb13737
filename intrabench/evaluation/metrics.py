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

import weakref
from collections.abc import Iterable, Sequence

import numpy as np

from intrabench.distance import nearest_distances

#: Default tolerance of the normalised surface Dice (mm), as the CVPR 2025 challenge.
DEFAULT_NSD_TOLERANCE_MM = 2.0

Spacing = tuple[float, float, float]


def _first_axis_extent(mask: np.ndarray, chunk: int = 8) -> tuple[int, int] | None:
    """[low, high) of the non-empty range along axis 0 of a C-contiguous mask, or None.

    The low end comes from ``argmax`` on the flat array (stops at the first True voxel), the high
    end from a backward scan in chunks of slices, so only the empty margins are read.
    """
    flat = mask.reshape(-1)
    first = int(flat.argmax())
    if not flat[first]:
        return None
    plane = flat.size // mask.shape[0]
    low = first // plane
    rows = mask.reshape(mask.shape[0], plane)
    for stop in range(mask.shape[0], low, -chunk):
        start = max(low, stop - chunk)
        block = rows[start:stop]
        if block.any():
            return low, start + int(np.flatnonzero(block.any(axis=1))[-1]) + 1
    return low, low + 1  # unreachable: row ``low`` holds the first True voxel


#: boxes of frozen masks, by ``id``: (weak reference to the mask, its box)
_FROZEN_BOXES: dict[int, tuple[weakref.ref, tuple[slice, ...] | None]] = {}


def _is_frozen(mask: object) -> bool:
    """A boolean array that owns its data and cannot be written: its box cannot change."""
    return (
        isinstance(mask, np.ndarray)
        and mask.dtype == bool
        and mask.base is None
        and not mask.flags.writeable
    )


def _remember(mask: np.ndarray, box: tuple[slice, ...] | None) -> None:
    key = id(mask)
    _FROZEN_BOXES[key] = (
        weakref.ref(mask, lambda _ref, key=key: _FROZEN_BOXES.pop(key, None)),
        box,
    )


def freeze_with_box(mask: np.ndarray, box: tuple[slice, ...] | None) -> np.ndarray:
    """Make ``mask`` (boolean, owning its data) read-only and record its known bounding
    ``box``, so that :func:`bounding_box` answers without reading it. The caller vouches for
    the box (e.g. the mask was just filled inside it)."""
    mask.setflags(write=False)
    if _is_frozen(mask):
        _remember(mask, box)
    return mask


def bounding_box(mask: np.ndarray) -> tuple[slice, ...] | None:
    """Bounding box of a boolean mask as slices (one per axis), or None if it is empty.

    Finds the axis-0 range first (reading only the empty margins of a contiguous mask), then
    projects the remaining axes on that slab, so a small object in a large volume costs about
    one pass over the volume at memory speed. The box of a read-only boolean array that owns
    its data (the engine freezes every ground truth and prediction) is measured once and
    remembered for as long as the array lives.
    """
    if _is_frozen(mask):
        known = _FROZEN_BOXES.get(id(mask))
        if known is not None and known[0]() is mask:
            return known[1]
        box = _measure_box(mask)
        _remember(mask, box)
        return box
    return _measure_box(mask)


def _measure_box(mask: np.ndarray) -> tuple[slice, ...] | None:
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 0 or mask.size == 0:
        return None
    if mask.flags.c_contiguous:
        extent = _first_axis_extent(mask)
        if extent is None:
            return None
        bounds = [slice(*extent)]
        block = mask[bounds[0]]
        first_axis = 1
    else:
        bounds, block, first_axis = [], mask, 0
    for axis in range(first_axis, mask.ndim):
        other = tuple(a for a in range(block.ndim) if a != axis)
        present = np.flatnonzero(block.any(axis=other))
        if present.size == 0:
            return None
        low, high = int(present[0]), int(present[-1]) + 1
        bounds.append(slice(low, high))
        index = [slice(None)] * block.ndim
        index[axis] = slice(low, high)
        block = block[tuple(index)]
    return tuple(bounds)


def bounding_box_within(
    mask: np.ndarray, region: tuple[slice, ...] | None
) -> tuple[slice, ...] | None:
    """Bounding box of ``mask`` when all its True voxels lie in ``region`` (slices with explicit
    starts; None: the mask is empty): reads the region only."""
    inner = None if region is None else _measure_box(mask[region])
    if inner is None:
        return None
    return tuple(slice(r.start + i.start, r.start + i.stop) for r, i in zip(region, inner))


def union_bbox(*masks: np.ndarray) -> tuple[slice, ...] | None:
    """Bounding box (as slices) of the union of masks, or None if all are empty."""
    return union_of_boxes(bounding_box(m) for m in masks)


def union_of_boxes(boxes: Iterable[tuple[slice, ...] | None]) -> tuple[slice, ...] | None:
    """The smallest box holding every given box (``None``: an empty mask's box, skipped)."""
    present = [b for b in boxes if b is not None]
    if not present:
        return None
    return tuple(
        slice(min(b[a].start for b in present), max(b[a].stop for b in present))
        for a in range(len(present[0]))
    )


def masks_equal(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two boolean masks of one shape are equal, reading only their bounding boxes
    (``np.array_equal`` reads both volumes whole)."""
    box = bounding_box(first)
    if box != bounding_box(second):
        return False
    return box is None or bool(np.array_equal(first[box], second[box]))


def crop_pair(
    prediction: np.ndarray, ground_truth: np.ndarray, margin: int = 1
) -> tuple[np.ndarray, np.ndarray] | None:
    """Both masks cropped to the bounding box of their union and zero-padded by ``margin``.

    Returns None when both are empty. Padding (rather than widening the crop) keeps objects
    that touch the volume border correct: outside the array counts as background.
    """
    box = union_bbox(prediction, ground_truth)
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


def _dice_from_counts(tp: int, fp: int, fn: int) -> float:
    denominator = 2 * tp + fp + fn
    return 1.0 if denominator == 0 else 2.0 * tp / denominator


def _iou_from_counts(tp: int, fp: int, fn: int) -> float:
    denominator = tp + fp + fn
    return 1.0 if denominator == 0 else tp / denominator


def dice(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Dice = 2|P&G| / (|P| + |G|) of two bool (z, y, x) masks of one shape.

    Returns:
        Dice in [0, 1]. An empty prediction of a non-empty target is 0; two empty masks give 1
        (nothing to find, nothing found).
    """
    return _dice_from_counts(*confusion(prediction, ground_truth))


def iou(prediction: np.ndarray, ground_truth: np.ndarray) -> float:
    """Intersection over union (Jaccard) = |P&G| / |P|G| of two bool (z, y, x) masks.

    Returns:
        IoU in [0, 1]; two empty masks give 1.
    """
    return _iou_from_counts(*confusion(prediction, ground_truth))


#: relative margin under which a distance counts as equal to the NSD tolerance: a distance
#: that equals it in exact arithmetic (3 voxels of 0.1 mm against 0.3 mm) computes as
#: 0.30000000000000004 and would fall outside; distances on a voxel grid that truly differ
#: from the tolerance differ by far more than 1e-9 of it
TIE_MARGIN = 1e-9


def _nsd(distances: tuple[np.ndarray, np.ndarray], tolerance_mm: float) -> float:
    pred_to_gt, gt_to_pred = distances
    total = len(pred_to_gt) + len(gt_to_pred)
    limit = tolerance_mm * (1.0 + TIE_MARGIN)
    within = int(np.count_nonzero(pred_to_gt <= limit) + np.count_nonzero(gt_to_pred <= limit))
    return within / total


def _hd95(distances: tuple[np.ndarray, np.ndarray]) -> float:
    value = max(float(np.percentile(d, 95)) for d in distances)
    return value if np.isfinite(value) else float("nan")


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
) -> dict[str, float]:
    """The metrics recorded for every step of every episode.

    ``prediction``, ``ground_truth``: boolean (z, y, x) masks of one target; ``spacing``:
    (z, y, x) mm. Returns dice, iou, nsd (at ``nsd_tolerance_mm``), hd95 (mm, NaN if not
    finite), voxel counts and the tolerance used. One crop of the union bounding box serves all.
    ``with_surface=False`` skips the surface distances: nsd and hd95 are NaN (not computed).
    """
    cropped = crop_pair(prediction, ground_truth, margin=1)
    tp = fp = fn = 0
    nsd, hd95 = (1.0 if with_surface else float("nan")), float("nan")
    if cropped is not None:
        pred, gt = cropped
        tp = int(np.count_nonzero(pred & gt))
        fp = int(np.count_nonzero(pred)) - tp
        fn = int(np.count_nonzero(gt)) - tp
        if with_surface and (tp + fp == 0 or tp + fn == 0):  # exactly one mask is empty
            nsd = 0.0
        elif with_surface:
            sampling = np.asarray(spacing, dtype=np.float64)
            pred_surface, gt_surface = surface(pred), surface(gt)
            distances = (
                nearest_distances(pred_surface, gt_surface, sampling),
                nearest_distances(gt_surface, pred_surface, sampling),
            )
            nsd = _nsd(distances, nsd_tolerance_mm)
            hd95 = _hd95(distances)
    return {
        "dice": _dice_from_counts(tp, fp, fn),
        "iou": _iou_from_counts(tp, fp, fn),
        "nsd": nsd,
        "hd95": hd95,
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "voxel_volume_mm3": float(np.prod(spacing)),
        "nsd_tolerance_mm": float(nsd_tolerance_mm),
    }


def surface_at(setting: str | Sequence[int], step: int, last_step: int) -> bool:
    """Whether step ``step`` of an episode whose last step is ``last_step`` gets surface
    metrics under the run's ``surface_metrics_at`` ``setting`` ("all", "final",
    "initial-and-final" or step numbers)."""
    if setting == "all":
        return True
    if setting == "final":
        return step == last_step
    if setting == "initial-and-final":
        return step in (0, last_step)
    return step in setting
