"""Helpers shared by the classical (weight-free) baselines."""

from __future__ import annotations

import warnings

import numpy as np

from intrabench.interfaces import Model
from intrabench.io.volume import Volume
from intrabench.masks import bounding_box


def intensity_window(
    image: np.ndarray, low: float = 0.5, high: float = 99.5
) -> tuple[float, float]:
    """Percentile window of a volume (paper Appendix A: 0.5th-99.5th), never degenerate."""
    sample = image[:: max(1, image.shape[0] // 16)]
    lo, hi = np.percentile(sample, [low, high])
    if hi <= lo:
        hi = lo + 1.0
    return float(lo), float(hi)


def normalise(image: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    lo, hi = window
    return ((np.clip(image, lo, hi) - lo) / (hi - lo)).astype(np.float32)


def expand(lo: int, hi: int, margin: int, size: int) -> tuple[int, int]:
    """Inclusive [lo, hi] grown by ``margin`` and clipped to [0, size - 1]."""
    return max(0, lo - margin), min(size - 1, hi + margin)


def mask_corners(mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Inclusive (z, y, x) low and high corners of a boolean mask, None if it is empty or None.

    Uses the engine's margin-scanning bounding box (no list of every foreground voxel)."""
    box = bounding_box(mask) if mask is not None else None
    if box is None:
        return None
    return np.array([s.start for s in box]), np.array([s.stop - 1 for s in box])


def additions_from_new_positives(
    mask: np.ndarray, previous: np.ndarray | None, positives: np.ndarray
) -> np.ndarray:
    """``mask`` with only those voxels added to ``previous`` that a new positive click asks for:
    of the voxels ``mask`` adds (``mask & ~previous``), the connected pieces (26-connected in
    3D, 8 in 2D) holding a positive click that lies outside ``previous``. Negative clicks thus
    only carve out, and a correction never grows the prediction elsewhere (a region grown
    again in a larger region of interest, a random walker solved on a larger crop).
    ``positives``: (N, ndim) voxel coordinates on ``mask``'s grid; ``previous`` None: the first
    prediction, returned as it is."""
    if previous is None:
        return mask
    added = mask & ~previous
    if not added.any():
        return mask
    from intrabench.masks import connected_components

    points = np.asarray(positives, dtype=np.int64).reshape(-1, mask.ndim)
    inside = np.all((points >= 0) & (points < np.array(mask.shape)), axis=1)
    points = points[inside]
    new = points[~previous[tuple(points.T)]] if len(points) else points
    if not len(new):
        return mask & previous
    pieces = connected_components(added, connectivity=26 if mask.ndim == 3 else 8)
    wanted = np.unique(pieces[tuple(new.T)])
    return previous | np.isin(pieces, wanted[wanted > 0])


class VolumeBaseline(Model):
    """Common state of the classical 3D baselines: the image, its windowed copy, a timer.

    ``self._normalised`` is the image clipped to its 0.5-99.5 percentile window and scaled to
    [0, 1], (z, y, x).
    """

    dimension = 3

    def __init__(self) -> None:
        self._image: Volume | None = None
        self._normalised: np.ndarray | None = None
        self._seconds = 0.0

    def set_case(self, image: Volume) -> None:
        if image is not self._image:
            self._image = image
            self._normalised = normalise(image.array, intensity_window(image.array))

    def _require_case(self) -> None:
        if self._image is None or self._normalised is None:
            raise RuntimeError(f"{type(self).__name__}: set_case() was not called")

    def model_seconds(self) -> float:
        return self._seconds

    def reset_timer(self) -> None:
        self._seconds = 0.0


def solve_random_walker(data: np.ndarray, seeds: np.ndarray, beta: float) -> np.ndarray:
    """skimage's random walker (conjugate gradient, Jacobi preconditioner) on any dimension.

    Its "probability range outside [0, 1]" warning reflects the solver tolerance and does not
    change the labels; its "only segments unlabeled areas" warning means the seeds cover every
    voxel, and the seeds are the answer (what it returns). Both are silenced here so that
    user-facing runs stay readable (the demo printed the second three times).
    """
    from skimage.segmentation import random_walker

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The probability range is outside")
        warnings.filterwarnings("ignore", message="Random walker only segments unlabeled areas")
        return random_walker(data, seeds, beta=beta, mode="cg_j", tol=1e-3)
