"""Own data as the clinic has it (#69 item 1): a ``folder`` spec whose images are DICOM series
folders and whose labels are RTSTRUCT or DICOM-SEG files, read by the public readers of
``intrabench.datasets.dicom``; every problem of a series or its label is one line."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pydicom
import pytest
from pydicom.uid import generate_uid

from intrabench import registry
from intrabench.cli import main
from intrabench.datasets.dicom import normal_name, read_series
from intrabench.errors import DataError

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct, write_seg  # noqa: E402

SHAPE = (6, 16, 20)  # (k, j, i)


def _volume(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    volume = rng.normal(-700, 50, SHAPE).astype(np.int16)  # air-like CT background
    volume[1:5, 4:12, 5:15] = 40  # soft tissue
    return volume


def _clinic(tmp_path: Path, cases=("p1", "p2")) -> Path:
    """``<case>/CT/*.dcm`` + ``<case>/RS.dcm`` (ROIs 'GTV-1': two lesions, 'BODY')."""
    for case in cases:
        sources = write_ct(
            tmp_path / case / "CT", _volume(), patient=case, study_uid=generate_uid()
        )
        write_rtstruct(
            tmp_path / case / "RS.dcm",
            sources,
            {
                "GTV-1": [(1, 2, 4, 2, 5), (2, 2, 4, 2, 5), (4, 9, 11, 12, 15)],
                "BODY": [(0, 0, 1, 0, 19)],
            },
        )
    spec = tmp_path / "clinic.yaml"
    spec.write_text(
        "name: clinic\nimages: '{case}/CT'\nlabels: '{case}/RS.dcm'\nclasses: {gtv: gtv_1}\n"
    )
    return spec


def test_series_and_rtstruct_to_a_table_with_verify_and_run(tmp_path, capsys):
    spec = _clinic(tmp_path / "data")
    assert main(["datasets", "verify", str(spec)]) == 0
    out = capsys.readouterr().out
    assert f"{spec}/p1: ok, 2 targets (gtv 2), spacing 2.5 x 0.7 x 0.8 mm" in out
    assert "2/2 cases ok, 4 targets" in out
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.image_path("p1") == tmp_path / "data" / "p1" / "CT"  # the series folder
    case = dataset.load("p1")
    assert case.dataset == "clinic" and case.image.modality == "CT"
    assert sorted(int(case.target_mask(t).sum()) for t in case.targets) == [12, 24]
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: folder, spec: '{spec}'}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(rows.dataset) == {"clinic"}  # the spec's name, not folder(spec=...)
    assert rows[["case", "target"]].drop_duplicates().shape[0] == 4


def test_series_and_dicom_seg_to_a_table_with_verify_and_run(tmp_path, capsys):
    """The same for DICOM-SEG labels: a segment chosen by name, verify, run, results."""
    for case in ("p1", "p2"):
        sources = write_ct(
            tmp_path / case / "CT", _volume(), patient=case, study_uid=generate_uid()
        )
        tumour = np.zeros(SHAPE, bool)
        tumour[2:4, 6:8, 6:9] = True
        write_seg(tmp_path / case / "seg.dcm", sources, {"Liver tumour": tumour})
    spec = tmp_path / "seg.yaml"
    spec.write_text(
        "name: segs\nimages: '{case}/CT'\nlabels: '{case}/seg.dcm'\n"
        "classes: {tumour: liver_tumour}\n"
    )
    assert main(["datasets", "verify", str(spec)]) == 0
    out = capsys.readouterr().out
    assert f"{spec}/p1: ok, 1 target (tumour 1)" in out and "2/2 cases ok, 2 targets" in out
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: folder, spec: '{spec}'}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(rows.dataset) == {"segs"} and sorted(set(rows.case)) == ["p1", "p2"]


def test_every_roi_is_a_class_without_classes_and_names_match_loosely(tmp_path):
    assert normal_name("GTV-1") == normal_name("gtv_1") == normal_name(" Gtv  1 ") == "gtv_1"
    spec = _clinic(tmp_path)
    spec.write_text("images: '{case}/CT'\nlabels: '{case}/RS.dcm'\ntarget_types: {body: organ}\n")
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.label_classes == {"body": 1, "gtv_1": 2}
    kinds = sorted((t.class_name, t.kind) for t in dataset.load("p2").targets)
    assert kinds == [("body", "organ"), ("gtv_1", "instance"), ("gtv_1", "instance")]


def test_a_class_no_roi_matches_names_the_rois(tmp_path):
    spec = _clinic(tmp_path, cases=("p1",))
    spec.write_text("images: '{case}/CT'\nlabels: '{case}/RS.dcm'\nclasses: {gtv: ctv}\n")
    with pytest.raises(
        DataError,
        match=r"RS.dcm: no ROI or segment matches class 'gtv' "
        r"\('ctv'; .*it has: GTV-1, BODY; fix 'classes'",
    ):
        registry.datasets.create("folder", {"spec": str(spec)}).load("p1")


def test_dicom_seg_labels_by_segment_name_and_overlaps_refused(tmp_path):
    sources = write_ct(tmp_path / "p1" / "CT", _volume(), patient="p1", study_uid=generate_uid())
    liver = np.zeros(SHAPE, bool)
    liver[1:5, 4:12, 5:15] = True
    tumour = np.zeros(SHAPE, bool)
    tumour[2:4, 6:8, 6:9] = True
    write_seg(tmp_path / "p1" / "seg.dcm", sources, {"Liver": liver, "Tumour": tumour})
    spec = tmp_path / "seg.yaml"
    spec.write_text("images: '{case}/CT'\nlabels: '{case}/seg.dcm'\nclasses: {tumour: TUMOUR}\n")
    case = registry.datasets.create("folder", {"spec": str(spec)}).load("p1")
    assert [int(case.target_mask(t).sum()) for t in case.targets] == [12]
    spec.write_text("images: '{case}/CT'\nlabels: '{case}/seg.dcm'\n")
    with pytest.raises(
        DataError,
        match="seg.dcm: 'liver' and 'tumour' overlap in 12 voxels; "
        "a label map holds one class per voxel",
    ):
        registry.datasets.create("folder", {"spec": str(spec)}).load("p1")


def _series(tmp_path: Path) -> tuple[Path, list]:
    sources = write_ct(tmp_path / "CT", _volume(), patient="p", study_uid=generate_uid())
    return tmp_path / "CT", sources


def test_a_missing_slice_is_named(tmp_path):
    folder, _ = _series(tmp_path)
    (folder / "003.dcm").unlink()
    with pytest.raises(
        DataError,
        match=r"CT: slices are not equally spaced: 1 slice\(s\) missing "
        r"between 002.dcm and 004.dcm \(35.00 to 40.00 mm, 2.50 mm apart",
    ):
        read_series(folder)


def test_a_duplicated_slice_is_named(tmp_path):
    folder, _ = _series(tmp_path)
    ds = pydicom.dcmread(folder / "003.dcm")
    ds.SOPInstanceUID = generate_uid()
    ds.save_as(folder / "003b.dcm")
    with pytest.raises(
        DataError,
        match=r"CT: 003.dcm and 003b.dcm are at the same position "
        r"\(37.50 mm\): a duplicated slice; remove one",
    ):
        read_series(folder)


def test_a_slice_in_another_orientation_is_named(tmp_path):
    folder, _ = _series(tmp_path)
    ds = pydicom.dcmread(folder / "002.dcm")
    ds.ImageOrientationPatient = [1, 0, 0, 0, 0, -1]
    ds.save_as(folder / "002.dcm")
    with pytest.raises(
        DataError,
        match=r"slices in more than one orientation .*002.dcm: "
        r"\[1, 0, 0, 0, 0, -1\]; 1 of 6 differ\); a series is one stack",
    ):
        read_series(folder)


def test_an_rtstruct_of_another_series_is_refused(tmp_path):
    spec = _clinic(tmp_path, cases=("p1", "p2"))
    shutil.copy(tmp_path / "p2" / "RS.dcm", tmp_path / "p1" / "RS.dcm")
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    with pytest.raises(
        DataError,
        match="RS.dcm: this RTSTRUCT is drawn in frame of reference "
        ".* it belongs to another scan; pair it with the series it was drawn on",
    ):
        dataset.load("p1")
    ds = pydicom.dcmread(tmp_path / "p1" / "RS.dcm")  # same frame of reference, other series
    frame = pydicom.dcmread(tmp_path / "p1" / "CT" / "000.dcm").FrameOfReferenceUID
    ds.ReferencedFrameOfReferenceSequence[0].FrameOfReferenceUID = frame
    for roi in ds.StructureSetROISequence:
        roi.ReferencedFrameOfReferenceUID = frame
    ds.save_as(tmp_path / "p1" / "RS.dcm")
    with pytest.raises(
        DataError, match="RS.dcm: this RTSTRUCT references series .*, not the series in CT"
    ):
        dataset.load("p1")


def test_dicom_mistakes_say_what_the_file_is(tmp_path):
    spec = _clinic(tmp_path, cases=("p1",))
    spec.write_text("pairs:\n  - {case: a, image: p1/CT/000.dcm, label: p1/RS.dcm}\n")
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    with pytest.raises(
        DataError,
        match="RS.dcm is an RTSTRUCT \\(ROIs: GTV-1, BODY\\): its image "
        "must be the DICOM series it was drawn on \\(a folder of slices\\), not "
        "000.dcm",
    ):
        dataset.load("a")
    (tmp_path / "mask.nii.gz").write_bytes(b"")
    import SimpleITK as sitk

    sitk.WriteImage(sitk.Image(20, 16, 1, sitk.sitkUInt8), str(tmp_path / "mask.nii.gz"))
    spec.write_text(
        "pairs:\n  - {case: a, image: p1/CT/000.dcm, label: mask.nii.gz}\nclasses: {lesion: 1}\n"
    )
    with pytest.raises(
        DataError,
        match="000.dcm is one CT slice of series .*: give the folder "
        "of the whole series as the image",
    ):
        registry.datasets.create("folder", {"spec": str(spec)}).load("a")


def test_the_scanline_fill_agrees_with_scikit_image_on_random_polygons():
    from skimage.draw import polygon

    from intrabench.datasets.dicom import fill_polygon

    rng = np.random.default_rng(3)
    for points in (3, 7, 40, 400):
        rows, columns = rng.uniform(-5, 70, points), rng.uniform(-5, 90, points)
        expected = np.zeros((64, 80), bool)
        expected[polygon(rows, columns, shape=(64, 80))] = True
        np.testing.assert_array_equal(fill_polygon(rows, columns, (64, 80)), expected)
