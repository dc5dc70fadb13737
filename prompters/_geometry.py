"""Geometric primitives shared by the prompters and refiners.

Array conventions: masks are boolean numpy arrays indexed (z, y, x) (2D masks (y, x)); every
returned coordinate is an integer voxel index in the same order; boxes are inclusive on both
ends. Everything here is deterministic; randomness is passed in as a ``numpy.random.Generator``.

Speed: work is done on crops around the foreground (one pass over the full volume to find the
occupied slices, then only that slab), connected components use cc3d.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import ndimage

from intrabench.masks import boxes, inclusive_corners, mask_corners
from intrabench.masks.components import largest_component  # noqa: F401 - the prompters' vocabulary
from intrabench.types import Box2D

Crop = tuple[slice, ...]


# --------------------------------------------------------------------------------------
# Extents and crops
# --------------------------------------------------------------------------------------


def foreground_slices(mask: np.ndarray) -> np.ndarray:
    """Sorted axial indices z whose slice contains foreground."""
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))


def crop_slices(
    low: np.ndarray, high: np.ndarray, shape: tuple[int, ...], margin: int | tuple[int, ...] = 0
) -> Crop:
    """Slices of the inclusive box [low, high] grown by ``margin`` and clipped to ``shape``."""
    margins = (margin,) * len(shape) if isinstance(margin, int) else tuple(margin)
    return tuple(
        slice(max(0, int(lo) - m), min(size, int(hi) + m + 1))
        for lo, hi, m, size in zip(low, high, margins, shape)
    )


def crop_offset(crop: Crop) -> np.ndarray:
    return np.array([s.start for s in crop], dtype=np.int64)


def union_crop(masks: list[np.ndarray], margin: int = 0) -> Crop | None:
    """Crop enclosing the foreground of all ``masks`` (same shape), or None if all are empty."""
    box = boxes.union_of_boxes(boxes.bounding_box(m) for m in masks)
    if box is None:
        return None
    return crop_slices(*inclusive_corners(box), masks[0].shape, margin)


# --------------------------------------------------------------------------------------
# Components and representative points
# --------------------------------------------------------------------------------------


def nearest_pixel(pixels: np.ndarray, point: np.ndarray) -> np.ndarray:
    """The row of ``pixels`` (N, D) closest (Euclidean) to ``point`` (D,); ties: first row."""
    return pixels[np.argmin(((pixels - point) ** 2).sum(axis=1))]


def centroid_point_2d(
    slice_mask: np.ndarray, center: str = "centroid", origin: Sequence[int] = (0, 0)
) -> tuple[int, int]:
    """(y, x) of the centre of the largest component, snapped to that component.

    ``slice_mask`` may be a crop: ``origin`` is the (y, x) of its first pixel in the full
    slice. The centre is rounded in the full slice's coordinates, as the reference (which never
    crops) rounds it, so the click does not depend on the crop: numpy rounds halves to even, so
    rounding in crop coordinates moved a centre of x.5 by one pixel whenever the crop's offset
    was odd (a 5 x 8 ring at offset (2, 3): (6, 7) against the reference's (6, 6); up to 17 px
    on rings once snapped). The result is in ``slice_mask``'s coordinates.

    ``center="centroid"``: centre of mass; ``"bbox"``: centre of the component's bounding box
    (what the reference implementation uses for interpolation seeds), rounded, then snapped to
    the component's nearest pixel as the reference does (``cKDTree.query``; its tie-breaking
    kept). The snap matters for non-convex shapes whose centre lies outside.
    """
    low, high = mask_corners(slice_mask)
    crop = crop_slices(low, high, slice_mask.shape)
    component = largest_component(slice_mask[crop])
    pixels = np.argwhere(component) + crop_offset(crop)
    if center == "bbox":
        target = (pixels.min(axis=0) + pixels.max(axis=0)) / 2.0
    elif center == "centroid":
        target = pixels.mean(axis=0)
    else:
        raise ValueError(f"center must be 'centroid' or 'bbox', got {center!r}")
    # as the reference: the centre rounded (numpy's half-to-even) first, then the component's
    # pixel nearest to it by scipy's cKDTree, whose choice among equally near pixels is kept.
    # On a ring-shaped region the unrounded centre picked pixels up to 51 px away.
    from scipy.spatial import cKDTree

    shift = np.asarray(origin, dtype=np.float64)
    _, index = cKDTree(pixels).query(np.round(target + shift) - shift)
    nearest = pixels[int(index)]
    return int(nearest[0]), int(nearest[1])


def tight_box_2d(slice_mask: np.ndarray) -> Box2D:
    """Inclusive tight box of a non-empty 2D mask."""
    low, high = mask_corners(slice_mask)
    return Box2D(int(low[0]), int(low[1]), int(high[0]), int(high[1]))


def median_slice(fg_slices: np.ndarray, upper: bool = False) -> int:
    """Median of the sorted foreground slice indices, always one of them.

    Lower median by default (``int(median)`` of a contiguous range, as the reference); the
    CVPR 2025 challenge takes ``unique_z[len // 2]`` (upper median), ``upper=True``.
    """
    index = len(fg_slices) // 2 if upper else (len(fg_slices) - 1) // 2
    return int(fg_slices[index])


def seed_slices(fg_slices: np.ndarray, n: int) -> np.ndarray:
    """``n`` foreground slices equally spaced in z from min(I) to max(I) (both included).

    Target positions ``linspace(min, max, n)`` are rounded to the nearest foreground slice not
    used yet, so the result has ``min(n, len(I))`` distinct slices even when the target has
    gaps along z.
    """
    n = max(1, min(int(n), len(fg_slices)))
    if n == 1:
        return np.array([median_slice(fg_slices)])
    targets = np.linspace(fg_slices[0], fg_slices[-1], n)
    available = list(int(z) for z in fg_slices)
    chosen = []
    for t in targets:
        distances = [abs(z - t) for z in available]
        best = int(np.argmin(distances))  # ties: the lower slice
        chosen.append(available.pop(best))
    return np.array(sorted(chosen), dtype=np.int64)


def round_half_up(values: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves up (deterministic, unlike banker's rounding)."""
    return np.floor(np.asarray(values, dtype=np.float64) + 0.5).astype(np.int64)


def interpolate_track(zs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear interpolation of per-slice values (K, C) at every integer z from zs[0] to zs[-1].

    Returns (all z (M,), float values (M, C)); rows at the seed slices equal the seeds.
    """
    zs = np.asarray(zs, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64).reshape(len(zs), -1)
    all_z = np.arange(zs[0], zs[-1] + 1)
    out = np.stack([np.interp(all_z, zs, values[:, c]) for c in range(values.shape[1])], axis=1)
    return all_z, out


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------


def sample_pixels(mask: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``n`` distinct foreground indices of ``mask`` drawn uniformly without replacement.

    Returns (min(n, count), mask.ndim) int64 in index order of the draw.
    """
    flat = np.flatnonzero(mask)
    if len(flat) == 0 or n <= 0:
        return np.zeros((0, mask.ndim), dtype=np.int64)
    chosen = rng.choice(len(flat), size=min(int(n), len(flat)), replace=False)
    return np.stack(np.unravel_index(flat[chosen], mask.shape), axis=1).astype(np.int64)


def disk(radius: float) -> np.ndarray:
    """Boolean disc footprint: offsets (dy, dx) with dy^2 + dx^2 <= radius^2 (skimage's disk)."""
    n = int(np.floor(radius))
    dy, dx = np.ogrid[-n : n + 1, -n : n + 1]
    return (dy * dy + dx * dx) <= radius * radius


def ring_2d(slice_mask: np.ndarray, inner: float, outer: float) -> np.ndarray:
    """The reference's band outside a 2D mask: dilate by disk(``inner``), dilate that by
    disk(``outer - inner``), remove the first dilation (2 and 5: ``dil(dil(GT, disk 2),
    disk 3) - dil(GT, disk 2)``). Not a Euclidean (inner, outer] band: two discs add up to
    less than one disc of the summed radius (offset (3, 4), at distance 5, is not in it).

    Computed on a crop around the mask (``outer`` + 1 px margin), returned at full size.
    """
    ring = np.zeros(slice_mask.shape, dtype=bool)
    if not slice_mask.any():
        return ring
    low, high = mask_corners(slice_mask)
    crop = crop_slices(low, high, slice_mask.shape, int(np.ceil(outer)) + 1)
    local = slice_mask[crop]
    near = ndimage.binary_dilation(local, structure=disk(inner)) if inner > 0 else local
    far = ndimage.binary_dilation(near, structure=disk(outer - inner))
    ring[crop] = far & ~near
    return ring


def argmax_random_tie(values: np.ndarray, rng: np.random.Generator) -> tuple[int, ...]:
    """Index of the maximum of ``values``; ties broken uniformly with ``rng``."""
    flat = np.flatnonzero(values == values.max())
    pick = flat[0] if len(flat) == 1 else flat[int(rng.integers(len(flat)))]
    return tuple(int(v) for v in np.unravel_index(pick, values.shape))


def foreground_crop(mask: np.ndarray, margin: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(view of ``mask`` cropped to its bounding box grown by ``margin``, offset (ndim,)).

    Add the offset to crop coordinates to get full-volume coordinates.
    """
    low, high = mask_corners(mask)
    crop = crop_slices(low, high, mask.shape, margin)
    return mask[crop], crop_offset(crop)


def positive_count(value: int, name: str = "n_points") -> int:
    """``value`` as an int, or ValueError if it is below 1 (prompter parameters like n_points)."""
    if int(value) < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


#: the inclusive corners of a mask under their former name, for plugins that import it from here
#: or from ``intrabench.prompters.basic``: :func:`intrabench.masks.mask_corners`
bounding_box = mask_corners
