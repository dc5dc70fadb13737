"""Helpers shared by the classical (weight-free) baselines."""

from __future__ import annotations

import numpy as np


def intensity_window(image: np.ndarray, low: float = 0.5, high: float = 99.5) -> tuple[float, float]:
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
