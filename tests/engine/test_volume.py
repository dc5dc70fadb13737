"""Canonical (z, y, x) reorientation: exact round trips and known marker positions."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk
from hypothesis import given, settings
from hypothesis import strategies as st

from intrabench.errors import DataError
from intrabench.io.volume import read_volume, volume_from_sitk, write_like


def _image(direction, size=(5, 6, 7), spacing=(0.7, 0.9, 2.5), origin=(10.0, -20.0, 30.0)):
    data = np.arange(np.prod(size[::-1]), dtype=np.int16).reshape(size[::-1])
    image = sitk.GetImageFromArray(data)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    image.SetDirection(direction)
    return image, data


def _rotation(degrees: float) -> tuple[float, ...]:
    t = np.deg2rad(degrees)
    matrix = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    return tuple(matrix.ravel())


DIRECTIONS = {
    "lps-identity": (1, 0, 0, 0, 1, 0, 0, 0, 1),
    "ras": (-1, 0, 0, 0, -1, 0, 0, 0, 1),
    "oblique-10deg": _rotation(10),
    "oblique-200deg": _rotation(200),
    "permuted-sagittal": (0, 0, 1, 1, 0, 0, 0, -1, 0),
    "flipped-z": (1, 0, 0, 0, -1, 0, 0, 0, -1),
}


@pytest.mark.parametrize("name", DIRECTIONS)
@pytest.mark.parametrize("suffix", [".nii.gz", ".nrrd"])
def test_round_trip_through_files_is_exact(tmp_path, name, suffix):
    image, data = _image(DIRECTIONS[name])
    source = tmp_path / f"image{suffix}"
    sitk.WriteImage(image, str(source))
    volume = read_volume(source, dtype=np.int16)
    written = tmp_path / f"back{suffix}"
    write_like(volume.array, volume, written)
    back = sitk.ReadImage(str(written))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(back), data)
    np.testing.assert_allclose(back.GetSpacing(), image.GetSpacing(), atol=1e-5)
    np.testing.assert_allclose(back.GetOrigin(), image.GetOrigin(), atol=1e-4)
    np.testing.assert_allclose(back.GetDirection(), image.GetDirection(), atol=1e-5)


def test_lps_identity_marker_lands_where_ras_says():
    # SimpleITK voxel (i, j, k) = (0, 0, 0) is the most Right, most Anterior, most Inferior
    # voxel of an identity-direction (LPS) image; canonical x grows to R, y to A, z to S.
    image, _ = _image(DIRECTIONS["lps-identity"], size=(5, 6, 7))
    marked = sitk.GetArrayFromImage(image) * 0
    marked[0, 0, 0] = 1
    marker = sitk.GetImageFromArray(marked)
    marker.CopyInformation(image)
    volume = volume_from_sitk(marker)
    assert volume.shape == (7, 6, 5)
    assert tuple(np.argwhere(volume.array == 1)[0]) == (0, 5, 4)


def test_spacing_follows_axis_permutation():
    # direction columns: i -> +P (A/P axis), j -> -S (S/I axis), k -> +L (R/L axis), so the
    # canonical (z, y, x) axes are (j, i, k)
    image, _ = _image(DIRECTIONS["permuted-sagittal"], size=(5, 6, 7), spacing=(3.0, 0.5, 0.8))
    volume = volume_from_sitk(image)
    assert volume.spacing == (0.5, 3.0, 0.8)
    assert volume.shape == (6, 5, 7)


@settings(max_examples=25, deadline=None)
@given(angle=st.floats(-180, 180), flip=st.sampled_from([1, -1]))
def test_round_trip_in_memory_for_any_axial_rotation(angle, flip):
    direction = np.array(_rotation(angle)).reshape(3, 3) @ np.diag([1, 1, flip])
    image, data = _image(tuple(direction.ravel()))
    volume = volume_from_sitk(image, dtype=np.int16)
    back = volume.to_sitk(volume.array)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(back), data)


def test_rejects_4d_nan_and_missing(tmp_path):
    four_d = sitk.Image([3, 3, 3, 2], sitk.sitkFloat32)
    with pytest.raises(DataError, match="3D image"):
        volume_from_sitk(four_d)
    nan = sitk.GetImageFromArray(np.full((3, 3, 3), np.nan, dtype=np.float32))
    with pytest.raises(DataError, match="NaN"):
        volume_from_sitk(nan)
    with pytest.raises(DataError, match="not found"):
        read_volume(tmp_path / "missing.nii.gz")
    garbage = tmp_path / "garbage.nii.gz"
    garbage.write_bytes(b"not an image at all")
    with pytest.raises(DataError, match="cannot read image"):
        read_volume(garbage)


@pytest.mark.parametrize("suffix", [".nii.gz", ".nrrd"])
def test_nan_in_files_is_rejected_not_zeroed(tmp_path, suffix):
    # SimpleITK alone reads NIfTI NaN as 0; the reader must still refuse the image
    data = np.zeros((4, 5, 6), dtype=np.float32)
    data[1, 2, 3] = np.nan
    path = tmp_path / f"nan{suffix}"
    sitk.WriteImage(sitk.GetImageFromArray(data), str(path))
    with pytest.raises(DataError, match="1 voxels are NaN"):
        read_volume(path)


# --------------------------------------------------------------------------------------
# Truncated NIfTI files are refused, never read as zeros
# --------------------------------------------------------------------------------------


def _real_nifti(tmp_path, kind: str = "label", pixel=None):
    """The demo's real lung CT crop (or its expert label) as a gzipped NIfTI file."""
    from intrabench.config import builtin_demo_path

    folder = "imagesTr/lung1_0000" if kind == "image" else "labelsTr/lung1"
    image = sitk.ReadImage(str(builtin_demo_path().parent / "demo_real" / f"{folder}.nii.gz"))
    if pixel is not None:
        image = sitk.Cast(image, pixel)
    path = tmp_path / f"lung1_{kind}.nii.gz"
    sitk.WriteImage(image, str(path), useCompression=True)
    return path


