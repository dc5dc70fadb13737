"""Refiners: simulated corrections from the current prediction vs the ground truth.

Every refiner only proposes interactions on misclassified voxels (positive on false
negatives, negative on false positives) and returns None when the prediction is perfect.
Work is cropped to the bounding box of (ground truth | prediction); connected components use
cc3d; distance transforms run on crops only. Coordinates are canonical voxel indices
(z, y, x). Randomness comes only from ``context.rng``. Click refiners declare
``takes_click_policy``: in a robustness run (``context.clicks``) they keep choosing the error
region to correct and let the run's clicking group choose where in it to click.

The engine merges a refiner's prompt with earlier prompts when ``keep_previous_prompts`` is
set, and 2D models re-predict only the slices the new prompt touches (``Prompt.slices()``),
so a refiner's prompt carries exactly the new interactions.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from skimage.measure import find_contours

from intrabench.interfaces import RefineContext, Refiner
from intrabench.masks.distance import deepest_voxels, squared_voxel_distances
from intrabench.registry import refiners
from intrabench.types import Prompt, Scribble, interactions

from ._geometry import (
    centroid_point_2d,
    crop_offset,
    crop_slices,
    largest_component,
    mask_corners,
    nearest_pixel,
    positive_count,
    sample_pixels,
    union_crop,
)


class _Errors:
    """Ground truth, prediction, false negatives and false positives on their common crop."""

    def __init__(self, context: RefineContext, margin: int = 0) -> None:
        crop = union_crop([context.ground_truth, context.prediction], margin)
        self.crop = crop
        if crop is None:
            self.gt = self.pred = self.fn = self.fp = np.zeros((0, 0, 0), dtype=bool)
            self.offset = np.zeros(3, dtype=np.int64)
            return
        self.offset = crop_offset(crop)
        self.gt = context.ground_truth[crop]
        self.pred = context.prediction[crop]
        self.fn = self.gt & ~self.pred
        self.fp = self.pred & ~self.gt

    @property
    def error(self) -> np.ndarray:
        return self.fn | self.fp

    def labels_at(self, local: np.ndarray) -> np.ndarray:
        """Ground-truth labels (1/0) of local (N, 3) coordinates."""
        return self.gt[tuple(local.T)].astype(np.int8)

    def policy_clicks(
        self, context: RefineContext, region: np.ndarray, n: int = 1, z: int | None = None
    ) -> np.ndarray:
        """``n`` clicks in the error ``region`` (on the crop; 2D: slice ``z`` of the crop)
        from ``context.clicks``, as local (k, 3) coordinates. The region counts as a false
        negative when most of its voxels are (the user adds), else as a false positive."""
        assert context.clicks is not None
        target = self.gt if z is None else self.gt[z]
        kind = "false_negative" if (region & target).sum() * 2 >= region.sum() else "false_positive"
        origin = tuple(int(o) for o in self.offset)
        if z is not None:
            origin = (origin[0] + int(z), origin[1], origin[2])
        picked = context.clicks.choose(
            region, n, context.rng, origin=origin, spacing=context.spacing, kind=kind, target=target
        )
        if z is not None:
            picked = np.column_stack([np.full(len(picked), z, dtype=np.int64), picked])
        return picked.reshape(-1, 3)


def _edt_center(
    component: np.ndarray, rng: np.random.Generator, sampling: tuple[float, ...] | None = None
) -> tuple[int, ...]:
    """Voxel of ``component`` farthest from its boundary (the array border counts as boundary).

    Cropped to the component's bounding box and padded by one background voxel before the
    Euclidean distance transform (:func:`intrabench.masks.distance.deepest_voxels`, exact); ties
    (listed in C order) broken uniformly with ``rng``.
    """
    low, high = mask_corners(component)
    crop = crop_slices(low, high, component.shape)
    local = np.pad(component[crop], 1)
    deepest = deepest_voxels(local, sampling)
    peak = deepest[0] if len(deepest) == 1 else deepest[int(rng.integers(len(deepest)))]
    return tuple(int(p - 1 + s.start) for p, s in zip(peak, crop))


@refiners.register
class CorrectivePointPerSlice(Refiner):
    """One corrective click on every slice with an error (paper's unrealistic 1PPS refine, 1X).

    ``placement="random"``: a uniformly random misclassified pixel of the slice (reference);
    ``"center"``: the pixel farthest from the boundary of the slice's largest 2D error
    component. The click is labelled with the ground truth there (1 on a false negative,
    0 on a false positive). ``slices="all"`` corrects every slice with an error;
    ``"prompted"`` only slices of the initial prompt (the reference's behaviour, which never
    corrects false positives elsewhere; with it, errors only outside those slices end the
    interaction as if it had converged). Effort: 1 per corrected slice.
    """

    name: ClassVar[str] = "corrective-point-per-slice"
    dimensions: ClassVar[frozenset[int]] = frozenset({2})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "1 click per slice with an error (1X)"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, placement: str = "random", slices: str = "all") -> None:
        if placement not in ("random", "center"):
            raise ValueError(f"placement must be 'random' or 'center', got {placement!r}")
        if slices not in ("all", "prompted"):
            raise ValueError(f"slices must be 'all' or 'prompted', got {slices!r}")
        self.placement = placement
        self.slices = slices

    def refine(self, context: RefineContext) -> Prompt | None:
        """One corrective click on every slice with an error.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        errors = _Errors(context)
        if errors.crop is None:
            return None
        error = errors.error
        zs = np.flatnonzero(error.reshape(error.shape[0], -1).any(axis=1))
        if self.slices == "prompted" and context.history:
            allowed = set(context.history[0].slices())
            zs = np.array([z for z in zs if int(z + errors.offset[0]) in allowed], dtype=np.int64)
        local = []
        for z in zs:
            region = error[z] if self.placement == "random" else largest_component(error[z])
            if context.clicks is not None:  # a robustness run: its clicking group decides
                _, y, x = errors.policy_clicks(context, region, 1, int(z))[0]
            elif self.placement == "random":
                y, x = sample_pixels(region, 1, context.rng)[0]
            else:
                y, x = _edt_center(region, context.rng)
            local.append((int(z), int(y), int(x)))
        if not local:
            return None
        local_array = np.array(local, dtype=np.int64)
        return Prompt(
            points=local_array + errors.offset,
            point_labels=errors.labels_at(local_array),
            interactions=interactions("click", len(local)),
            effort_label="1X",
        )


@refiners.register
class RandomCorrectivePoint(Refiner):
    """``n_points`` uniformly random misclassified voxels, labelled with the ground truth (N).

    The paper's 3D refinement ("1 PPV Refine"). Unlike the reference, the voxels are drawn from
    the whole volume, not from a 128^3 box around the first click (that box is SAM-Med3D's crop,
    which belongs to the model adapter).
    """

    name: ClassVar[str] = "random-corrective-point"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "N clicks = N (default 1)"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, n_points: int = 1) -> None:
        self.n_points = positive_count(n_points)

    def refine(self, context: RefineContext) -> Prompt | None:
        """``n_points`` random misclassified voxels, labelled by the ground truth.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        errors = _Errors(context)
        if errors.crop is None:
            return None
        if context.clicks is not None:  # a robustness run: its clicking group decides
            local = errors.policy_clicks(context, errors.error, self.n_points)
        else:
            local = sample_pixels(errors.error, self.n_points, context.rng)
        if len(local) == 0:
            return None
        return Prompt(
            points=local + errors.offset,
            point_labels=errors.labels_at(local),
            interactions=interactions("click", len(local)),
            effort_label=str(self.n_points),
        )


@refiners.register
class CenterErrorClick(Refiner):
    """One click at the centre of the largest error (CVPR 2025 challenge, RITM "Base" clicker).

    False negatives and false positives are pooled; the largest 26-connected error component
    is cropped to its bounding box and the click goes to its Euclidean distance-transform
    maximum (voxel units as the challenge, or mm with ``use_spacing``); ties are broken with
    ``context.rng``. Labelled with the ground truth there. Effort 1. In a robustness run
    (``context.clicks``) the click goes where the run's clicking group puts it in that
    component instead.
    """

    name: ClassVar[str] = "center-error-click"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"point"})
    effort_rule: ClassVar[str] = "1 click = 1"
    takes_click_policy: ClassVar[bool] = True

    def __init__(self, use_spacing: bool = False) -> None:
        self.use_spacing = bool(use_spacing)

    def refine(self, context: RefineContext) -> Prompt | None:
        """One click at the centre of the largest error.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        errors = _Errors(context)
        if errors.crop is None:
            return None
        error = errors.error
        if not error.any():
            return None
        component = largest_component(error)
        if context.clicks is not None:  # a robustness run: its clicking group decides
            local = errors.policy_clicks(context, component)
        else:
            local = np.array([self.click_in(component, context)], dtype=np.int64)
        return Prompt(
            points=local + errors.offset,
            point_labels=errors.labels_at(local),
            interactions=interactions("click", 1),
            effort_label="1",
        )

    def click_in(self, component: np.ndarray, context: RefineContext) -> tuple[int, ...]:
        """The voxel of the error ``component`` (boolean, on the error crop) to click.

        Args:
            component: A non-empty bool (z, y, x) error component.
            context: The step's context: its ``rng`` breaks ties, its ``spacing`` (mm) is used
                when ``use_spacing``.

        Returns:
            The voxel farthest from the component's boundary, (z, y, x) indices into it.
        """
        sampling = tuple(float(s) for s in context.spacing) if self.use_spacing else None
        return _edt_center(component, context.rng, sampling)


