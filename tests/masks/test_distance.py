"""The project's one distance-transform module against SciPy's, the reference.

Hypothesis draws masks and anisotropic spacings; the fast transform must equal SciPy's within
1e-4 mm, and the exact functions (squared voxel distances, deepest voxels, nearest distances)
must equal it exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from intrabench.masks import distance

masks = arrays(
    bool,
    st.tuples(st.integers(1, 9), st.integers(1, 12), st.integers(1, 12)),
    elements=st.booleans(),
)
spacings = st.tuples(*[st.sampled_from([0.5, 0.7, 0.7421875, 0.8, 1.0, 1.5, 2.5, 3.0])] * 3)


@pytest.fixture(autouse=True)
def _cpu():
    distance.set_device("cpu")
    yield
    distance.set_device("auto")


@settings(max_examples=200, deadline=None)
@given(masks, spacings)
def test_transform_matches_scipy_within_1e_4_mm(mask, spacing):
    mask = mask.copy()
    mask.flat[0] = False  # SciPy's convention without background is its own (checked below)
    expected = ndimage.distance_transform_edt(mask, sampling=spacing)
    np.testing.assert_allclose(
        distance.distance_transform(mask, spacing), expected, rtol=0, atol=1e-4
    )


@settings(max_examples=200, deadline=None)
@given(masks)
def test_squared_voxel_distances_are_exact(mask):
    expected = np.rint(ndimage.distance_transform_edt(mask) ** 2).astype(np.int64)
    if not mask.any():
        expected[:] = 0
    np.testing.assert_array_equal(distance.squared_voxel_distances(mask), expected)


@settings(max_examples=300, deadline=None)
@given(masks, st.one_of(st.none(), spacings))
def test_deepest_voxels_are_scipys_maxima(mask, spacing):
    reference = ndimage.distance_transform_edt(mask, sampling=spacing)
    expected = np.argwhere(reference == reference.max()) if mask.any() else np.zeros((0, 3))
    np.testing.assert_array_equal(distance.deepest_voxels(mask, spacing), expected)


def test_deepest_voxels_in_isotropic_mm_follow_scipys_rounding():
    """Found by hypothesis in CI: at 0.7 mm, (0, 4, 0) is 5 voxels from its background voxel
    and (0, 4, 1) is (3, 4, 0) from its: both 3.5 mm, but SciPy's arithmetic gives 3.5 and
    3.4999999999999996, so only voxels of the first kind are its maxima."""
    mask = np.ones((4, 12, 2), dtype=bool)
    mask[0, 9, 0] = mask[3, 0, 1] = False
    reference = ndimage.distance_transform_edt(mask, sampling=(0.7, 0.7, 0.7))
    assert np.argwhere(reference == reference.max()).tolist() == [[0, 4, 0], [3, 5, 1]]
    np.testing.assert_array_equal(
        distance.deepest_voxels(mask, (0.7, 0.7, 0.7)), [[0, 4, 0], [3, 5, 1]]
    )
    assert len(distance.deepest_voxels(mask)) == 4  # in voxel units all four are at 5


def test_deepest_voxels_on_a_hand_made_slab():
    # a 5-voxel-thick slab in z, spacing 2 mm in z and 1 mm in y, x: the centre plane z=3 is
    # 6 mm from the background in z but the box is 9 x 9 in y, x: 5 mm from its y/x faces
    mask = np.zeros((7, 11, 11), dtype=bool)
    mask[1:6, 1:10, 1:10] = True
    np.testing.assert_array_equal(distance.deepest_voxels(mask, (2.0, 1.0, 1.0)), [[3, 5, 5]])
    # in voxel units the centre plane is 3 voxels from z's faces; y, x in 3..7 are at least
    # 3 voxels from theirs: a 5 x 5 plateau
    expected = [[3, y, x] for y in range(3, 8) for x in range(3, 8)]
    np.testing.assert_array_equal(distance.deepest_voxels(mask), expected)


def test_deepest_voxels_of_a_plateau_use_the_exact_fallback():
    mask = np.zeros((3, 40, 40), dtype=bool)
    mask[1] = True  # one plane: every voxel at 1 slice from the background, a plateau
    mask[1, 0] = False
    expected_map = ndimage.distance_transform_edt(mask, sampling=(0.7, 0.7421875, 0.8))
    expected = np.argwhere(expected_map == expected_map.max())
    assert len(expected) > distance._MAX_CANDIDATES
    np.testing.assert_array_equal(distance.deepest_voxels(mask, (0.7, 0.7421875, 0.8)), expected)


@settings(max_examples=150, deadline=None)
@given(masks, masks, spacings)
def test_nearest_distances_are_exact(first, second, spacing):
    shape = tuple(min(a, b) for a, b in zip(first.shape, second.shape))
    sources, targets = (
        first[: shape[0], : shape[1], : shape[2]],
        second[: shape[0], : shape[1], : shape[2]],
    )
    if not sources.any() or not targets.any():
        return
    expected = ndimage.distance_transform_edt(~targets, sampling=spacing)[sources]
    np.testing.assert_array_equal(distance.nearest_distances(sources, targets, spacing), expected)


def test_offset_lengths_use_scipys_arithmetic():
    # 3 voxels of 0.7 mm: sqrt((3 * 0.7) ** 2), exactly what the transform gives
    assert (
        distance.offset_lengths(np.array([[0, 3, 0]]), (1.0, 0.7, 1.0))[0]
        == ndimage.distance_transform_edt(
            np.array([[1, 1, 1, 0]], bool)[None].transpose(0, 2, 1).reshape(1, 4, 1),
            sampling=(1.0, 0.7, 1.0),
        )[0, 0, 0]
    )


def test_asking_for_cuda_without_cupy_is_a_one_line_error(monkeypatch):
    from intrabench.errors import UserError

    monkeypatch.setattr(distance, "_cupy_available", lambda: False)
    distance.set_device("cuda")
    with pytest.raises(UserError, match="CuPy"):
        distance.active_device()
    distance.set_device("auto")
    assert distance.active_device() == "cpu"


def test_the_device_travels_to_worker_processes_through_the_environment(monkeypatch):
    import os

    distance.set_device("cpu")
    assert os.environ[distance.ENVIRONMENT_VARIABLE] == "cpu"


def test_read_only_masks_and_views_of_them_are_transformed():
    """The edt package raises "buffer source array is read-only" on a read-only mask (as a Dask
    worker receives them); the transforms copy such a mask and give SciPy's answer."""
    mask = np.zeros((6, 8, 9), dtype=bool)
    mask[1:5, 2:7, 2:8] = True
    mask.flags.writeable = False
    for shown in (mask, mask[1:5], mask[:, ::2]):
        reference = ndimage.distance_transform_edt(shown, sampling=(2.0, 1.0, 1.0))
        np.testing.assert_allclose(
            distance.distance_transform(shown, (2.0, 1.0, 1.0)), reference, rtol=1e-5
        )
        np.testing.assert_array_equal(
            distance.squared_voxel_distances(shown),
            np.rint(ndimage.distance_transform_edt(shown) ** 2),
        )
        assert len(distance.deepest_voxels(shown)) > 0
    assert not mask.flags.writeable
