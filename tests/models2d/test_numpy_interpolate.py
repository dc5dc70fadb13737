"""LiteMedSAM's post-processing without torch (models/sam_family/_numpy_interpolate.py) against torch's own:
``F.interpolate(..., mode='bilinear', align_corners=False)`` and ``sigmoid(x) > 0.5``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
F = torch.nn.functional

from intrabench.models.sam_family._numpy_interpolate import (  # noqa: E402
    positive_probability,
    resize_bilinear,
    resized_positive_probability,
    source_indices,
)


def _torch_resized(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return F.interpolate(
        torch.from_numpy(values)[None, None], size=size, mode="bilinear", align_corners=False
    )[0, 0].numpy()


def _torch_mask(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    return (torch.sigmoid(torch.from_numpy(_torch_resized(values, size))) > 0.5).numpy()


def test_the_sampling_rule_by_hand():
    """2 -> 4 pixels: source coordinates (i + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25,
    0.75, 1.25 (the last pixel's upper neighbour is itself)."""
    lower, upper, first, second = source_indices(2, 4)
    assert lower.tolist() == [0, 0, 0, 1] and upper.tolist() == [1, 1, 1, 1]
    np.testing.assert_array_equal(second, np.float32([0.0, 0.25, 0.75, 0.25]))
    np.testing.assert_array_equal(first, np.float32([1.0, 0.75, 0.25, 0.75]))
    values = np.float32([[0.0, 4.0], [8.0, 12.0]])
    np.testing.assert_array_equal(resize_bilinear(values, (4, 4))[0], [0.0, 1.0, 3.0, 4.0])
    np.testing.assert_array_equal(resize_bilinear(values, (4, 4))[:, 0], [0.0, 2.0, 6.0, 8.0])


@pytest.mark.parametrize(
    "low, high",
    [
        ((256, 256), (512, 512)),
        ((205, 256), (400, 500)),
        ((256, 171), (512, 342)),
        ((256, 256), (100, 60)),
    ],
)
def test_logits_resized_as_litemedsam_resizes_them_are_torchs_to_the_bit(low, high):
    values = (np.random.default_rng(0).standard_normal(low) * 8).astype(np.float32)
    np.testing.assert_array_equal(resize_bilinear(values, high), _torch_resized(values, high))


shapes = st.tuples(st.integers(1, 40), st.integers(1, 40))
sizes = st.tuples(st.integers(1, 90), st.integers(1, 90))


@settings(max_examples=150, deadline=None)
@given(
    low=shapes,
    high=sizes,
    scale=st.sampled_from([1e-7, 1e-4, 1.0, 30.0]),
    zeros=st.floats(0.0, 0.6),
    seed=st.integers(0, 2**32 - 1),
)
def test_resized_masks_are_torchs_and_values_within_float32_rounding(low, high, scale, zeros, seed):
    """Any sizes (enlarged, shrunk, one pixel), logits from near the sigmoid's rounding band
    (1e-7: float32 sigmoid(x) is exactly 0.5 for x up to about 1.2e-7) to large, with zeros."""
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(low) * scale).astype(np.float32)
    values[rng.random(low) < zeros] = 0.0
    expected = _torch_resized(values, high)
    largest = float(np.abs(values).max(initial=0.0))
    assert np.abs(resize_bilinear(values, high) - expected).max() <= 4e-7 * largest
    np.testing.assert_array_equal(
        resized_positive_probability(values, high), _torch_mask(values, high)
    )


def test_the_threshold_is_torchs_in_the_rounding_band():
    """Every float32 from 0 to 2e-7 and their negatives, sampled densely (float32 sigmoid is
    0.5 exactly below ~1.2e-7 and flips between 0.5 and the next float above that)."""
    start, stop = np.float32(0).view(np.int32), np.float32(2e-7).view(np.int32)
    values = np.arange(start, stop, 97, dtype=np.int32).view(np.float32)
    values = np.concatenate([values, -values])
    np.testing.assert_array_equal(
        positive_probability(values), (torch.sigmoid(torch.from_numpy(values)) > 0.5).numpy()
    )
