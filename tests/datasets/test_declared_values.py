"""What a dataset declares is taken at its word or refused in one line (issue 65, item 5): a
class value of 1.7 or ``true`` was read as 1 (the class scored another's voxels), and a
modality that is no known name was read as undeclared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench import registry
from intrabench.cli import main
from intrabench.errors import UserError
from intrabench.modality import declared_modality


def _cases(root: Path, cases=("a", "b")) -> Path:
    """Two cases in nnU-Net layout; their label holds value 1 (one 2x2x2 lesion)."""
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    image = np.full((4, 6, 6), 5, np.int16)
    label = np.zeros((4, 6, 6), np.uint8)
    label[1:3, 2:4, 2:4] = 1
    for case in cases:
        sitk.WriteImage(
            sitk.GetImageFromArray(image), str(root / "imagesTr" / f"{case}_0000.nii.gz")
        )
        sitk.WriteImage(sitk.GetImageFromArray(label), str(root / "labelsTr" / f"{case}.nii.gz"))
    return root


def _spec(root: Path, extra: str) -> Path:
    spec = root / "spec.yaml"
    spec.write_text("images: imagesTr/{case}_0000.nii.gz\nlabels: labelsTr/{case}.nii.gz\n" + extra)
    return spec


def _nnunet(root: Path, meta: dict) -> Path:
    (root / "dataset.json").write_text(json.dumps(meta))
    return root


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1.7", "label 'lesion' must be a whole number, not 1.7"),
        ("true", "label 'lesion' must be a whole number, not True"),
        ("1.0", r"label 'lesion' must be a whole number, not 1.0 \(write 1\)"),
        ("'1'", "label 'lesion' must be a whole number, not '1'"),
        ("-1", r"label 'lesion' = -1: a label value lies in 0..2147483647"),
        ("4294967297", r"label 'lesion' = 4294967297: a label value lies in 0..2147483647"),
        (".nan", "label 'lesion' must be a whole number, not nan"),
    ],
)
def test_a_folder_spec_class_value_that_is_no_whole_number_is_refused(tmp_path, value, message):
    spec = _spec(_cases(tmp_path), f"classes: {{lesion: {value}}}\n")
    with pytest.raises(UserError, match=message):
        registry.datasets.create("folder", {"spec": str(spec)})


def test_a_folder_spec_with_whole_class_values_still_loads(tmp_path):
    spec = _spec(_cases(tmp_path), "classes: {lesion: 1}\n")
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.label_classes == {"lesion": 1}
    assert [t.label_value for t in dataset.load("a").targets] == [1]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.7, "label 'lesion' must be a whole number, not 1.7"),
        (True, "label 'lesion' must be a whole number, not True"),
        (1.0, r"not 1.0 \(write 1\)"),
        ("1", "label 'lesion' must be a whole number, not '1'"),
        (-2, "label 'lesion' = -2"),
    ],
)
def test_a_dataset_json_class_value_that_is_no_whole_number_is_refused(tmp_path, value, message):
    root = _nnunet(_cases(tmp_path), {"labels": {"background": 0, "lesion": value}})
    with pytest.raises(UserError, match=message):
        registry.datasets.create("nnunet-folder", {"path": str(root)})


def test_the_cli_says_it_in_one_line(tmp_path, capsys):
    """``datasets verify`` of a config whose folder spec declares ``lesion: true``: exit 2,
    one line naming the spec and the class, no traceback."""
    spec = _spec(_cases(tmp_path), "classes: {lesion: true}\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: folder, spec: {spec}}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\n"
    )
    assert main(["datasets", "verify", str(config)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert (
        len(lines) == 1 and "spec.yaml: label 'lesion' must be a whole number, not True" in lines[0]
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("CTT", "modality 'CTT' is not a known modality name; known names: CT, CTA"),
        ("PET", "modality 'PET' is not a known modality name"),
        ("xray", "modality 'xray' is not a known modality name"),
        ("CT, MRI", r"modality 'CT, MRI' names both CT and MR \(a case is one or the other\)"),
        ("[1, 2]", r"modality must be a name such as CT or MR, not \[1, 2\]"),
        ("true", "modality must be a name such as CT or MR, not True"),
    ],
)
def test_a_folder_spec_modality_that_is_no_known_name_is_refused(tmp_path, value, message):
    spec = _spec(_cases(tmp_path), f"classes: {{lesion: 1}}\nmodality: {value}\n")
    with pytest.raises(UserError, match=message) as refusal:
        registry.datasets.create("folder", {"spec": str(spec)})
    assert "FLAIR" in str(refusal.value) and "leave it out" in str(refusal.value)


@pytest.mark.parametrize(
    ("value", "expected"), [("CT", "CT"), ("MRI (T1)", "MR"), ("t2", "MR"), ("", ""), (None, "")]
)
def test_known_and_left_out_modalities_are_read(tmp_path, value, expected):
    assert declared_modality(value, "spec") == expected


def test_a_folder_spec_without_modality_is_undeclared(tmp_path):
    spec = _spec(_cases(tmp_path), "classes: {lesion: 1}\n")
    assert registry.datasets.create("folder", {"spec": str(spec)}).load("a").image.modality == ""


def test_a_per_case_modality_that_is_no_known_name_is_refused(tmp_path):
    """``modalities_per_case`` is IntraBench's own key (CT or MR per case): an unknown name is
    refused naming the case; ``channel_names`` stays nnU-Net's (its normalisation names such as
    ``noNorm`` are no modality and leave the case undeclared)."""
    root = _nnunet(
        _cases(tmp_path),
        {
            "labels": {"background": 0, "lesion": 1},
            "channel_names": {"0": "noNorm"},
            "modalities_per_case": {"a": "CT", "b": "ultrasound"},
        },
    )
    with pytest.raises(
        UserError,
        match="modalities_per_case: b: modality 'ultrasound' is not a known modality name",
    ):
        registry.datasets.create("nnunet-folder", {"path": str(root)})
    _nnunet(
        root,
        {
            "labels": {"background": 0, "lesion": 1},
            "channel_names": {"0": "noNorm"},
            "modalities_per_case": {"a": "CT"},
        },
    )
    dataset = registry.datasets.create("nnunet-folder", {"path": str(root)})
    assert {case: dataset.load(case).image.modality for case in ("a", "b")} == {"a": "CT", "b": ""}
