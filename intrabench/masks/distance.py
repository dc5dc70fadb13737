"""Euclidean distance transforms for the whole project, on the CPU or on a CUDA GPU.

Every distance transform of IntraBench goes through this module: the corrective clicks
(centre of the largest error), the scribbles, the prompters, the classical models and the
per-step surface metrics. Two devices:

* ``cpu``: the ``edt`` package (Seung lab, the authors of cc3d): a separable exact EDT, 3-6x
  faster than SciPy's on one thread. It computes in float32, so its distances are within
  about 1e-5 relative of SciPy's;
* ``cuda``: CuPy's ``cupyx.scipy.ndimage.distance_transform_edt`` (optional extra
  ``intrabench[gpu]``), two orders of magnitude faster on large crops.

Where a result depends on exact comparisons of distances, the functions here are exact on
both devices and equal to SciPy's, not approximately equal:

* :func:`squared_voxel_distances` (voxel units): squared distances are integers, exact in
  float32 below 2**24 (distances below 4096 voxels), returned as int64;
* :func:`deepest_voxels`: the voxels at the maximum distance (the centre of an error). In
  voxel units from the exact squared distances; in mm the float32 maximum only nominates
  candidates, whose distances are then recomputed exactly in SciPy's arithmetic
  (``sqrt(sum((offset_i * spacing_i) ** 2))``, axes in order) on the candidates alone;
* :func:`nearest_distances` (the metrics): from the nearest voxel's integer offset, through
  CuPy's feature transform on the GPU, a KD-tree or SciPy's feature transform on the CPU
  (the ``edt`` package has no feature transform).

SciPy's ``distance_transform_edt`` is the reference in the tests. Arrays are (z, y, x) (any
number of axes for the transforms), ``spacing`` in mm per axis, in the same order.

The device is chosen once per process: :func:`set_device` (``"auto"``: CUDA when CuPy and a
GPU are present), or the ``INTRABENCH_DISTANCE_DEVICE`` environment variable, which the
runner sets so that its worker processes follow the run's choice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np

Device = Literal["auto", "cpu", "cuda"]
ENVIRONMENT_VARIABLE = "INTRABENCH_DISTANCE_DEVICE"

#: integer squared distances are exact in float32 below this
_FLOAT32_EXACT = 2**24
#: above this many candidate maxima, the exact mm maximum is taken from a full SciPy transform
_MAX_CANDIDATES = 256


def set_device(device: Device) -> None:
    """Choose where distance transforms run in this process (and, through the environment,
    in worker processes started afterwards).

    Args:
        device: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when CuPy and a GPU are present).

    Raises:
        ValueError: Any other value.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown distance device '{device}' (auto, cpu, cuda)")
    os.environ[ENVIRONMENT_VARIABLE] = device
    active_device.cache_clear()


@lru_cache(maxsize=1)
def active_device() -> Literal["cpu", "cuda"]:
    """``"cuda"`` when CUDA was asked for (or ``auto`` and available), else ``"cpu"``.

    Asking for ``cuda`` without CuPy or a GPU raises a one-line error.

    Returns:
        ``"cpu"`` or ``"cuda"`` (decided once per process, until :func:`set_device`).

    Raises:
        UserError: ``cuda`` was asked for without CuPy or a GPU.
    """
    requested = os.environ.get(ENVIRONMENT_VARIABLE, "auto")
    if requested == "cpu":
        return "cpu"
    available = _cupy_available()
    if requested == "cuda" and not available:
        from intrabench.errors import UserError

        raise UserError(
            "distance transforms on the GPU need CuPy and a CUDA device: "
            "pip install 'intrabench[gpu]' (or set distance_device: cpu)"
        )
    return "cuda" if available else "cpu"


def _cupy_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


def _sampling(spacing: Sequence[float] | None, ndim: int) -> tuple[float, ...]:
    if spacing is None:
        return (1.0,) * ndim
    values = tuple(float(s) for s in spacing)
    if len(values) != ndim:
        raise ValueError(f"spacing has {len(values)} values for a {ndim}-D mask")
    return values


