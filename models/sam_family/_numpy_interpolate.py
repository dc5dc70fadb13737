"""Bilinear resizing and the sigmoid threshold in NumPy, as torch computes them.

The SAM-family adapters whose encoder and decoder run in an exported backend on the CPU
(:attr:`~._sam_common.SamFamilyModel.runs_without_torch`) post-process the decoder's logits
without torch: :func:`resize_bilinear` is ``torch.nn.functional.interpolate(...,
mode='bilinear', align_corners=False)`` (no antialiasing) of one 2D array, with torch's CPU
index and weight rule in float32; :func:`positive_probability` is ``sigmoid(logits) > 0.5`` in
float32, and :func:`resized_positive_probability` both at once, fast, giving the same pixels
as torch (``tests/models2d/test_numpy_interpolate.py``).
"""

from __future__ import annotations

import numpy as np


def source_indices(
    input_size: int, output_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(first index, second index, first weight, second weight) of each output position along
    one axis, as torch's CPU kernel computes them for ``align_corners=False``: the source
    coordinate ``scale * (i + 0.5) - 0.5`` (``scale = input / output`` in float32) clamped at 0;
    the lower neighbour its floor (at most ``input - 1``), the upper one the next index unless
    the lower is the last; weights ``1 - l`` and ``l`` with ``l`` the coordinate's fraction."""
    scale = np.float32(input_size) / np.float32(output_size)
    positions = np.arange(output_size, dtype=np.float64) + 0.5
    # one rounding of scale * (i + 0.5) - 0.5, as torch's fused multiply-add gives it
    source = np.maximum((np.float64(scale) * positions - 0.5).astype(np.float32), np.float32(0))
    lower = np.minimum(np.floor(source).astype(np.int64), input_size - 1)
    fraction = np.clip(source - lower.astype(np.float32), np.float32(0), np.float32(1))
    upper = lower + (lower < input_size - 1)
    return lower, upper, (np.float32(1) - fraction).astype(np.float32), fraction


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (the product of two float32 is exact in float64),
    as a fused multiply-add gives it."""
    return (a.astype(np.float64) * b + c).astype(np.float32)


def bilinear_at(
    values: np.ndarray, rows: tuple[np.ndarray, ...], cols: tuple[np.ndarray, ...]
) -> np.ndarray:
    """Bilinear values at output positions given by their :func:`source_indices` parts along
    the rows and the columns (indices broadcast together): along the columns first, then the
    rows, each pair combined as torch's vectorised CPU kernel combines it
    (``fma(first, first_weight, second * second_weight)``)."""
    top, bottom, top_weight, bottom_weight = rows
    left, right, left_weight, right_weight = cols
    upper = fused_multiply_add(values[top, left], left_weight, values[top, right] * right_weight)
    lower = fused_multiply_add(
        values[bottom, left], left_weight, values[bottom, right] * right_weight
    )
    return fused_multiply_add(upper, top_weight, lower * bottom_weight)


def resize_bilinear(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A (rows, cols) float array resized to ``size`` = (rows, cols), bilinear with
    ``align_corners=False`` as ``F.interpolate`` (float32 result), by :func:`bilinear_at`:
    equal to torch's result to the bit where its vectorised kernel runs (measured: 256-pixel
    logits brought to 512 x 512, 400 x 500, 512 x 342); within a few float32 roundings where
    torch takes another code path (narrow or shrunk columns)."""
    values = np.asarray(values, dtype=np.float32)
    rows = tuple(part[:, None] for part in source_indices(values.shape[0], int(size[0])))
    cols = tuple(part[None, :] for part in source_indices(values.shape[1], int(size[1])))
    return bilinear_at(values, rows, cols)


def positive_probability(logits: np.ndarray) -> np.ndarray:
    """``sigmoid(logits) > 0.5`` computed in float32 (as the official code thresholds)."""
    from scipy.special import expit

    return expit(np.asarray(logits, dtype=np.float32)) > np.float32(0.5)


#: below this magnitude float32 ``sigmoid(x) > 0.5`` is not the sign of x (it rounds to 0.5
#: for x up to about 1.2e-7); above it, it is
SIGMOID_ROUNDING_BAND = 1e-6


def resized_positive_probability(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``positive_probability(resize_bilinear(values, size))``, fast: OpenCV's float32
    ``INTER_LINEAR`` (the same sampling rule, other rounding) decides every pixel whose value
    is clear of the threshold by more than its rounding can move it; the few others are
    computed as :func:`resize_bilinear` computes them."""
    import cv2

    values = np.ascontiguousarray(values, dtype=np.float32)
    rows, cols = int(size[0]), int(size[1])
    fast = cv2.resize(values, (cols, rows), interpolation=cv2.INTER_LINEAR)
    if fast.shape != (rows, cols):  # OpenCV drops a size-1 axis of a (1, n) or (n, 1) input
        fast = fast.reshape(rows, cols)
    largest = float(np.abs(values).max(initial=0.0))
    # both ways sample the same two neighbours per axis with weights that sum to 1: they
    # differ by a few float32 roundings of the largest value, far less than this margin
    margin = SIGMOID_ROUNDING_BAND + 64 * float(np.finfo(np.float32).eps) * largest
    mask = fast > 0
    near = np.abs(fast) <= margin
    if near.any():
        at_rows, at_cols = np.nonzero(near)
        exact = bilinear_at(
            values,
            tuple(part[at_rows] for part in source_indices(values.shape[0], rows)),
            tuple(part[at_cols] for part in source_indices(values.shape[1], cols)),
        )
        mask[at_rows, at_cols] = positive_probability(exact)
    return mask
