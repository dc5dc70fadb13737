"""Hostile DICOM for the recipes (#72 items 4 and 5, #65 item 8): a CT slice with truncated
pixel data (prepared as 0 HU before), a cut last slice (left out: one slice fewer without a
word), a DICOM-SEG frame placed 1 km away (1 GB allocated for a 40 KB file, a MemoryError at
256 px) or on a slice spacing far too small: each refused in one line, before allocating."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.uid import generate_uid

from intrabench.datasets._convert import read_dicom_series, read_seg
from intrabench.errors import DataError

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_seg  # noqa: E402

SHAPE = (6, 16, 20)  # (k, j, i)


@pytest.fixture
def ct(tmp_path):
    volume = np.full(SHAPE, 100, dtype=np.int16)
    sources = write_ct(
        tmp_path / "ct",
        volume,
        spacing=(0.8, 0.7, 2.5),
        origin=(-10, 20, 30),
        patient="P",
        study_uid=generate_uid(),
    )
    return tmp_path / "ct", sources


def test_a_slice_with_truncated_pixel_data_is_refused(ct):
    """Before: read, its last 50 pixels 0 (0 HU in a CT)."""
    folder, _ = ct
    path = folder / "002.dcm"
    ds = pydicom.dcmread(path)
    ds.PixelData = ds.PixelData[:-100]  # a consistent element, 100 bytes short
    ds.save_as(path)
    with pytest.raises(
        DataError,
        match="002.dcm: truncated pixel data: 540 bytes where 16 x 20 pixels of 16 bits need 640",
    ) as error:
        read_dicom_series(folder)
    assert "\n" not in str(error.value)


def test_a_cut_last_slice_is_refused(ct):
    """Before: GDCM left the cut file out and the volume had 5 slices, equally spaced."""
    folder, _ = ct
    path = folder / "005.dcm"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="005.dcm belongs to the series but cannot be read"):
        read_dicom_series(folder)


def test_a_whole_series_still_reads_beside_other_files(ct):
    folder, _ = ct
    (folder / "notes.txt").write_text("not DICOM")
    image = read_dicom_series(folder)
    assert image.GetSize() == (20, 16, 6)


def _moved_frame(path: Path, frame: int, millimetres: float) -> None:
    ds = pydicom.dcmread(path)
    position = ds.PerFrameFunctionalGroupsSequence[frame].PlanePositionSequence[0]
    x, y, z = (float(v) for v in position.ImagePositionPatient)
    position.ImagePositionPatient = [x, y, z + millimetres]
    ds.save_as(path)


def test_a_seg_frame_1_km_away_is_refused_before_allocating(tmp_path, ct):
    folder, sources = ct
    mask = np.zeros(SHAPE, bool)
    mask[1:4, 3:9, 4:12] = True
    write_seg(tmp_path / "seg.dcm", sources, {"A": mask})
    _moved_frame(tmp_path / "seg.dcm", 2, 1_000_000.0)
    image = read_dicom_series(folder)
    tracemalloc.start()
    with pytest.raises(
        DataError,
        match=r"seg.dcm: SEG frame 3 lies 999988\.8 mm outside the "
        r"image's slices \(1 frame\(s\) outside its grid\)",
    ):
        read_seg(tmp_path / "seg.dcm", image)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20 * 2**20, peak  # before: 1 GB (np.zeros of the SEG's grid)


def test_a_seg_slice_spacing_far_too_small_is_refused(tmp_path, ct):
    folder, sources = ct
    mask = np.zeros(SHAPE, bool)
    mask[1, 3:9, 4:12] = mask[4, 3:9, 4:12] = True
    write_seg(tmp_path / "seg.dcm", sources, {"A": mask})
    ds = pydicom.dcmread(tmp_path / "seg.dcm")
    measures = ds.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0]
    measures.SpacingBetweenSlices = 0.0001  # every frame lies on its lattice
    ds.save_as(tmp_path / "seg.dcm")
    with pytest.raises(
        DataError,
        match="the SEG's frames span 24,000,320 voxels at a slice "
        "spacing of 0.0001 mm, more than 8 times the image's 1,920",
    ):
        read_seg(tmp_path / "seg.dcm", read_dicom_series(folder))


def test_seg_frames_on_the_image_still_read(tmp_path, ct):
    folder, sources = ct
    mask = np.zeros(SHAPE, bool)
    mask[0, 3:9, 4:12] = mask[5, 1:2, 1:2] = True  # the first and last slices
    write_seg(tmp_path / "seg.dcm", sources, {"A": mask})
    np.testing.assert_array_equal(
        read_seg(tmp_path / "seg.dcm", read_dicom_series(folder))[1][1], mask
    )


def test_one_seg_reader_for_the_recipes_and_the_folder_route(tmp_path, ct):
    """The recipes' name and the public one are the same reader: a frame 1 km away is refused
    with a series too, and two billion declared frames with a plain image too."""
    from intrabench.datasets import _convert, dicom

    assert _convert.read_seg is dicom.read_seg
    folder, sources = ct
    mask = np.zeros(SHAPE, bool)
    mask[1:4, 3:9, 4:12] = True
    write_seg(tmp_path / "seg.dcm", sources, {"A": mask})
    series = dicom.read_series(folder)
    np.testing.assert_array_equal(dicom.read_seg(tmp_path / "seg.dcm", series)[1][1], mask)
    np.testing.assert_array_equal(dicom.read_seg(tmp_path / "seg.dcm", series.image)[1][1], mask)
    _moved_frame(tmp_path / "seg.dcm", 2, 1_000_000.0)
    with pytest.raises(DataError, match="seg.dcm: SEG frame 3 lies 999988.8 mm outside"):
        dicom.read_seg(tmp_path / "seg.dcm", series)
    write_seg(tmp_path / "seg.dcm", sources, {"A": mask})
    ds = pydicom.dcmread(tmp_path / "seg.dcm")
    ds.NumberOfFrames = 2**31 - 1
    ds.save_as(tmp_path / "seg.dcm")
    with pytest.raises(DataError, match="seg.dcm: declares 2,147,483,647 frames"):
        read_seg(tmp_path / "seg.dcm", series.image)


def test_a_slice_declaring_gigabytes_of_pixels_is_refused_before_allocating(ct):
    """Rows and columns of 60,000 (7.2 GB of 16-bit pixels) over 640 bytes of pixel data."""
    folder, _ = ct
    path = folder / "003.dcm"
    ds = pydicom.dcmread(path)
    ds.Rows = ds.Columns = 60_000
    ds.save_as(path)
    tracemalloc.start()
    with pytest.raises(
        DataError,
        match="003.dcm: truncated pixel data: 640 bytes where 60000 x 60000 pixels of 16 bits "
        "need 7200000000",
    ) as error:
        read_dicom_series(folder)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "\n" not in str(error.value) and peak < 200 * 2**20, peak
