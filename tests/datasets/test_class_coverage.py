"""A declared class that no case holds is an error in verify and run alike (#51 item 1)."""

from __future__ import annotations

import numpy as np
import SimpleITK as sitk

from intrabench.cli import main
from intrabench.datasets.class_coverage import class_coverage


def _organ_folder(tmp_path, liver_value: int, kidney_in: tuple[str, ...] = ("a", "b")):
    rng = np.random.default_rng(0)
    for case in ("a", "b"):
        label = np.zeros((6, 16, 16), np.uint8)
        label[1:5, 2:9, 2:9] = 6  # the liver, stored as 6
        if case in kidney_in:
            label[2:4, 10:14, 10:14] = 2  # a kidney
        for folder, array in (("images", rng.normal(0, 1, label.shape).astype(np.float32)),
                              ("labels", label)):
            (tmp_path / folder).mkdir(exist_ok=True)
            sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / folder / f"{case}.nii.gz"))
    spec = tmp_path / "organs.yaml"
    spec.write_text("name: organs\nimages: images/{case}.nii.gz\nlabels: labels/{case}.nii.gz\n"
                    f"classes: {{kidney: 2, liver: {liver_value}}}\nmodality: CT\n"
                    "target_types: {kidney: organ, liver: organ}\n")
    return spec


def test_class_coverage_by_hand():
    coverage = class_coverage({"liver": 55, "kidney": 2, "spleen": 1},
                              {"kidney": 3, "spleen": 5}, 5, undeclared_values=[6, 6, 9])
    assert coverage.errors == [
        "class 'liver' (label value 55) is declared but none of the 5 case(s) holds it: check "
        "its label value; the labels hold values [6, 9] that are no class: is one of them meant?"]
    assert coverage.warnings == ["class 'kidney' (label value 2) is in 3 of 5 cases"]
    assert class_coverage({"liver": 1}, {}, 0).errors == []  # nothing read: nothing to say


def test_verify_refuses_a_class_no_case_holds(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=55)
    assert main(["datasets", "verify", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "class 'liver' (label value 55) is declared but none of the 2 case(s) holds it" in out
    assert "values [6]" in out and "PROBLEMS" in out


def test_verify_notes_a_class_some_cases_lack(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=6, kidney_in=("a",))
    assert main(["datasets", "verify", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "note: class 'kidney' (label value 2) is in 1 of 2 cases" in out


def test_the_run_says_what_verify_says(tmp_path, capsys):
    spec = _organ_folder(tmp_path, liver_value=55)
    config = tmp_path / "run.yaml"
    config.write_text(f"name: organs-run\ndatasets: [{{name: folder, spec: {spec}}}]\n"
                      "models: [region-growing-3d]\nprompters: [box-3d]\n")
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "error: dataset folder" in err
    assert "class 'liver' (label value 55) is declared but none of the 2 case(s) holds it" in err