# --------------------------------------------------------------------------------------
# Scribble refinement (paper section 2.2)
# --------------------------------------------------------------------------------------


def _column_scribble(component: np.ndarray, origin: np.ndarray | None = None) -> np.ndarray:
    """One pixel per row (axis 0) of a 2D/3D component, ordered bottom to top.

    3D component: on each axial slice, the centre of the slice's largest 8-connected piece
    snapped into it (as the reference; the centroid of all pieces could land on the edge of a
    smaller one). 2D component: each row's centroid snapped into the row. Returns (M, ndim)
    int64 local coordinates. ``origin``: the component's first voxel in the full volume (3D),
    so that centres are rounded there, as the reference rounds them (see
    :func:`centroid_point_2d`).
    """
    plane_origin = (0, 0) if origin is None else tuple(int(v) for v in origin[1:])
    points = []
    for row in np.flatnonzero(component.reshape(component.shape[0], -1).any(axis=1)):
        if component.ndim == 3:
            near = centroid_point_2d(component[row], origin=plane_origin)
        else:
            pixels = np.argwhere(component[row])
            near = nearest_pixel(pixels, pixels.mean(axis=0))
        points.append((int(row), *(int(v) for v in near)))
    return np.array(points, dtype=np.int64).reshape(-1, component.ndim)