# -- transforms ---------------------------------------------------------------------------


def distance_transform(mask: np.ndarray, spacing: Sequence[float] | None = None) -> np.ndarray:
    """Distance (mm, or voxels without ``spacing``) of every True voxel to the nearest False
    voxel (False voxels: 0), float64, like ``scipy.ndimage.distance_transform_edt(mask,
    sampling=spacing)``: outside the array does not count as False. Within 1e-5 relative of
    SciPy's on the CPU (float32 arithmetic), within 1e-12 on the GPU.

    Args:
        mask: Boolean array, (z, y, x) or any number of axes.
        spacing: Voxel spacing in mm per axis, in the mask's axis order; None for voxel units.

    Returns:
        Float64 distances of ``mask``'s shape (all 0 for an empty mask).
    """
    mask = np.asarray(mask, dtype=bool)
    sampling = _sampling(spacing, mask.ndim)
    if not mask.any():
        return np.zeros(mask.shape)
    if active_device() == "cuda":
        import cupy
        from cupyx.scipy import ndimage as cupy_ndimage

        return cupy.asnumpy(
            cupy_ndimage.distance_transform_edt(cupy.asarray(mask), sampling=sampling)
        )
    if mask.all():  # no False voxel: SciPy's answer (distance to an outside it ignores)
        from scipy import ndimage

        return ndimage.distance_transform_edt(mask, sampling=sampling)
    import edt

    return edt.edt(_for_edt(mask), anisotropy=sampling, black_border=False, parallel=1).astype(
        np.float64
    )


def _for_edt(mask: np.ndarray) -> np.ndarray:
    """``mask`` as the ``edt`` package takes it: C-contiguous and writeable. Its memoryviews
    reject a read-only array ("buffer source array is read-only"), as masks that a Dask worker
    receives or a read-only memory map are, so those are copied."""
    return np.ascontiguousarray(mask) if mask.flags.writeable else np.array(mask, order="C")


def squared_voxel_distances(mask: np.ndarray) -> np.ndarray:
    """Exact squared distances in voxel units (int64) of every True voxel to the nearest False
    voxel; False voxels 0. Equal to ``np.rint(scipy.ndimage.distance_transform_edt(mask) **
    2)`` for any mask with a False voxel within 4096 voxels of every True voxel.

    Args:
        mask: Boolean array, (z, y, x) or any number of axes.

    Returns:
        Int64 squared distances (in voxels, squared) of ``mask``'s shape.
    """
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return np.zeros(mask.shape, dtype=np.int64)
    if active_device() == "cuda":
        import cupy
        from cupyx.scipy import ndimage as cupy_ndimage

        distance = cupy_ndimage.distance_transform_edt(cupy.asarray(mask))
        return cupy.asnumpy(cupy.rint(distance * distance).astype(cupy.int64))
    if mask.all():
        from scipy import ndimage

        return np.rint(ndimage.distance_transform_edt(mask) ** 2).astype(np.int64)
    import edt

    squared = edt.edtsq(_for_edt(mask), black_border=False, parallel=1)
    if squared.size and float(squared.max()) >= _FLOAT32_EXACT:  # beyond float32's integers
        from scipy import ndimage

        return np.rint(ndimage.distance_transform_edt(mask) ** 2).astype(np.int64)
    return squared.astype(np.int64)


