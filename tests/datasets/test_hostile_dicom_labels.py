"""Hostile RTSTRUCT and DICOM-SEG given as a folder spec's labels (#69 item 1): a cut file, a
SEG declaring 2^31 frames, a contour of millions of points, coordinates that are not numbers,
contours on instances the series lacks: each refused in one line, in under 5 s and 200 MB."""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.dataelem import RawDataElement
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence
from pydicom.tag import Tag
from pydicom.uid import generate_uid

from intrabench.datasets.dicom import read_rtstruct, read_seg, read_series
from intrabench.errors import DataError

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct, write_seg  # noqa: E402

SHAPE = (6, 16, 20)
CONTOUR_DATA = Tag(0x30060050)


@pytest.fixture
def scan(tmp_path):
    sources = write_ct(
        tmp_path / "CT", np.zeros(SHAPE, np.int16), patient="p", study_uid=generate_uid()
    )
    write_rtstruct(tmp_path / "RS.dcm", sources, {"GTV": [(2, 3, 6, 4, 9)]})
    return tmp_path, sources


def _refused(read, match: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(DataError, match=match) as error:
        read()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "\n" not in str(error.value)
    assert time.perf_counter() - started < 5 and peak < 200 * 2**20, peak


def _raw_contour(path: Path, value: bytes) -> None:
    ds = pydicom.dcmread(path)
    contour = ds.ROIContourSequence[0].ContourSequence[0]
    contour[CONTOUR_DATA] = RawDataElement(CONTOUR_DATA, "DS", len(value), value, 0, False, True)
    del contour.NumberOfContourPoints
    ds.save_as(path)


def test_a_cut_rtstruct_is_refused(scan):
    folder, _ = scan
    data = (folder / "RS.dcm").read_bytes()
    (folder / "RS.dcm").write_bytes(data[: len(data) * 2 // 3])
    series = read_series(folder / "CT")
    _refused(lambda: read_rtstruct(folder / "RS.dcm", series), "RS.dcm: not a readable RTSTRUCT")


def test_a_contour_of_millions_of_points_is_refused_unparsed(scan):
    folder, _ = scan
    _raw_contour(folder / "RS.dcm", b"1.5\\" * (3 * 2_000_000 - 1) + b"1.5 ")
    series = read_series(folder / "CT")
    _refused(
        lambda: read_rtstruct(folder / "RS.dcm", series),
        r"RS.dcm: contour 1 of ROI 'GTV' has about 470,588 points \(at most 200,000\)",
    )


def test_coordinates_that_are_not_numbers_are_refused(scan):
    folder, _ = scan
    _raw_contour(folder / "RS.dcm", b"1\\2\\abc\\4\\5\\6\\7\\8\\9 ")
    series = read_series(folder / "CT")
    _refused(
        lambda: read_rtstruct(folder / "RS.dcm", series),
        "RS.dcm: contour 1 of ROI 'GTV': coordinates are not numbers",
    )


def test_contours_on_instances_the_series_lacks_are_refused(scan):
    folder, _ = scan
    ds = pydicom.dcmread(folder / "RS.dcm")
    item = Dataset()
    item.ReferencedSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
    item.ReferencedSOPInstanceUID = "1.2.3.4.5"
    ds.ROIContourSequence[0].ContourSequence[0].ContourImageSequence = Sequence([item])
    ds.save_as(folder / "RS.dcm")
    series = read_series(folder / "CT")
    _refused(
        lambda: read_rtstruct(folder / "RS.dcm", series),
        r"RS.dcm: contour 1 of ROI 'GTV' references 1 image instance\(s\) not in the series "
        r"CT \(1.2.3.4.5\): a slice is missing from the series folder",
    )


def test_a_seg_declaring_two_billion_frames_is_refused_before_decoding(scan):
    folder, sources = scan
    mask = np.zeros(SHAPE, bool)
    mask[2, 3:6, 4:9] = True
    write_seg(folder / "seg.dcm", sources, {"A": mask})
    ds = pydicom.dcmread(folder / "seg.dcm")
    ds.NumberOfFrames = 2**31 - 1
    ds.save_as(folder / "seg.dcm")
    series = read_series(folder / "CT")
    _refused(
        lambda: read_seg(folder / "seg.dcm", series),
        "seg.dcm: declares 2,147,483,647 frames; 1 segment.s. over a 20 x 16 x 6 series "
        "hold at most 80: a damaged or hostile file",
    )


def test_a_seg_referencing_instances_the_series_lacks_is_refused(scan):
    folder, sources = scan
    mask = np.zeros(SHAPE, bool)
    mask[2, 3:6, 4:9] = True
    write_seg(folder / "seg.dcm", sources, {"A": mask})
    (folder / "CT" / "002.dcm").rename(folder / "slice2.keep")  # out of the folder's series
    (folder / "CT" / "003.dcm").unlink()
    for index in (0, 1):
        (folder / "CT" / f"{index:03d}.dcm").unlink()
    series = read_series(folder / "CT")
    _refused(
        lambda: read_seg(folder / "seg.dcm", series),
        r"seg.dcm: its frames reference 1 image instance\(s\) not in the series CT",
    )
