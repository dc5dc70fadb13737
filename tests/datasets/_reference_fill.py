"""The RTSTRUCT contour fill as it was before it was made faster: the reference the new fill
must equal pixel for pixel (tests/datasets/test_contour_fill.py) and the "before" of
benchmarks/bench_dicom_read.py."""

from __future__ import annotations

import numpy as np


def reference_fill(rows: np.ndarray, columns: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The fill before: every row against every edge, then a running sum of the toggles."""
    height, width = shape
    low, high = max(int(np.ceil(rows.min())), 0), min(int(np.floor(rows.max())), height - 1)
    mask = np.zeros(shape, dtype=bool)
    if high < low:
        return mask
    y0, x0 = rows, columns
    y1, x1 = np.roll(rows, -1), np.roll(columns, -1)
    centres = np.arange(low, high + 1, dtype=float)[:, None]
    crosses = (y0[None, :] <= centres) != (y1[None, :] <= centres)
    line, edge = np.nonzero(crosses)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = x0[edge] + (centres[line, 0] - y0[edge]) * (x1[edge] - x0[edge]) / (y1[edge] - y0[edge])
    left = max(int(np.ceil(columns.min())), 0)
    right = min(int(np.floor(columns.max())), width - 1)
    if right < left:
        return mask
    span = right - left + 1
    toggles = np.zeros((high - low + 1, span + 1), dtype=np.uint8)
    np.add.at(toggles, (line, np.clip(np.ceil(x) - left, 0, span).astype(np.int64)), 1)
    mask[low : high + 1, left : right + 1] = (
        np.cumsum(toggles[:, :span], axis=1, dtype=np.uint8) & 1
    ).view(bool)
    return mask
