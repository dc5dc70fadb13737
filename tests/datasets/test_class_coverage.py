"""A declared class that no case holds is an error in verify and run alike (#51 item 1)."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.cli import main
from intrabench.datasets.class_coverage import class_coverage
from intrabench.errors import UserError


def _organ_folder(
    tmp_path, liver_value: int, kidney_in: tuple[str, ...] = ("a", "b"), extra: str = ""
):
    rng = np.random.default_rng(0)
    for case in ("a", "b"):
        label = np.zeros((6, 16, 16), np.uint8)
        label[1:5, 2:9, 2:9] = 6  # the liver, stored as 6
        if case in kidney_in:
            label[2:4, 10:14, 10:14] = 2  # a kidney
        for folder, array in (
            ("images", rng.normal(0, 1, label.shape).astype(np.float32)),
            ("labels", label),
        ):
            (tmp_path / folder).mkdir(exist_ok=True)
            sitk.WriteImage(
                sitk.GetImageFromArray(array), str(tmp_path / folder / f"{case}.nii.gz")
            )
    spec = tmp_path / "organs.yaml"
    spec.write_text(
        "name: organs\nimages: images/{case}.nii.gz\nlabels: labels/{case}.nii.gz\n"
        f"classes: {{kidney: 2, liver: {liver_value}{extra}}}\nmodality: CT\n"
        "trust_modality: true\n"  # random intensities, no air: CT by word
        "target_types: {kidney: organ, liver: organ}\n"
    )
    return spec


def test_class_coverage_by_hand():
    coverage = class_coverage(
        {"liver": 55, "kidney": 2, "spleen": 1}, {"kidney": 3, "spleen": 5}, 5
    )
    assert coverage.errors == [
        "class 'liver' (label value 55) is declared but none of the 5 case(s) holds it: check "
        "its label value"
    ]
    assert coverage.warnings == ["class 'kidney' (label value 2) is in 3 of 5 cases"]
    assert class_coverage({"liver": 1}, {}, 0).errors == []  # nothing read: nothing to say


def test_verify_refuses_a_wrong_label_value(tmp_path, capsys):
    """liver declared as 55, stored as 6: every case names the undeclared value 6."""
    spec = _organ_folder(tmp_path, liver_value=55)
    assert main(["datasets", "verify", str(spec)]) == 1
    out = capsys.readouterr().out
    assert (
        out.count(
            "label values [6] are not declared classes (the spec's classes: kidney: 2, liver: 55)"
        )
        == 2
    )
    assert "0/2 cases ok" in out and "PROBLEMS" in out


def test_verify_refuses_a_class_no_case_holds(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=6, extra=", spleen: 55")
    assert main(["datasets", "verify", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "class 'spleen' (label value 55) is declared but none of the 2 case(s) holds it" in out
    assert "2/2 cases ok" in out and "PROBLEMS" in out


def test_verify_notes_a_class_some_cases_lack(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=6, kidney_in=("a",))
    assert main(["datasets", "verify", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "note: class 'kidney' (label value 2) is in 1 of 2 cases" in out


def test_the_run_says_what_verify_says(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=6, extra=", spleen: 55")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: organs-run\ndatasets: [{{name: folder, spec: {spec}}}]\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "error: dataset organs: class 'spleen'" in err  # the spec's own name
    assert "class 'spleen' (label value 55) is declared but none of the 2 case(s) holds it" in err


def test_use_classes_chooses_a_subset_in_both_kinds_of_dataset(tmp_path):
    """One rule (#51 item 2): every label value must be declared, in a folder spec as in
    dataset.json; use_classes chooses which declared classes become targets."""
    import json

    from intrabench import registry

    spec = _organ_folder(tmp_path, liver_value=6)
    spec.write_text(spec.read_text() + "use_classes: [liver]\n")
    case = registry.datasets.create("folder", {"spec": str(spec)}).load("a")
    assert [t.class_name for t in case.targets] == ["liver"]
    assert case.targets[0].value_in_file == 6
    nnunet = tmp_path / "nn"
    (nnunet / "imagesTr").mkdir(parents=True)
    (nnunet / "labelsTr").mkdir()
    for case_id in ("a", "b"):
        (nnunet / "imagesTr" / f"{case_id}_0000.nii.gz").write_bytes(
            (tmp_path / "images" / f"{case_id}.nii.gz").read_bytes()
        )
        (nnunet / "labelsTr" / f"{case_id}.nii.gz").write_bytes(
            (tmp_path / "labels" / f"{case_id}.nii.gz").read_bytes()
        )
    (nnunet / "dataset.json").write_text(
        json.dumps(
            {
                "labels": {"background": 0, "kidney": 2, "liver": 6},
                "channel_names": {"0": "CT"},
                "target_types": {"kidney": "organ", "liver": "organ"},
            }
        )
    )
    folder = registry.datasets.create(
        "nnunet-folder", {"path": str(nnunet), "use_classes": ["kidney"]}
    )
    assert [t.class_name for t in folder.load("b").targets] == ["kidney"]
    with pytest.raises(UserError, match=r"use_classes names \['livr'\], which are not declared"):
        registry.datasets.create("nnunet-folder", {"path": str(nnunet), "use_classes": ["livr"]})
