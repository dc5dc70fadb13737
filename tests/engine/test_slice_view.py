"""In-plane slice views (intrabench.models.sam_family._slice_view): the stored view of a canonical slice is
the file's own slice for all 48 axis-aligned orientations; points, boxes and masks map
consistently both ways."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk
from hypothesis import given, settings
from hypothesis import strategies as st

from intrabench.io.volume import volume_from_sitk
from intrabench.models.sam_family._slice_view import SliceView
from intrabench.types import Box2D

from .test_volume import _image, _signed_permutations


def _stored_slices(data_kji: np.ndarray, volume) -> np.ndarray:
    """The file's array with its axial voxel axis first, running as canonical z, and the two
    in-plane axes in the file's own order and direction: what a 2D model reading the file
    as stored sees on each axial slice."""
    orientation = volume.geometry.orientation()
    axial = next(v for v, (ras, _sign) in enumerate(orientation) if int(ras) == 2)
    slices = np.moveaxis(data_kji, 2 - axial, 0)  # numpy axis of voxel axis v is 2 - v
    return slices[::-1] if orientation[axial][1] < 0 else slices


@pytest.mark.parametrize("direction", list(_signed_permutations()))
def test_stored_view_is_the_files_slice_for_all_48_orientations(direction):
    image, data = _image(direction, size=(4, 5, 3))
    volume = volume_from_sitk(image)
    view = SliceView.of(volume, "stored")
    stored = _stored_slices(data, volume)
    assert stored.shape[0] == volume.shape[0]
    for z in range(volume.shape[0]):
        np.testing.assert_array_equal(view.image(volume.array[z]), stored[z])
        assert view.shape(volume.shape[1:]) == stored[z].shape
        np.testing.assert_array_equal(view.to_canonical(stored[z]), volume.array[z])


def test_common_files_lps_identity_is_the_canonical_slice_turned_180_degrees():
    image, _ = _image((1, 0, 0, 0, 1, 0, 0, 0, 1))
    volume = volume_from_sitk(image)
    assert SliceView.of(volume, "stored") == SliceView(flip_y=True, flip_x=True, transpose=False)
    assert SliceView.of(volume, "canonical").is_identity
    with pytest.raises(ValueError, match="slice view must be one of"):
        SliceView.of(volume, "radiological")


views = st.builds(SliceView, st.booleans(), st.booleans(), st.booleans())


@settings(max_examples=200, deadline=None)
@given(view=views, height=st.integers(1, 9), width=st.integers(1, 9), data=st.data())
def test_points_boxes_and_masks_map_consistently(view, height, width, data):
    canonical = np.arange(height * width).reshape(height, width)
    seen = view.image(canonical)
    y = data.draw(st.integers(0, height - 1))
    x = data.draw(st.integers(0, width - 1))
    [[row, col]] = view.points(np.array([[y, x]]), (height, width))
    assert seen[row, col] == canonical[y, x]  # the point lands on the same voxel
    y2 = data.draw(st.integers(y, height - 1))
    x2 = data.draw(st.integers(x, width - 1))
    box = view.box(Box2D(y, x, y2, x2), (height, width))
    inside = np.zeros((height, width), bool)
    inside[y : y2 + 1, x : x2 + 1] = True
    in_view = np.zeros(seen.shape, bool)
    in_view[box.y_min : box.y_max + 1, box.x_min : box.x_max + 1] = True
    np.testing.assert_array_equal(view.image(inside), in_view)  # the same voxels boxed
    np.testing.assert_array_equal(view.to_canonical(seen), canonical)


def test_reads_the_direction_of_a_real_file(tmp_path):
    path = tmp_path / "x.nii.gz"
    image, data = _image((0, 1, 0, -1, 0, 0, 0, 0, 1))  # i along -y... stored transposed
    sitk.WriteImage(image, str(path))
    from intrabench.io.volume import read_volume

    volume = read_volume(path)
    view = SliceView.of(volume, "stored")
    assert view.transpose
    np.testing.assert_array_equal(view.image(volume.array[0]), _stored_slices(data, volume)[0])
