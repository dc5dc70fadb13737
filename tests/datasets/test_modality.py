"""The modality a dataset declares reaches the model with the image (Volume.modality):
nnU-Net channel_names and modalities_per_case, a folder spec's modality key, the recipes'
registered modality; never guessed from intensities."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench import registry
from intrabench.engine.case_reader import load_case
from intrabench.errors import UserError
from intrabench.interfaces import Dataset
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.modality import normalise_modality
from intrabench.types import Case, Target


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("CT", "CT"),
        ("ct", "CT"),
        ("CT (synthetic)", "CT"),
        ("CECT", "CT"),
        ("MR", "MR"),
        ("MRI", "MR"),
        ("MRI (T1)", "MR"),
        ("T2", "MR"),
        ("t1ce", "MR"),
        ("FLAIR", "MR"),
        ("ADC", "MR"),
        ("T2*", "MR"),
        ("CT, MRI", ""),
        ("CT/MRI", ""),
        ("noNorm", ""),
        ("PET", ""),
        ("", ""),
        (None, ""),
        ("any", ""),
        ("OCT", ""),
    ],
)
def test_declared_names_normalise_to_ct_mr_or_unknown(declared, expected):
    assert normalise_modality(declared) == expected


def _nnunet_folder(root: Path, meta: dict, cases=("a", "b")) -> Path:
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
    (root / "dataset.json").write_text(
        json.dumps({"labels": {"background": 0, "lesion": 1}, **meta})
    )
    return root


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"channel_names": {"0": "CT"}}, {"a": "CT", "b": "CT"}),
        ({"channel_names": {"0": "T2"}}, {"a": "MR", "b": "MR"}),
        ({"modality": {"0": "MRI"}}, {"a": "MR", "b": "MR"}),  # nnU-Net v1's key
        ({}, {"a": "", "b": ""}),
        (
            {"channel_names": {"0": "CT/MRI"}, "modalities_per_case": {"b": "MRI"}},
            {"a": "", "b": "MR"},
        ),
        (
            {"channel_names": {"0": "CT"}, "modalities_per_case": {"b": "MR"}},
            {"a": "CT", "b": "MR"},
        ),
    ],
)
def test_nnunet_folder_cases_carry_the_declared_modality(tmp_path, meta, expected):
    dataset = registry.datasets.create(
        "nnunet-folder", {"path": str(_nnunet_folder(tmp_path, meta))}
    )
    assert {case: dataset.load(case).image.modality for case in ("a", "b")} == expected


def test_a_malformed_declaration_is_a_one_line_error(tmp_path):
    root = _nnunet_folder(tmp_path, {"channel_names": "CT"})
    with pytest.raises(UserError, match="channel_names must map channel numbers"):
        registry.datasets.create("nnunet-folder", {"path": str(root)})


def test_folder_spec_modality_key(tmp_path):
    _nnunet_folder(tmp_path, {})
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "images: imagesTr/{case}_0000.nii.gz\nlabels: labelsTr/{case}.nii.gz\n"
        "classes: {lesion: 1}\nmodality: MRI (T1)\n"
    )
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.load("a").image.modality == "MR"
    spec.write_text(spec.read_text().replace("MRI (T1)", "[1, 2]"))
    with pytest.raises(UserError, match="modality must be a name"):
        registry.datasets.create("folder", {"spec": str(spec)})


def test_built_in_demo_cases_are_ct_and_mr():
    demo = registry.datasets.create("demo-real")
    assert {c: demo.load(c).image.modality for c in demo.case_ids()} == {
        "brain1": "MR",
        "breast1": "MR",
        "lung1": "CT",
    }
    phantoms = registry.datasets.create("demo-phantoms", {"n_cases": 1})
    assert phantoms.load("phantom_000").image.modality == "CT"


@registry.datasets.register
class _OneModalityRecipe(Dataset):
    """A recipe-like dataset that declares its modality on the class only."""

    name = "test-one-modality-recipe"
    modality = "MRI (T2)"

    def case_ids(self) -> list[str]:
        return ["only"]

    def load(self, case_id: str) -> Case:
        geometry = ImageGeometry(
            (4, 4, 2), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1, 0, 0, 0, 1, 0, 0, 0, 1)
        )
        label = np.zeros((2, 4, 4), np.uint8)
        label[0, 1, 1] = 1
        return Case(
            self.name,
            case_id,
            Volume(np.zeros((2, 4, 4), np.float32), (1.0, 1.0, 1.0), geometry),
            label,
            (Target("t", 1, "lesion"),),
        )


def test_the_case_reader_fills_in_a_recipes_modality():
    case = load_case([], "test-one-modality-recipe", {}, "only")
    assert case.image.modality == "MR"


def test_a_missing_dataset_folder_says_not_found(tmp_path):
    with pytest.raises(UserError, match=f"dataset folder not found: {tmp_path / 'nowhere'}"):
        registry.datasets.create("nnunet-folder", {"path": str(tmp_path / "nowhere")})
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        registry.datasets.create("nnunet-folder", {"path": str(tmp_path / "file")})


def test_an_empty_out_is_refused(tmp_path, capsys):
    from intrabench.cli import main

    assert main(["run", "--out", "", "--dry-run"]) == 2
    assert "--out is empty" in capsys.readouterr().err