@pytest.mark.parametrize(
    ("kind", "pixel"), [("label", None), ("image", sitk.sitkInt16), ("image", sitk.sitkFloat32)]
)
@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_a_cut_gzipped_nifti_is_a_data_error(tmp_path, kind, pixel, keep):
    from intrabench.errors import DataError
    from intrabench.io.volume import read_volume

    path = _real_nifti(tmp_path, kind, pixel)
    whole = read_volume(path)
    assert whole.array.any()
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(DataError, match="truncated"):
        read_volume(path)


def test_complete_gzip_with_missing_voxels_and_a_cut_plain_nifti(tmp_path):
    import gzip

    from intrabench.errors import DataError
    from intrabench.io.volume import read_volume

    path = _real_nifti(tmp_path, "label")
    raw = gzip.decompress(path.read_bytes())
    short = tmp_path / "short.nii.gz"  # a whole gzip stream, but of too few bytes
    short.write_bytes(gzip.compress(raw[:-1000]))
    with pytest.raises(DataError, match="truncated: .* bytes where the header announces"):
        read_volume(short)
    plain = tmp_path / "plain.nii"
    plain.write_bytes(raw[:-1])
    with pytest.raises(DataError, match="truncated"):
        read_volume(plain)
    plain.write_bytes(raw)
    assert read_volume(plain).array.any()


