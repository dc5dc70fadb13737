"""A series read once (pydicom headers, numpy voxels) is SimpleITK's series read exactly: the
same voxels, pixel type, origin, spacing and direction, for signed and unsigned slices, 12
stored bits with stray high bits, integer rescales that widen the type, 8-bit slices, a
reversed file order and an oblique orientation; encodings numpy does not decode (a fractional
slope, big endian) go to SimpleITK, with the same result."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from pydicom.uid import generate_uid

from intrabench.datasets._dicom_pixels import decode_series
from intrabench.datasets.dicom import read_series

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct  # noqa: E402

SHAPE = (5, 12, 14)  # (k, j, i)


def _simpleitk(folder: Path) -> sitk.Image:
    """SimpleITK's plain series read: GDCM finds, sorts and decodes the files."""
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(folder)))
    return reader.Execute()


def _series(tmp_path: Path, **changes) -> Path:
    """A CT series of random stored values, every slice changed by ``changes`` (attributes;
    ``stored`` gives the stored values (k, j, i) written as the pixel data)."""
    rng = np.random.default_rng(7)
    volume = rng.integers(-1200, 1500, SHAPE).astype(np.int16)
    folder = tmp_path / "CT"
    write_ct(
        folder,
        volume,
        spacing=(0.7, 0.9, 2.5),
        origin=(-11.5, 20.25, 30.0),
        patient="p",
        study_uid=generate_uid(),
    )
    changes = dict(changes)
    stored = changes.pop("stored", None)
    for k, path in enumerate(sorted(folder.glob("*.dcm"))):
        ds = pydicom.dcmread(path)
        for name, value in changes.items():
            if value is None:  # left out
                delattr(ds, name)
            else:
                setattr(ds, name, value(k) if callable(value) else value)
        if stored is not None:
            ds.PixelData = np.ascontiguousarray(stored[k]).tobytes()
        ds.save_as(path, enforce_file_format=True)
    return folder


def _assert_same(ours: sitk.Image, theirs: sitk.Image) -> None:
    assert ours.GetPixelID() == theirs.GetPixelID()
    assert ours.GetSize() == theirs.GetSize()
    assert ours.GetOrigin() == theirs.GetOrigin()
    assert ours.GetSpacing() == theirs.GetSpacing()
    assert ours.GetDirection() == theirs.GetDirection()
    np.testing.assert_array_equal(sitk.GetArrayFromImage(ours), sitk.GetArrayFromImage(theirs))


def _decoded_by_numpy(folder: Path) -> bool:
    series = read_series(folder)
    headers = [pydicom.dcmread(path, defer_size=1 << 16) for path in series.files]
    return decode_series(list(series.files), headers) is not None


CASES = {
    "signed 16 bits": {},
    "intercept -1024 widens to 32 bits": {"RescaleIntercept": -1024},
    "slope 2 and an intercept": {"RescaleSlope": 2, "RescaleIntercept": 100},
    "unsigned 12 of 16 bits, stray high bits": {
        "PixelRepresentation": 0,
        "BitsStored": 12,
        "HighBit": 11,
        "RescaleIntercept": -1024,
        "stored": np.random.default_rng(1).integers(0, 65535, SHAPE).astype(np.uint16),
    },
    "signed 12 of 16 bits, stray high bits": {
        "BitsStored": 12,
        "HighBit": 11,
        "stored": np.random.default_rng(2).integers(-32768, 32767, SHAPE).astype(np.int16),
    },
    "unsigned 16 bits (MR)": {
        "Modality": "MR",
        "PixelRepresentation": 0,
        "RescaleIntercept": None,
        "RescaleSlope": None,
        "stored": np.random.default_rng(3).integers(0, 65535, SHAPE).astype(np.uint16),
    },
    "8 bits": {
        "BitsAllocated": 8,
        "BitsStored": 8,
        "HighBit": 7,
        "PixelRepresentation": 0,
        "stored": np.random.default_rng(4).integers(0, 255, SHAPE).astype(np.uint8),
    },
    "files in reverse order of position": {
        "ImagePositionPatient": lambda k: [-11.5, 20.25, 30.0 - 2.5 * k],
    },
    "oblique, turned 30 degrees": {
        "ImageOrientationPatient": [0.866025, 0.5, 0, -0.5, 0.866025, 0],
        "ImagePositionPatient": lambda k: [-11.5 + 0.3 * k, 20.25, 30.0 + 2.5 * k],
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_decodes_what_simpleitk_reads_voxel_for_voxel(tmp_path, case):
    folder = _series(tmp_path, **CASES[case])
    assert _decoded_by_numpy(folder)
    _assert_same(read_series(folder).image, _simpleitk(folder))


def test_a_fractional_slope_goes_to_simpleitk_with_the_same_image(tmp_path):
    folder = _series(tmp_path, RescaleSlope=0.5, RescaleIntercept=-1024)
    assert not _decoded_by_numpy(folder)
    image = read_series(folder).image
    assert image.GetPixelID() == sitk.sitkFloat64
    _assert_same(image, _simpleitk(folder))


def test_slices_with_different_rescales_go_to_simpleitk(tmp_path):
    folder = _series(tmp_path, RescaleIntercept=lambda k: -1024 if k else 0)
    assert not _decoded_by_numpy(folder)
    _assert_same(read_series(folder).image, _simpleitk(folder))


def test_the_values_are_the_stored_ones_rescaled(tmp_path):
    """Hand-computed: 12 stored bits of 0xF123 are 0x123 = 291, minus 1024 is -733."""
    stored = np.full(SHAPE, 0xF123, dtype=np.uint16)
    folder = _series(
        tmp_path,
        PixelRepresentation=0,
        BitsStored=12,
        HighBit=11,
        RescaleIntercept=-1024,
        stored=stored,
    )
    array = sitk.GetArrayFromImage(read_series(folder).image)
    assert array.dtype == np.int16 and (array == -733).all()  # GDCM: -1024..3071 fits
