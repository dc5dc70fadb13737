"""Slice intensities for the 2D SAM-family adapters: a percentile window and 8-bit scaling.

Arrays are (y, x) slices or whole (z, y, x) volumes of raw intensities (HU for CT).
"""

from __future__ import annotations

import numpy as np

#: percentile window of Appendix A (0.5th and 99.5th percentiles)
PERCENTILES = (0.5, 99.5)


def percentile_window(
    values: np.ndarray, low: float = PERCENTILES[0], high: float = PERCENTILES[1]
) -> tuple[float, float]:
    """The (low, high) percentiles of ``values`` (all voxels), never degenerate."""
    lo, hi = np.percentile(np.asarray(values, dtype=np.float32), [low, high])
    lo, hi = float(lo), float(hi)
    if not hi > lo:
        hi = lo + 1.0
    return lo, hi


def to_uint8(image: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    """Clip ``image`` to ``window`` and scale it linearly to 0..255, rounded to uint8.

    All four models were trained on 8-bit images, so the adapters quantise like their
    pipelines do (rounded here; the reference truncates).
    """
    lo, hi = window
    scaled = (np.clip(image.astype(np.float32), lo, hi) - lo) * (255.0 / (hi - lo))
    return np.rint(scaled).astype(np.uint8)