def test_a_short_write_never_takes_the_real_name(tmp_path, monkeypatch):
    """ITK can leave an empty or cut file without raising when the disk fills up; such a file
    must not be renamed into place as a prediction."""
    import errno
    from pathlib import Path

    from intrabench.io import volume

    geometry = read_volume(_real_nifti(tmp_path, "label")).geometry
    original = sitk.WriteImage

    def short_write(image, path, *args, **kwargs):
        original(image, path, *args, **kwargs)
        written = Path(path)
        written.write_bytes(written.read_bytes()[: written.stat().st_size // 3])

    monkeypatch.setattr(sitk, "WriteImage", short_write)
    target = tmp_path / "pred" / "case__t1.nii.gz"
    mask = np.zeros(tuple(reversed(geometry.size)), np.uint8)
    with pytest.raises(OSError) as raised:
        volume.write_on_grid(mask, geometry, target)
    assert raised.value.errno == errno.EIO and "disk full" in str(raised.value)
    assert list(target.parent.iterdir()) == []  # no file, no leftover partial


def test_file_system_errors_are_one_line(tmp_path, capsys):
    import errno

    from intrabench.cli import describe_os_error, main

    full = describe_os_error(OSError(errno.ENOSPC, "No space left on device", "/runs/x"))
    assert full.startswith("the disk is full (/runs/x)") and "re-run" in full
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    run = tmp_path / "run"
    assert main(["run", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["tables", str(run), "--out", str(blocker / "tables")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "direction",
    [
        (1, 0, 0, 0, 1, 0, 0, 0, 1),  # LPS files (the DICOM default)
        (-1, 0, 0, 0, -1, 0, 0, 0, 1),  # RAS
        (-1, 0, 0, 0, 1, 0, 0, 0, 1),  # LAS
        (0, 0, 1, 1, 0, 0, 0, -1, 0),  # axes permuted and flipped
    ],
)
def test_native_index_finds_the_same_voxel_in_the_files_order(direction):
    from intrabench.io.volume import from_canonical, native_index

    rng = np.random.default_rng(0)
    native = rng.random((5, 6, 7)).astype(np.float32)  # (k, j, i)
    image = sitk.GetImageFromArray(native)
    image.SetDirection(direction)
    volume = volume_from_sitk(image)
    assert np.array_equal(from_canonical(volume.array, volume.geometry), native)
    points = np.argwhere(np.ones(volume.shape, bool))
    mapped = native_index(points, volume.geometry)
    assert np.array_equal(native[tuple(mapped.T)], volume.array[tuple(points.T)])


# --------------------------------------------------------------------------------------
# Reading without copies: the image's own buffer, reoriented in place
# --------------------------------------------------------------------------------------


def _signed_permutations():
    import itertools

    for order in itertools.permutations(range(3)):
        for signs in itertools.product((1, -1), repeat=3):
            matrix = np.zeros((3, 3))
            for column, (row, sign) in enumerate(zip(order, signs)):
                matrix[row, column] = sign
            yield tuple(matrix.ravel())


@pytest.mark.parametrize("direction", list(_signed_permutations()))
@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_owned_read_equals_the_copying_read_for_all_48_orientations(direction, dtype):
    image, _ = _image(direction, size=(4, 5, 3))
    image = sitk.Cast(image, sitk.sitkInt16)
    from intrabench.io.volume import ImageGeometry, to_canonical

    # nibabel's reorientation of a copy, the reference for the in-place flips
    reference = np.asarray(
        to_canonical(sitk.GetArrayFromImage(image), ImageGeometry.from_sitk(image)), dtype=dtype
    )
    assert np.array_equal(volume_from_sitk(image, dtype=dtype).array, reference)
    owned_image = sitk.Image(image)  # the same pixels, in the image given away
    owned = volume_from_sitk(sitk.Cast(owned_image, sitk.sitkInt16), dtype=dtype, owned=True)
    np.testing.assert_array_equal(owned.array, reference)
    assert owned.array.dtype == dtype and owned.array.flags.c_contiguous
    assert owned.array.flags.writeable
    assert owned.spacing == volume_from_sitk(image, dtype=dtype).spacing


def test_owned_int16_read_uses_the_image_buffer_and_keeps_it_alive():
    image, data = _image(DIRECTIONS["lps-identity"], size=(4, 5, 6))  # LPS: y and x flipped
    volume = volume_from_sitk(image, dtype=np.int16, owned=True)
    del image
    import gc

    gc.collect()
    np.testing.assert_array_equal(volume.array, data[:, ::-1, ::-1])
    assert volume.array.base is not None  # a view of the image's buffer, not a copy
    volume.array[0, 0, 0] = 7  # written like an owned array
    assert volume.array[0, 0, 0] == 7


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1, 5), flips=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_in_place_flips_match_numpy_for_odd_and_even_depths(depth, flips):
    from intrabench.io.volume import ImageGeometry, to_canonical_in_place

    flip_x, flip_y, flip_z = flips  # LPS world: +i towards L and +j towards P are flipped
    diagonal = [1.0 if flip_x else -1.0, 1.0 if flip_y else -1.0, -1.0 if flip_z else 1.0]
    image = sitk.GetImageFromArray(np.zeros((depth, 3, 4), dtype=np.float32))
    image.SetDirection(tuple(np.diag(diagonal).ravel()))
    geometry = ImageGeometry.from_sitk(image)
    native = np.arange(depth * 12, dtype=np.float32).reshape(depth, 3, 4)
    expected = native[:: -1 if flip_z else 1, :: -1 if flip_y else 1, :: -1 if flip_x else 1].copy()
    result = to_canonical_in_place(native, geometry)
    assert result is native
    np.testing.assert_array_equal(result, expected)


def test_all_finite_checks_every_value_without_false_alarms():
    from intrabench.io.volume import all_finite

    big = np.full(1000, 3.0e38, dtype=np.float32)  # a float32 sum would overflow
    assert all_finite(big)
    assert all_finite(np.full(10, 1e308))  # float64: the sum overflows, every value is finite
    for bad in (np.nan, np.inf, -np.inf):
        for dtype in (np.float16, np.float32, np.float64):
            values = np.zeros(5000, dtype=dtype)
            values[4321] = bad
            assert not all_finite(values)
    assert all_finite(np.zeros(0, dtype=np.float32))
