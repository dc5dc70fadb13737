"""intrabench.masks.connected_components: cc3d's labelling, safe on masks that are a line
of voxels (cc3d 4.1's boolean path raised "maximum length exception" on [[[1, 0, 1]]] with
26-connectivity: found by hypothesis in tests/datasets/test_label_dtypes.py; its single-row path
misread strided rows; cc3d rejects a read-only view: "buffer source array is read-only")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from intrabench.masks import connected_components


def test_a_line_of_voxels_with_gaps_is_labelled():
    """The failing case of the label test and its two other orientations, also as a strided
    view of a row."""
    mask = np.array([[[True, False, True, False, False, True]]])
    labelled, count = connected_components(mask, connectivity=26, return_N=True)
    assert count == 3
    np.testing.assert_array_equal(labelled, [[[1, 0, 2, 0, 0, 3]]])
    for shape in [(6, 1, 1), (1, 6, 1)]:
        labelled, count = connected_components(mask.reshape(shape), 26, return_N=True)
        assert count == 3
        np.testing.assert_array_equal(labelled.ravel(), [1, 0, 2, 0, 0, 3])
    strided = np.repeat(mask, 2, axis=2)[:, :, ::2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(connected_components(strided, 26), [[[1, 0, 2, 0, 0, 3]]])


@st.composite
def masks(draw):
    """A small boolean slice or volume (lines of voxels included), C-ordered, Fortran-ordered
    or a strided view, writeable or read-only (as the Dask workers' masks arrive), and a
    connectivity of its dimension."""
    shape = draw(st.lists(st.integers(1, 6), min_size=2, max_size=3).map(tuple))
    mask = draw(arrays(bool, shape))
    layout = draw(st.sampled_from(["c", "fortran", "strided"]))
    if layout == "fortran":
        mask = np.asfortranarray(mask)
    elif layout == "strided":
        axis = draw(st.integers(0, mask.ndim - 1))
        every_other = tuple(
            slice(None, None, 2) if a == axis else slice(None) for a in range(mask.ndim)
        )
        mask = np.repeat(mask, 2, axis=axis)[every_other]  # the same values, not contiguous
    if draw(st.booleans()):
        mask.flags.writeable = False
    connectivity = draw(st.sampled_from([4, 8] if mask.ndim == 2 else [6, 18, 26]))
    return mask, connectivity


@settings(max_examples=400, deadline=None)
@given(case=masks())
def test_components_are_scipys(case):
    """The same partition as scipy.ndimage.label with the same neighbourhood, labels 1..N."""
    mask, connectivity = case
    labelled, count = connected_components(mask, connectivity=connectivity, return_N=True)
    rank = {4: 1, 8: 2, 6: 1, 18: 2, 26: 3}[connectivity]
    reference, expected = ndimage.label(
        mask, structure=ndimage.generate_binary_structure(mask.ndim, rank)
    )
    assert count == expected
    assert set(np.unique(labelled[mask]).tolist()) == set(range(1, count + 1))
    assert np.array_equal(labelled > 0, mask)
    pairs = set(zip(labelled[mask].tolist(), reference[mask].tolist(), strict=True))
    assert len(pairs) == count  # one scipy component for each of ours, and back


@pytest.mark.parametrize("dtype", [bool, np.uint8, np.int32])
def test_read_only_masks_and_views_of_them_are_labelled(dtype):
    """cc3d itself raises "buffer source array is read-only" on a read-only view (a slice of a
    read-only label map, the uint8 view of a read-only boolean mask); the helper copies."""
    volume = np.zeros((3, 4, 5), dtype=dtype)
    volume[1, 1, 1] = volume[1, 1, 3] = 1
    volume.flags.writeable = False
    labelled, count = connected_components(volume, connectivity=26, return_N=True)
    assert count == 2 and labelled[1, 1, 1] == 1 and labelled[1, 1, 3] == 2
    labelled, count = connected_components(volume[1], connectivity=8, return_N=True)
    assert count == 2 and labelled[1, 3] == 2
    assert not volume.flags.writeable and volume[1, 1, 1] == 1  # the mask is never written


def test_other_dtypes_are_passed_as_they_are():
    labels = np.array([[[1, 1, 2, 0, 2]]], dtype=np.uint8)
    labelled = connected_components(labels, connectivity=26)
    np.testing.assert_array_equal(labelled, [[[1, 1, 2, 0, 3]]])


@pytest.mark.parametrize("connectivity", [4, 8])
def test_slices(connectivity):
    mask = np.array([[1, 0, 1], [0, 1, 0]], dtype=bool)
    _, count = connected_components(mask, connectivity=connectivity, return_N=True)
    assert count == (3 if connectivity == 4 else 1)