def _ordered_contours(region: np.ndarray) -> list[np.ndarray]:
    """Closed pixel curves along the inside border of ``region`` (2D), each (K, 2) ordered.

    Marching squares on the region padded by one pixel; every contour vertex lies halfway
    between an inside and an outside pixel and is mapped to the inside one.
    """
    padded = np.pad(region, 1)
    curves = []
    for contour in find_contours(padded.astype(np.float32), 0.5):
        low = np.floor(contour).astype(np.int64)
        high = np.ceil(contour).astype(np.int64)
        inside_low = padded[low[:, 0], low[:, 1]]
        pixels = np.where(inside_low[:, None], low, high) - 1
        keep = np.ones(len(pixels), dtype=bool)
        keep[1:] = (pixels[1:] != pixels[:-1]).any(axis=1)
        pixels = pixels[keep]
        if len(pixels) > 1 and (pixels[0] == pixels[-1]).all():
            pixels = pixels[:-1]
        if len(pixels):
            curves.append(pixels)
    return curves


@refiners.register
class ScribbleRefiner(Refiner):
    """The paper's scribble refinement (section 2.2): one positive or negative scribble (3).

    Positive with probability p = FN / (FN + FP) (Bernoulli with ``context.rng``):

    * **positive**: a scribble from the bottom to the top of the largest 26-connected
      false-negative component, one point per axial slice at the component's centroid on that
      slice (snapped into it);
    * **negative**: on the non-axial plane (coronal, axis 1, or sagittal, axis 2, among
      ``plane_axes``) with the most false positives, the contour ``contour_distance`` px
      outside the ground truth is traced; a sub-curve of ``length_fraction`` of that closed
      curve, centred on a uniformly chosen contour pixel that is a false positive, is taken
      and only its false-positive pixels are kept. If the plane has no ground truth or the
      contour meets no false positive, the scribble runs bottom to top through the largest
      false-positive component of the plane instead (still negative).

    2D models get all scribble voxels (the engine re-predicts only the touched slices). For
    3D models ``three_d_points`` decides: "paper" = all points of a positive scribble, one
    random point of a negative one (section 2.2); "all"; "one" = one random scribble point
    (the reference). Effort 3 per scribble.
    """

    name: ClassVar[str] = "scribble"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"scribble", "point"})
    effort_rule: ClassVar[str] = "1 scribble = 3"

    def __init__(
        self,
        contour_distance: float = 2.0,
        length_fraction: float = 0.6,
        plane_axes: tuple[int, ...] | list[int] = (1, 2),
        three_d_points: str = "paper",
    ) -> None:
        if contour_distance < 0:
            raise ValueError("contour_distance must be >= 0")
        if not 0 < length_fraction <= 1:
            raise ValueError("length_fraction must be in (0, 1]")
        axes = tuple(int(a) for a in plane_axes)
        if not axes or any(a not in (1, 2) for a in axes):
            raise ValueError(f"plane_axes must be a non-empty subset of (1, 2), got {plane_axes}")
        if three_d_points not in ("paper", "all", "one"):
            raise ValueError(
                f"three_d_points must be 'paper', 'all' or 'one', got {three_d_points!r}"
            )
        self.contour_distance = float(contour_distance)
        self.length_fraction = float(length_fraction)
        self.plane_axes = axes
        self.three_d_points = three_d_points

    # -- the two scribbles (local crop coordinates) ------------------------------------
    def positive_scribble(self, fn: np.ndarray, origin: np.ndarray | None = None) -> np.ndarray:
        """Centroid scribble through the largest false-negative component, (M, 3) local;
        ``origin``: ``fn``'s first voxel in the full volume (centres are rounded there).

        Args:
            fn: The bool (z, y, x) false-negative mask (on the error crop).
            origin: ``fn``'s first voxel in the full volume, (z, y, x); None for (0, 0, 0).

        Returns:
            (M, 3) (z, y, x) indices into ``fn``.
        """
        component = largest_component(fn)
        low, high = mask_corners(component)
        crop = crop_slices(low, high, component.shape)
        base = np.zeros(3, np.int64) if origin is None else np.asarray(origin, np.int64)
        return _column_scribble(component[crop], base + crop_offset(crop)) + crop_offset(crop)

    def negative_scribble(
        self, gt: np.ndarray, fp: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """False-positive pixels of a contour sub-curve on the plane with most FPs, (M, 3).

        Args:
            gt: The bool (z, y, x) ground truth on the error crop.
            fp: The bool false-positive mask on the same crop.
            rng: Chooses the sub-curve.

        Returns:
            (M, 3) (z, y, x) indices into the crop.
        """
        best_axis, best_index, best_count = self.plane_axes[0], 0, -1
        for axis in self.plane_axes:
            other = tuple(a for a in range(3) if a != axis)
            counts = fp.sum(axis=other)
            index = int(np.argmax(counts))
            if counts[index] > best_count:
                best_axis, best_index, best_count = axis, index, int(counts[index])
        plane_gt = np.take(gt, best_index, axis=best_axis)
        plane_fp = np.take(fp, best_index, axis=best_axis)
        pixels = self._contour_fp(plane_gt, plane_fp, rng)
        if len(pixels) == 0:
            pixels = _column_scribble(largest_component(plane_fp))
        return np.insert(pixels, best_axis, best_index, axis=1)

    def _contour_fp(
        self, plane_gt: np.ndarray, plane_fp: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if not plane_gt.any():
            return np.zeros((0, 2), dtype=np.int64)
        reach = int(np.ceil(self.contour_distance)) + 1
        low, high = mask_corners(plane_gt)
        crop = crop_slices(low, high, plane_gt.shape, reach)
        # exact: the square root of an integer squared distance, as SciPy computes it
        distance = np.sqrt(squared_voxel_distances(~plane_gt[crop]).astype(np.float64))
        grown = np.zeros(plane_gt.shape, dtype=bool)
        grown[crop] = distance <= self.contour_distance
        curves = _ordered_contours(grown)
        candidates = [
            (c, i)
            for c, curve in enumerate(curves)
            for i in np.flatnonzero(plane_fp[curve[:, 0], curve[:, 1]])
        ]
        if not candidates:
            return np.zeros((0, 2), dtype=np.int64)
        c, centre = candidates[int(rng.integers(len(candidates)))]
        curve = curves[c]
        length = max(1, int(round(self.length_fraction * len(curve))))
        start = centre - length // 2
        window = curve[(start + np.arange(length)) % len(curve)]
        window = window[plane_fp[window[:, 0], window[:, 1]]]
        _, first = np.unique(window, axis=0, return_index=True)
        return window[np.sort(first)]

    # -- the refiner ---------------------------------------------------------------------
    def refine(self, context: RefineContext) -> Prompt | None:
        """One scribble on the largest error.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        errors = _Errors(context, margin=int(np.ceil(self.contour_distance)) + 1)
        if errors.crop is None:
            return None
        n_fn, n_fp = int(errors.fn.sum()), int(errors.fp.sum())
        if n_fn + n_fp == 0:
            return None
        positive = bool(context.rng.random() < n_fn / (n_fn + n_fp))
        if positive:
            local = self.positive_scribble(errors.fn, errors.offset)
        else:
            local = self.negative_scribble(errors.gt, errors.fp, context.rng)
        label = 1 if positive else 0
        points = local + errors.offset
        effort = interactions("scribble", 1)
        one_point = context.model_dimension == 3 and (
            self.three_d_points == "one" or (self.three_d_points == "paper" and not positive)
        )
        if one_point:
            pick = points[int(context.rng.integers(len(points)))][None]
            return Prompt(points=pick, point_labels=[label], interactions=effort, effort_label="3")
        return Prompt(
            scribbles=(Scribble(points=points, label=label),), interactions=effort, effort_label="3"
        )
