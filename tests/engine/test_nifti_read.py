"""Reading plain NIfTI files in one pass gives SimpleITK's voxels and grid exactly, and the
files it does not take are read by SimpleITK as before; cut and NaN files fail the same."""

from __future__ import annotations

import gzip

import nibabel as nib
import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.errors import DataError
from intrabench.io.nifti_read import read_nifti_directly
from intrabench.io.volume import RawImage, read_image, read_volume, volume_from_sitk

from .test_volume import _signed_permutations


def _directions():
    yield from _signed_permutations()  # the 48 axis-aligned ones, then an oblique one
    angle = np.deg2rad(17.0)
    yield (np.cos(angle), -np.sin(angle), 0.0, np.sin(angle), np.cos(angle), 0.0, 0.0, 0.0, 1.0)


def _write(path, data, direction=(1, 0, 0, 0, 1, 0, 0, 0, 1)):
    image = sitk.GetImageFromArray(data)
    image.SetSpacing((0.7, 0.9, 2.5))
    image.SetOrigin((10.0, -20.5, 30.25))
    image.SetDirection(direction)
    sitk.WriteImage(image, str(path), useCompression=str(path).endswith(".gz"))
    return path


def _assert_same_as_simpleitk(path, raw: RawImage):
    image = sitk.ReadImage(str(path))
    np.testing.assert_array_equal(raw.array, sitk.GetArrayViewFromImage(image))
    assert raw.array.dtype == sitk.GetArrayViewFromImage(image).dtype
    assert raw.geometry.size == tuple(image.GetSize())
    assert raw.geometry.spacing == tuple(image.GetSpacing())
    assert raw.geometry.origin == tuple(image.GetOrigin())
    assert raw.geometry.direction == tuple(image.GetDirection())
    assert raw.array.flags.c_contiguous and raw.array.flags.writeable


@pytest.mark.parametrize("direction", list(_directions()))
@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_voxels_and_grid_equal_simpleitks_for_every_orientation(tmp_path, direction, suffix):
    data = np.random.default_rng(1).normal(size=(4, 5, 6)).astype(np.float32)
    path = _write(tmp_path / f"image{suffix}", data, direction)
    raw = read_nifti_directly(path)
    assert raw is not None and raw.finite
    _assert_same_as_simpleitk(path, raw)
    # the volume made from it equals the one made from SimpleITK's image
    reference = volume_from_sitk(sitk.ReadImage(str(path)))
    volume = read_volume(path)
    np.testing.assert_array_equal(volume.array, reference.array)
    assert volume.spacing == reference.spacing and volume.geometry == reference.geometry


@pytest.mark.parametrize(
    "dtype",
    [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.int64, np.float32, np.float64],
)
def test_every_voxel_type_reads_as_simpleitk_reads_it(tmp_path, dtype):
    data = (np.arange(3 * 4 * 5) % 100).astype(dtype).reshape(3, 4, 5)
    path = _write(tmp_path / "typed.nii.gz", data)
    raw = read_nifti_directly(path)
    assert raw is not None
    _assert_same_as_simpleitk(path, raw)


def test_a_file_simpleitk_cannot_read_is_its_error_as_before(tmp_path):
    data = np.arange(6 * 5 * 4, dtype=np.int16).reshape(6, 5, 4)
    path = tmp_path / "two.nii"  # NIfTI-2 from nibabel: this SimpleITK finds no reader for it
    nib.save(nib.Nifti2Image(data, np.diag([-0.8, 0.8, 2.0, 1.0])), str(path))
    with pytest.raises(RuntimeError):
        sitk.ReadImage(str(path))
    assert read_nifti_directly(path) is None
    with pytest.raises(DataError, match="cannot read image"):
        read_image(path)


def _scaled(tmp_path):
    header = nib.Nifti1Header()
    header.set_data_dtype(np.int16)
    image = nib.Nifti1Image(np.arange(24, dtype=np.int16).reshape(2, 3, 4), np.eye(4), header)
    image.header.set_slope_inter(2.0, -5.0)
    path = tmp_path / "scaled.nii"
    nib.save(image, str(path))
    return path


def _big_endian(tmp_path):
    header = nib.Nifti1Header(endianness=">")
    header.set_data_dtype(">i2")
    path = tmp_path / "big.nii"
    nib.save(
        nib.Nifti1Image(np.arange(24, dtype=">i2").reshape(2, 3, 4), np.eye(4), header), str(path)
    )
    return path


def _one_time_point(tmp_path):
    path = tmp_path / "t1.nii.gz"
    nib.save(
        nib.Nifti1Image(np.arange(24, dtype=np.float32).reshape(2, 3, 4, 1), np.eye(4)), str(path)
    )
    return path


def _nrrd(tmp_path):
    return _write(tmp_path / "image.nrrd", np.arange(24, dtype=np.int16).reshape(2, 3, 4))


