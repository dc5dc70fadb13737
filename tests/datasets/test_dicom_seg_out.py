"""Predictions written as DICOM-SEG over the source series (#69 item 2): read back onto the
image grid they are the same voxels, and they reference the source slices and frame."""

from __future__ import annotations

import sys
from pathlib import Path

import highdicom as hd
import numpy as np
import pydicom
from pydicom.uid import generate_uid

from intrabench.datasets.dicom import read_seg, read_series
from intrabench.datasets.dicom_seg_out import write_prediction_seg
from intrabench.io.raw_image import RawImage
from intrabench.io.volume import to_canonical

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct  # noqa: E402

SHAPE = (6, 16, 20)  # (k, j, i)


def _series(tmp_path: Path, flip: bool = False):
    volume = np.random.default_rng(0).normal(-700, 50, SHAPE).astype(np.int16)
    sources = write_ct(tmp_path / "CT", volume, patient="p1", study_uid=generate_uid())
    if flip:  # rows run towards anterior (-y): the canonical grid flips them back
        for path in sorted((tmp_path / "CT").glob("*.dcm")):
            ds = pydicom.dcmread(path)
            ds.ImageOrientationPatient = [1, 0, 0, 0, -1, 0]
            ds.save_as(path, enforce_file_format=True)
    return read_series(tmp_path / "CT"), sources


def _canonical_mask(series) -> np.ndarray:
    """A known, asymmetric mask on the case's canonical (z, y, x) grid."""
    geometry = RawImage.from_sitk(series.image).geometry
    native = np.zeros(SHAPE, dtype=bool)
    native[1, 2:5, 3:7] = True
    native[4, 9:12, 12:16] = True
    native[4, 0, 0] = True
    return np.asarray(to_canonical(native, geometry)), native


def _round_trip(tmp_path: Path, flip: bool) -> None:
    series, _ = _series(tmp_path, flip)
    mask_zyx, native = _canonical_mask(series)
    out = write_prediction_seg(
        series, {"liver tumour": mask_zyx}, tmp_path / "pred.dcm", algorithm="SAM-Med3D"
    )
    segments = read_seg(out, series)  # the project's own reader, onto the series' grid
    assert list(segments) == [1]
    label, back = segments[1]
    assert label == "liver tumour"
    assert np.array_equal(back, native)
    assert int(back.sum()) == 3 * 4 + 3 * 4 + 1


def test_prediction_round_trips_onto_the_series_voxel_for_voxel(tmp_path):
    _round_trip(tmp_path, flip=False)


def test_a_flipped_series_round_trips_too(tmp_path):
    series, _ = _series(tmp_path, flip=True)
    assert series.image.GetDirection()[4] == -1.0  # the readers kept the flip
    _round_trip(tmp_path, flip=True)


def test_seg_references_the_source_slices_frame_and_names_the_model(tmp_path):
    series, sources = _series(tmp_path)
    mask_zyx, native = _canonical_mask(series)
    path = write_prediction_seg(
        series,
        {"gtv": mask_zyx},
        tmp_path / "pred.dcm",
        algorithm="SAM-Med3D",
        series_description="SAM-Med3D box prompt",
    )
    seg = hd.seg.segread(str(path))
    assert seg.FrameOfReferenceUID == sources[0].FrameOfReferenceUID
    assert seg.StudyInstanceUID == sources[0].StudyInstanceUID
    assert seg.PatientID == "p1"
    assert seg.SeriesDescription == "SAM-Med3D box prompt"
    assert seg.SegmentationType == "BINARY"
    segment = seg.SegmentSequence[0]
    assert segment.SegmentAlgorithmType == "AUTOMATIC"
    assert segment.SegmentAlgorithmName == "SAM-Med3D"
    # one frame per non-empty slice (1 and 4), each at that slice's position, referencing it
    frames = {
        str(f.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID): [
            float(v) for v in f.PlanePositionSequence[0].ImagePositionPatient
        ]
        for f in seg.PerFrameFunctionalGroupsSequence
    }
    assert frames == {
        series.sop_uids[1]: [-10.0, 20.0, 32.5],
        series.sop_uids[4]: [-10.0, 20.0, 40.0],
    }
    all_referenced = {
        str(item.ReferencedSOPInstanceUID)
        for item in seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence
    }
    assert all_referenced == set(series.sop_uids)
    assert seg.ReferencedSeriesSequence[0].SeriesInstanceUID == series.series_uid
