"""The phantom generator computes each lesion in its own neighbourhood: the same volumes, to the
voxel and to the bit, as its definition computed on the whole volume (the same code with every
box widened to the volume), for any seed, case, shape and spacing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

from intrabench.datasets import phantoms
from intrabench.datasets.phantoms import make_phantom


def _whole_volume(shape, *args, **kwargs) -> tuple[slice, ...]:
    return tuple(slice(0, side) for side in shape)


@pytest.fixture
def on_the_whole_volume(monkeypatch):
    """The generator as defined: every ellipsoid and every lesion's region is the volume."""

    def whole(*args, **kwargs):
        with monkeypatch.context() as patch:
            patch.setattr(phantoms, "_ellipsoid_box", _whole_volume)
            patch.setattr(phantoms, "_union_box", lambda boxes, shape, margin: _whole_volume(shape))
            return make_phantom(*args, **kwargs)

    return whole


def assert_same_phantom(whole, seed, index, shape, spacing, n_lesions=(2, 4)):
    volume, label = make_phantom(seed, index, shape, spacing, n_lesions)
    expected_volume, expected = whole(seed, index, shape, spacing, n_lesions)
    assert np.array_equal(label, expected)
    assert volume.array.dtype == np.float32
    assert np.array_equal(volume.array.view(np.uint32), expected_volume.array.view(np.uint32))


def test_the_benchmark_phantoms_equal_the_whole_volume_definition(on_the_whole_volume):
    """bench_real_cpu.py's CT-size phantoms (seed 7, 24 x 512 x 512, 5 x 0.7 x 0.7 mm), and
    the demo's default."""
    for index in (0, 1):
        assert_same_phantom(on_the_whole_volume, 7, index, (24, 512, 512), (5.0, 0.7, 0.7))
    for index in range(4):
        assert_same_phantom(on_the_whole_volume, 0, index, (32, 96, 96), (2.5, 0.8, 0.8))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    index=st.integers(0, 50),
    shape=st.tuples(st.integers(10, 40), st.integers(12, 70), st.integers(12, 70)),
    spacing=st.tuples(st.floats(0.3, 6.0), st.floats(0.2, 2.0), st.floats(0.2, 2.0)),
    most=st.integers(1, 8),
)
def test_any_phantom_equals_the_whole_volume_definition(seed, index, shape, spacing, most):
    """Lesions cut by the volume's edges, lobes far from their lesion, lesions that touch and
    are redrawn: all as on the whole volume."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(phantoms, "_ellipsoid_box", _whole_volume)
        patch.setattr(phantoms, "_union_box", lambda boxes, shape, margin: _whole_volume(shape))
        try:
            expected_volume, expected = make_phantom(seed, index, shape, spacing, (1, most))
        except ValueError:  # a lesion that cannot be placed in so small a volume
            return
    volume, label = make_phantom(seed, index, shape, spacing, (1, most))
    assert np.array_equal(label, expected)
    assert np.array_equal(volume.array.view(np.uint32), expected_volume.array.view(np.uint32))


@settings(max_examples=60, deadline=None)
@given(
    shape=st.tuples(st.integers(4, 24), st.integers(4, 24), st.integers(4, 24)),
    corners=st.lists(
        st.tuples(
            st.integers(0, 23),
            st.integers(0, 23),
            st.integers(0, 23),
            st.integers(1, 6),
            st.integers(1, 6),
            st.integers(1, 6),
        ),
        min_size=1,
        max_size=3,
    ),
    seed=st.integers(0, 1000),
)
def test_the_dilation_within_a_lesions_region_equals_the_whole_volumes(shape, corners, seed):
    """A lesion's separation test dilates it within its region (its boxes grown by the
    separation): the same voxels as dilating it in the whole volume."""
    rng = np.random.default_rng(seed)
    boxes = []
    for z, y, x, dz, dy, dx in corners:
        start = (min(z, shape[0] - 1), min(y, shape[1] - 1), min(x, shape[2] - 1))
        box = tuple(
            slice(start[a], min(shape[a], start[a] + d)) for a, d in enumerate((dz, dy, dx))
        )
        inside = rng.random(tuple(s.stop - s.start for s in box)) < 0.5
        boxes.append((box, inside))
    region = phantoms._union_box([box for box, _ in boxes], shape, margin=phantoms._SEPARATION)
    lesion = np.zeros(tuple(s.stop - s.start for s in region), dtype=bool)
    whole = np.zeros(shape, dtype=bool)
    for box, inside in boxes:
        lesion |= phantoms._paste(box, inside, region)
        whole[box] |= inside
    expected = ndimage.binary_dilation(whole, iterations=phantoms._SEPARATION)
    got = np.zeros(shape, dtype=bool)
    got[region] = ndimage.binary_dilation(lesion, iterations=phantoms._SEPARATION)
    assert np.array_equal(got, expected)