@pytest.mark.parametrize("make", [_scaled, _big_endian, _one_time_point, _nrrd])
def test_files_it_does_not_take_are_read_by_simpleitk_as_before(tmp_path, make):
    path = make(tmp_path)
    assert read_nifti_directly(path) is None
    image = sitk.ReadImage(str(path))
    if image.GetDimension() == 4:
        image = image[:, :, :, 0]
    raw = read_image(path)
    np.testing.assert_array_equal(raw.array, sitk.GetArrayViewFromImage(image))
    assert raw.array.dtype == sitk.GetArrayViewFromImage(image).dtype


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize("keep", [0.3, 0.9])
def test_cut_files_are_truncated_errors(tmp_path, suffix, keep):
    data = np.random.default_rng(2).integers(0, 1000, size=(8, 30, 30)).astype(np.int16)
    path = _write(tmp_path / f"image{suffix}", data)
    if suffix == ".nii":
        raw = path.read_bytes()
        path.write_bytes(raw[: int(len(raw) * keep)])
    else:  # a complete gzip stream of a cut file, then a cut gzip stream
        raw = gzip.decompress(path.read_bytes())
        path.write_bytes(gzip.compress(raw[: int(len(raw) * keep)]))
    with pytest.raises(DataError, match="truncated: .* bytes where the header announces"):
        read_nifti_directly(path)
    if suffix == ".nii.gz":
        whole = gzip.compress(raw)
        path.write_bytes(whole[: int(len(whole) * keep)])
        with pytest.raises(DataError, match="truncated"):
            read_image(path)


def test_nan_voxels_are_counted_as_the_file_check_counts_them(tmp_path):
    data = np.ones((3, 4, 5), np.float32)
    data[0, 1, 2] = np.nan
    data[2, 3, 4] = np.inf
    path = _write(tmp_path / "nan.nii.gz", data)
    with pytest.raises(DataError, match="nan.nii.gz: 2 voxels are NaN or infinite"):
        read_image(path)


def _header_patched(path, pixdim_z: float):
    """``path`` (a little-endian NIfTI-1 written by SimpleITK) with qform and sform codes 0
    (the grid from ``pixdim`` alone, NIfTI's method 1) and ``pixdim[3]`` (z) set."""
    raw = bytearray(
        gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    )
    raw[252:256] = np.array([0, 0], "<i2").tobytes()  # qform_code, sform_code
    raw[88:92] = np.array([pixdim_z], "<f4").tobytes()  # pixdim[3]
    path.write_bytes(gzip.compress(bytes(raw)) if path.name.endswith(".gz") else bytes(raw))
    return path


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_a_negative_pixdim_is_read_as_simpleitks_full_read_reads_it(tmp_path, suffix):
    """ITK's header pass keeps a negative pixdim's sign (spacing -2.5), its full read flips the
    direction instead (spacing 2.5): the full read is the reference. The header pass's grid
    had given a canonical spacing of -2.5 mm and a crash in the target attributes."""
    data = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    path = _header_patched(_write(tmp_path / f"image{suffix}", data), -2.5)
    image = sitk.ReadImage(str(path))
    assert image.GetSpacing()[2] == 2.5 and image.GetDirection()[8] == -1.0
    assert read_nifti_directly(path) is None
    _assert_same_as_simpleitk(path, read_image(path))
    volume = read_volume(path)
    assert volume.spacing == pytest.approx((2.5, 0.9, 0.7))
    np.testing.assert_array_equal(volume.array, data[::-1, ::-1, ::-1].astype(np.float32))


def test_a_grid_without_a_positive_finite_spacing_is_refused_in_one_line():
    from intrabench.io.geometry import ImageGeometry
    from intrabench.io.volume import volume_from_raw

    for spacing in ((0.8, 0.8, -2.5), (0.8, 0.0, 2.5), (np.nan, 0.8, 2.5)):
        raw = RawImage(
            array=np.zeros((2, 3, 4), np.float32),
            geometry=ImageGeometry(
                size=(4, 3, 2),
                spacing=spacing,
                origin=(0.0, 0.0, 0.0),
                direction=(1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
            ),
        )
        with pytest.raises(
            DataError,
            match=r"case\.nii: voxel spacing .* mm \(x, y, z\) is not "
            "positive and finite",
        ):
            volume_from_raw(raw, name="case.nii")


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize("size", [0.0, float("nan")])
def test_a_voxel_size_the_header_leaves_unset_is_refused(tmp_path, suffix, size):
    """pixdim 0 or NaN without a qform or sform: ITK reads 1 mm there in silence, and NSD's
    tolerance, HD95 and volumes in mm would rest on it."""
    data = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    path = _header_patched(_write(tmp_path / f"image{suffix}", data), size)
    assert sitk.ReadImage(str(path)).GetSpacing()[2] == 1.0  # what ITK makes of it
    with pytest.raises(
        DataError,
        match=r"image\.nii(\.gz)?: the header gives no voxel size "
        r"along k \(pixdim 0 or NaN, and no qform or sform\)",
    ):
        read_image(path)
