"""Modalities per case in a folder spec, and `datasets verify` refusing a case whose
intensities contradict its declared modality (#69 item 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench import registry
from intrabench.cli import main
from intrabench.errors import UserError


def _folder(root: Path, lows: dict[str, int]) -> Path:
    """One case per entry, its image's lowest value ``lows[case]`` (else 100), one lesion."""
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    label = np.zeros((4, 6, 6), np.uint8)
    label[1:3, 2:4, 2:4] = 1
    for case, low in lows.items():
        image = np.full((4, 6, 6), 100, np.int16)
        image[0, 0, 0] = low
        sitk.WriteImage(sitk.GetImageFromArray(image), str(root / "images" / f"{case}.nii.gz"))
        sitk.WriteImage(sitk.GetImageFromArray(label), str(root / "labels" / f"{case}.nii.gz"))
    return root


def _spec(root: Path, extra: str) -> Path:
    spec = root / "spec.yaml"
    spec.write_text(
        "name: mixed\nimages: images/{case}.nii.gz\nlabels: labels/{case}.nii.gz\n"
        "classes: {lesion: 1}\n" + extra
    )
    return spec


def test_a_mapping_gives_each_case_its_modality_by_id_or_pattern(tmp_path):
    root = _folder(tmp_path, {"lung2": -1000, "brain1": 0, "brain2": 0, "other": 0})
    spec = _spec(root, "modality: {lung2: CT, 'brain*': MRI}\n")
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert {c: dataset.declared_modality(c) for c in dataset.case_ids()} == {
        "brain1": "MR",
        "brain2": "MR",
        "lung2": "CT",
        "other": "",
    }
    assert dataset.load("lung2").image.modality == "CT"
    assert dataset.load("brain2").image.modality == "MR"


@pytest.mark.parametrize(
    ("modality", "message"),
    [
        ("{lugn2: CT}", r"modality: 'lugn2' matches no case \(cases: brain1, lung2\)"),
        ("{'*': CT, brain1: MR}", "case 'brain1' is CT by '\\*' and MR by 'brain1'; give it one"),
        ("{lung2: PET}", "modality: lung2: modality 'PET' is not a known modality name"),
    ],
)
def test_a_wrong_mapping_is_refused_in_one_line(tmp_path, modality, message):
    spec = _spec(_folder(tmp_path, {"lung2": -1000, "brain1": 0}), f"modality: {modality}\n")
    with pytest.raises(UserError, match=message):
        registry.datasets.create("folder", {"spec": str(spec)})


def test_verify_prints_each_modality_and_refuses_contradicting_intensities(tmp_path, capsys):
    root = _folder(tmp_path, {"lung2": -1000, "brain1": 0, "brain2": -1024, "ct3": 0})
    spec = _spec(root, "modality: {'lung*': CT, 'brain*': MR, ct3: CT}\n")
    assert main(["datasets", "verify", str(spec)]) == 1
    out = capsys.readouterr().out
    assert "lung2: ok, 1 target (lesion 1)" in out and out.count("modality CT\n") == 1
    assert "brain1: ok" in out and "modality MR\n" in out
    assert (
        "brain2: FAIL: declared MR, but voxels go down to -1024 (below -500, CT's air in HU): a CT?"
    ) in out
    assert "ct3: FAIL: declared CT, but no voxel is below -500 HU (the lowest is 0)" in out
    assert f"{spec}: 2/4 cases ok, 2 targets -- PROBLEMS" in out


@pytest.mark.parametrize("how", ["spec", "flag"])
def test_the_user_can_say_the_modalities_are_right(tmp_path, capsys, how):
    root = _folder(tmp_path, {"ct3": 0})
    spec = _spec(root, "modality: CT\n" + ("trust_modality: true\n" if how == "spec" else ""))
    argv = ["datasets", "verify", str(spec)] + (["--trust-modality"] if how == "flag" else [])
    assert main(argv) == 0
    assert "ct3: ok, 1 target (lesion 1)" in capsys.readouterr().out


def test_trust_modality_must_be_a_boolean(tmp_path):
    spec = _spec(_folder(tmp_path, {"a": 0}), "trust_modality: 'yes please'\n")
    with pytest.raises(UserError, match="trust_modality must be true or false"):
        registry.datasets.create("folder", {"spec": str(spec)})
