"""Predictions written as DICOM-SEG over the source series (#69 item 2): read back onto the
image grid they are the same voxels, and they reference the source slices and frame."""

from __future__ import annotations

import sys
from pathlib import Path

import highdicom as hd
import numpy as np
import pydicom
from pydicom.uid import generate_uid

from intrabench.cli import main
from intrabench.datasets.dicom import read_seg, read_series
from intrabench.datasets.dicom_seg_out import write_prediction_seg
from intrabench.io.raw_image import RawImage
from intrabench.io.volume import to_canonical

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct  # noqa: E402

SHAPE = (6, 16, 20)  # (k, j, i)


def _series(tmp_path: Path, flip: bool = False, oblique: bool = False):
    volume = np.random.default_rng(0).normal(-700, 50, SHAPE).astype(np.int16)
    sources = write_ct(tmp_path / "CT", volume, patient="p1", study_uid=generate_uid())
    if flip:  # rows run towards anterior (-y): the canonical grid flips them back
        for path in sorted((tmp_path / "CT").glob("*.dcm")):
            ds = pydicom.dcmread(path)
            ds.ImageOrientationPatient = [1, 0, 0, 0, -1, 0]
            ds.save_as(path, enforce_file_format=True)
    if oblique:  # rows and columns turned 30 degrees in the axial plane
        for path in sorted((tmp_path / "CT").glob("*.dcm")):
            ds = pydicom.dcmread(path)
            ds.ImageOrientationPatient = [0.866025, 0.5, 0, -0.5, 0.866025, 0]
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


def _round_trip(tmp_path: Path, flip: bool, oblique: bool = False) -> None:
    series, _ = _series(tmp_path, flip, oblique)
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


def test_an_oblique_series_round_trips_too(tmp_path):
    series, _ = _series(tmp_path, oblique=True)
    assert abs(series.image.GetDirection()[1] - -0.5) < 1e-5  # the readers kept the tilt
    _round_trip(tmp_path, flip=False, oblique=True)


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


def _run_on_dicom(tmp_path: Path, save: str = "true") -> Path:
    from _dicom import write_rtstruct

    sources = write_ct(
        tmp_path / "data" / "p1" / "CT",
        np.where(_box(), 40, -700).astype(np.int16),
        patient="p1",
        study_uid=generate_uid(),
    )
    write_rtstruct(tmp_path / "data" / "p1" / "RS.dcm", sources, {"GTV-1": [(2, 4, 9, 5, 12)]})
    spec = tmp_path / "data" / "clinic.yaml"
    spec.write_text(
        "name: clinic\nimages: '{case}/CT'\nlabels: '{case}/RS.dcm'\nclasses: {gtv: gtv_1}\n"
    )
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: folder, spec: '{spec}'}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
        f"save_predictions: {save}\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    return tmp_path / "run"


def _box() -> np.ndarray:
    box = np.zeros(SHAPE, dtype=bool)
    box[1:4, 4:10, 5:13] = True
    return box


def test_command_writes_the_runs_predictions_as_seg_over_the_series(tmp_path, capsys):
    import SimpleITK as sitk

    run = _run_on_dicom(tmp_path)
    capsys.readouterr()
    assert main(["predictions", "to-dicom-seg", str(run), str(tmp_path / "seg")]) == 0
    out = capsys.readouterr().out
    assert "1 DICOM-SEG file(s) written" in out
    (path,) = sorted((tmp_path / "seg").rglob("*.dcm"))
    assert path.name == "p1.dcm"
    saved = sorted(run.joinpath("predictions").rglob("p1__*.nii.gz"))
    assert len(saved) == 1
    native = sitk.GetArrayFromImage(sitk.ReadImage(str(saved[0]))).astype(bool)  # (k, j, i)
    assert native.sum() > 0
    series = read_series(tmp_path / "data" / "p1" / "CT")
    ((label, back),) = read_seg(path, series).values()
    assert label == saved[0].name[len("p1__") : -len(".nii.gz")]
    assert np.array_equal(back, native)
    assert hd.seg.segread(str(path)).SegmentSequence[0].SegmentAlgorithmName == (
        "region-growing-3d"
    )
    capsys.readouterr()
    args = ["predictions", "to-dicom-seg", str(run), str(tmp_path / "none")]
    assert main([*args, "--model", "sam-med3d"]) == 2
    assert "no saved predictions of its DICOM cases matching --case/--model" in (
        capsys.readouterr().err
    )
    assert main([*args, "--case", "p1", "--model", "region-growing-3d"]) == 0
    assert len(list((tmp_path / "none").rglob("*.dcm"))) == 1


def test_command_refuses_a_run_without_dicom_or_without_predictions(tmp_path, capsys):
    run = _run_on_dicom(tmp_path, save="false")
    capsys.readouterr()
    assert main(["predictions", "to-dicom-seg", str(run), str(tmp_path / "seg")]) == 2
    err = capsys.readouterr().err
    assert "no saved predictions of its DICOM cases" in err and "save_predictions" in err
    assert "Traceback" not in err
    assert main(["predictions", "to-dicom-seg", str(tmp_path / "nothing"), "x"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_command_refuses_a_run_on_nifti_data(tmp_path, capsys):
    import SimpleITK as sitk

    (tmp_path / "data").mkdir()
    sitk.WriteImage(
        sitk.GetImageFromArray(np.where(_box(), 40, -700).astype(np.int16)),
        str(tmp_path / "data" / "p1_img.nii.gz"),
    )
    sitk.WriteImage(
        sitk.GetImageFromArray(_box().astype(np.uint8)), str(tmp_path / "data" / "p1_lab.nii.gz")
    )
    spec = tmp_path / "data" / "nifti.yaml"
    spec.write_text("images: '{case}_img.nii.gz'\nlabels: '{case}_lab.nii.gz'\nclasses: {gtv: 1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: folder, spec: '{spec}'}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
        "save_predictions: true\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["predictions", "to-dicom-seg", str(tmp_path / "run"), str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "no dataset of this run is read from DICOM series" in err
    assert not (tmp_path / "s").exists()


def test_a_mask_of_another_grid_is_one_line(tmp_path):
    import pytest

    from intrabench.errors import DataError

    series, _ = _series(tmp_path)
    with pytest.raises(DataError, match=r"prediction 'gtv': shape \(6, 20, 16\) .* not the series"):
        write_prediction_seg(
            series, {"gtv": np.ones((6, 20, 16), bool)}, tmp_path / "p.dcm", algorithm="m"
        )
    assert not (tmp_path / "p.dcm").exists()