def offset_lengths(offsets: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """Lengths in mm of integer voxel offsets (N, ndim), in SciPy's EDT arithmetic: each
    offset scaled by its spacing, squared, summed in axis order, square-rooted. A distance of
    n voxels along one axis is therefore ``sqrt((n * s) ** 2)``, exactly what SciPy (and
    MONAI, which uses it) computes, never a difference of two scaled coordinates.

    Args:
        offsets: Integer voxel offsets, (N, ndim), axes in the spacing's order.
        spacing: Voxel spacing in mm per axis.

    Returns:
        Float64 lengths in mm, (N,).
    """
    scaled = offsets.astype(np.float64) * np.asarray(spacing, dtype=np.float64)
    return np.sqrt(np.add.reduce(scaled * scaled, axis=1))


def deepest_voxels(mask: np.ndarray, spacing: Sequence[float] | None = None) -> np.ndarray:
    """Every voxel of ``mask`` at the maximum distance to a False voxel (voxel units without
    ``spacing``, mm with it), as (N, ndim) int64 indices in C order; (0, ndim) for an empty
    mask. The set equals SciPy's ``np.argwhere(d == d.max())``: exact on both devices.

    Args:
        mask: Boolean array, (z, y, x) or any number of axes.
        spacing: Voxel spacing in mm per axis, in the mask's axis order; None for voxel units.

    Returns:
        The tied deepest voxels, (N, ndim) int64, in C order.
    """
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return np.zeros((0, mask.ndim), dtype=np.int64)
    if mask.all():  # no False voxel in the array: SciPy's own convention decides
        from scipy import ndimage

        exact = ndimage.distance_transform_edt(mask, sampling=spacing)
        return np.argwhere(exact == exact.max())
    if spacing is None or len(set(float(s) for s in spacing)) == 1:
        # isotropic: the order of distances is the order of squared voxel distances (integers
        # under 2**24, at least 6e-8 apart relatively, far beyond any float rounding)
        squared = squared_voxel_distances(mask)
        deepest = np.argwhere(squared == squared.max())
        step = 1.0 if spacing is None else float(spacing[0])
        if step == 1.0 or len(deepest) == 1:
            return deepest
        # tied in mm: SciPy's arithmetic rounds one distance differently by its decomposition
        # ((5 * 0.7) ** 2 is 12.25, (3 * 0.7) ** 2 + (4 * 0.7) ** 2 is not) and by which of
        # several nearest False voxels its feature transform keeps, so its own transform decides
        from scipy import ndimage

        exact = ndimage.distance_transform_edt(mask, sampling=(step,) * mask.ndim)
        return np.argwhere(exact == exact.max())
    sampling = _sampling(spacing, mask.ndim)
    if active_device() == "cuda":
        return _deepest_from_features(mask, sampling)
    approximate = distance_transform(mask, sampling)
    peak = float(approximate.max())
    candidates = np.argwhere(approximate >= peak * (1 - 1e-5) - 1e-9)
    if len(candidates) > _MAX_CANDIDATES:  # a plateau: SciPy's exact transform decides
        from scipy import ndimage

        exact = ndimage.distance_transform_edt(mask, sampling=sampling)
        return np.argwhere(exact == exact.max())
    exact = _exact_distances_at(mask, candidates, peak * (1 + 1e-5) + 1e-9, sampling)
    return candidates[exact == exact.max()]


def _exact_distances_at(
    mask: np.ndarray, voxels: np.ndarray, radius: float, sampling: tuple[float, ...]
) -> np.ndarray:
    """Exact distances (SciPy's arithmetic) of ``voxels`` (N, ndim) to the nearest False voxel
    of ``mask``, each known to be at most ``radius`` mm: the False voxels within the window of
    that radius around each voxel are measured, the nearest kept."""
    reach = [int(np.ceil(radius / s)) for s in sampling]
    out = np.empty(len(voxels))
    for i, voxel in enumerate(voxels):
        window = tuple(
            slice(max(0, c - r), min(n, c + r + 1)) for c, r, n in zip(voxel, reach, mask.shape)
        )
        background = np.argwhere(~mask[window])
        offsets = background + np.array([w.start for w in window]) - voxel
        out[i] = offset_lengths(offsets, sampling).min()
    return out


def _deepest_from_features(mask: np.ndarray, sampling: tuple[float, ...]) -> np.ndarray:
    """GPU: exact distances from CuPy's feature transform (nearest False voxel's index)."""
    import cupy
    from cupyx.scipy import ndimage as cupy_ndimage

    device_mask = cupy.asarray(mask)
    _, features = cupy_ndimage.distance_transform_edt(
        device_mask, sampling=sampling, return_distances=True, return_indices=True
    )
    distance = _lengths_from_features(features, sampling, cupy)
    distance[~device_mask] = 0
    return cupy.asnumpy(cupy.argwhere(distance == distance.max()))


def _lengths_from_features(features, sampling: tuple[float, ...], xp) -> object:
    """Per voxel, the exact length (SciPy's arithmetic) of the offset to its feature voxel;
    ``features``: (ndim, *shape) indices, ``xp``: numpy or cupy."""
    total = None
    for axis, step in enumerate(sampling):
        grid = xp.arange(features.shape[axis + 1], dtype=xp.int64).reshape(
            [-1 if a == axis else 1 for a in range(features.shape[0])]
        )
        scaled = (features[axis] - grid).astype(xp.float64) * step
        total = scaled * scaled if total is None else total + scaled * scaled
    return xp.sqrt(total)


def nearest_distances(
    sources: np.ndarray, targets: np.ndarray, spacing: Sequence[float]
) -> np.ndarray:
    """For each True voxel of ``sources`` (C order), the exact distance in mm to the nearest
    True voxel of ``targets`` (both non-empty, same shape), from the integer offset between
    them (:func:`offset_lengths`). GPU: CuPy's feature transform; CPU: a KD-tree over the
    target voxels when they are few against the crop, else SciPy's feature transform.

    Args:
        sources: Boolean array (e.g. a surface, (z, y, x)), at least one True voxel.
        targets: Boolean array of the same shape, at least one True voxel.
        spacing: Voxel spacing in mm per axis, in the arrays' axis order.

    Returns:
        Float64 distances in mm, one per True voxel of ``sources`` in C order, (N,).
    """
    sampling = _sampling(spacing, targets.ndim)
    if active_device() == "cuda":
        import cupy
        from cupyx.scipy import ndimage as cupy_ndimage

        features = cupy_ndimage.distance_transform_edt(
            ~cupy.asarray(targets), sampling=sampling, return_distances=False, return_indices=True
        )
        where = cupy.asarray(sources)
        return cupy.asnumpy(_lengths_from_features(features, sampling, cupy)[where])
    n_surface = int(np.count_nonzero(targets)) + int(np.count_nonzero(sources))
    # A distance transform costs ~ the crop size; a KD-tree ~ the number of surface voxels.
    if targets.size <= 16 * n_surface:
        return _distances_by_transform(sources, targets, sampling)
    return _distances_kdtree(sources, targets, sampling)


def _distances_by_transform(
    sources: np.ndarray, targets: np.ndarray, sampling: Sequence[float]
) -> np.ndarray:
    """SciPy's exact transform of the crop, read at the source voxels."""
    from scipy import ndimage

    return ndimage.distance_transform_edt(~targets, sampling=sampling)[sources]


def _distances_kdtree(
    sources: np.ndarray, targets: np.ndarray, sampling: tuple[float, ...]
) -> np.ndarray:
    """The KD-tree finds each source voxel's nearest target voxel; the distance is then computed
    from the integer offset to it (:func:`offset_lengths`), so that a distance equal to the NSD
    tolerance compares equal to it as on the transform path (``4*0.7 - 3*0.7`` is not
    ``0.7``)."""
    from scipy.spatial import cKDTree

    target_voxels = np.argwhere(targets)
    source_voxels = np.argwhere(sources)
    step = np.asarray(sampling, dtype=np.float64)
    tree = cKDTree(target_voxels * step, leafsize=32)
    nearest = tree.query(source_voxels * step, k=1)[1]
    return offset_lengths(target_voxels[nearest] - source_voxels, sampling)
