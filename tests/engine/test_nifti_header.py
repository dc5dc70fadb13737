"""The NIfTI header fields check_nifti needs, read without nibabel, agree with nibabel's; the
axis-aligned orientation shortcut agrees with nibabel's io_orientation."""

from __future__ import annotations

import gzip
import itertools

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.errors import DataError
from intrabench.io.nifti_header import VOXEL_TYPES, data_layout
from intrabench.io.volume import _axis_aligned_orientation, check_nifti


def _nibabel_layout(path):
    proxy = nib.load(str(path)).dataobj
    return int(proxy.offset), tuple(proxy.shape), np.dtype(proxy.dtype)


@pytest.mark.parametrize("code", sorted(VOXEL_TYPES))
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_layout_equals_nibabels_for_every_type_version_and_byte_order(
    tmp_path, code, version, order, suffix
):
    dtype = np.dtype(order + VOXEL_TYPES[code])
    data = np.arange(5 * 4 * 3, dtype=dtype.newbyteorder("=")).reshape(5, 4, 3).astype(dtype)
    image_class = nib.Nifti1Image if version == 1 else nib.Nifti2Image
    header = image_class.header_class(endianness=order)
    header.set_data_dtype(dtype)
    path = tmp_path / f"v{version}{suffix}"
    nib.save(image_class(data, np.diag([0.8, 0.8, 2.5, 1.0]), header), str(path))

    layout = data_layout(path)

    assert layout is not None
    assert (layout.offset, layout.shape, layout.dtype) == _nibabel_layout(path)
    assert layout.dtype == dtype
    check_nifti(path)  # complete and finite


def test_a_4d_image_of_one_volume_keeps_its_fourth_axis(tmp_path):
    path = tmp_path / "t1.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((6, 5, 4, 1), np.float32), np.eye(4)), str(path))
    layout = data_layout(path)
    assert layout.shape == (6, 5, 4, 1)
    assert (layout.offset, layout.shape, layout.dtype) == _nibabel_layout(path)
    assert layout.end == layout.offset + 6 * 5 * 4 * 4


@pytest.mark.parametrize("damage", ["magic", "datatype", "bitpix", "offset", "short"])
def test_unusual_headers_are_left_to_nibabel(tmp_path, damage):
    path = tmp_path / "image.nii"
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((3, 4, 5), np.int16)), str(path))
    raw = bytearray(path.read_bytes())
    if damage == "magic":
        raw[344:348] = b"ni1\0"  # a header/image pair's magic in a single file
    elif damage == "datatype":
        raw[70:72] = np.int16(128).tobytes()  # RGB24
    elif damage == "bitpix":
        raw[72:74] = np.int16(32).tobytes()
    elif damage == "offset":
        raw[108:112] = np.float32(0.0).tobytes()
    else:
        raw = raw[:200]
    path.write_bytes(bytes(raw))
    assert data_layout(path) is None


def test_a_damaged_header_still_gets_nibabels_one_line_message(tmp_path):
    path = tmp_path / "image.nii.gz"
    path.write_bytes(gzip.compress(b"\0" * 100))
    with pytest.raises(DataError, match="unreadable NIfTI header"):
        check_nifti(path)


def test_a_big_endian_float_file_with_nan_is_caught(tmp_path):
    data = np.ones((4, 4, 4), dtype=">f4")
    data[1, 2, 3] = np.nan
    header = nib.Nifti1Header(endianness=">")
    header.set_data_dtype(">f4")
    path = tmp_path / "nan.nii"
    nib.save(nib.Nifti1Image(data, np.eye(4), header), str(path))
    assert data_layout(path).dtype == np.dtype(">f4")
    with pytest.raises(DataError, match="1 voxels are NaN"):
        check_nifti(path)


def _signed_permutations():
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product([-1.0, 1.0], repeat=3):
            yield perm, signs


@pytest.mark.parametrize(("perm", "signs"), list(_signed_permutations()))
def test_axis_aligned_orientation_equals_nibabels_for_all_48(perm, signs):
    rng = np.random.default_rng(sum(perm) * 8 + int(sum(signs)))
    affine = np.eye(4)
    affine[:3, :3] = 0.0
    for column, (row, sign) in enumerate(zip(perm, signs)):
        affine[row, column] = sign * rng.uniform(0.3, 3.0)
    affine[:3, 3] = rng.normal(size=3) * 50
    for noise in (0.0, 1e-9, 1e-7):
        noisy = affine.copy()
        noisy[:3, :3] += rng.normal(size=(3, 3)) * noise
        shortcut = _axis_aligned_orientation(noisy)
        assert shortcut is not None
        np.testing.assert_array_equal(shortcut, nib.orientations.io_orientation(noisy))


def test_oblique_and_degenerate_grids_are_left_to_nibabel():
    oblique = np.eye(4)
    oblique[:2, :2] = [[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]
    assert _axis_aligned_orientation(oblique) is None
    flat = np.diag([1.0, 1.0, 0.0, 1.0])
    assert _axis_aligned_orientation(flat) is None
    two_on_one_axis = np.eye(4)
    two_on_one_axis[:3, :3] = [[1, 1, 0], [0, 0, 0], [0, 0, 1]]
    assert _axis_aligned_orientation(two_on_one_axis) is None
