"""Bring your own data (folder + YAML), verify's per-case report, datasets list and manual sources."""

from __future__ import annotations

import json

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench import registry
from intrabench.cli import main
from intrabench.errors import UserError


def _write(path, array, spacing=(0.9, 0.8, 2.0), origin=(1.0, 2.0, 3.0)):
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


def _own_folder(tmp_path):
    rng = np.random.default_rng(0)
    for case in ("p1", "p2"):
        _write(
            tmp_path / "images" / f"{case}_ct.nii.gz",
            rng.normal(0, 1, (6, 12, 14)).astype(np.float32),
        )
        label = np.zeros((6, 12, 14), np.uint8)
        label[1:3, 2:5, 2:5] = 1  # lesion, two components
        label[4:6, 8:11, 9:12] = 1
        label[0:6, 0:2, 0:14] = 2  # liver (organ)
        _write(tmp_path / "labels" / f"{case}_seg.nii.gz", label)
    spec = tmp_path / "own.yaml"
    spec.write_text(
        "name: my-study\nimages: images/{case}_ct.nii.gz\n"
        "labels: labels/{case}_seg.nii.gz\nclasses: {lesion: 1, liver: 2}\n"
        "target_types: {lesion: instance, liver: organ}\n"
    )
    return spec


def test_folder_dataset_from_yaml_patterns(tmp_path):
    tmp_path = tmp_path / "odd [name]"  # glob characters in the folder name are literal
    spec = _own_folder(tmp_path)
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.case_ids() == ["p1", "p2"]
    case = dataset.load("p1")
    assert case.dataset == "my-study"
    kinds = sorted((t.class_name, t.kind) for t in case.targets)
    assert kinds == [("lesion", "instance"), ("lesion", "instance"), ("liver", "organ")]
    assert case.image.spacing == pytest.approx((2.0, 0.8, 0.9))
    liver = next(t for t in case.targets if t.kind == "organ")
    assert case.target_mask(liver).sum() == 6 * 2 * 14


def test_folder_dataset_explicit_pairs_and_errors(tmp_path):
    _own_folder(tmp_path)
    spec = tmp_path / "pairs.yaml"
    spec.write_text(
        "pairs:\n  - {case: a, image: images/p2_ct.nii.gz, label: labels/p2_seg.nii.gz}\n"
        "classes: {lesion: 1, liver: 2}\nuse_classes: [lesion]\n"
    )
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    assert dataset.case_ids() == ["a"]
    assert len(dataset.load("a").targets) == 2  # liver (2) declared, not chosen: no target
    undeclared = tmp_path / "undeclared.yaml"  # the liver's value not declared: refused
    undeclared.write_text(
        spec.read_text().replace(", liver: 2", "").replace("use_classes: [lesion]\n", "")
    )
    with pytest.raises(Exception, match=r"label values \[2\] are not declared classes"):
        registry.datasets.create("folder", {"spec": str(undeclared)}).load("a")
    (tmp_path / "images" / "p3_ct.nii.gz").write_bytes(
        (tmp_path / "images" / "p1_ct.nii.gz").read_bytes()
    )
    with pytest.raises(UserError, match="without a label.*p3"):
        registry.datasets.create("folder", {"spec": str(_own_folder(tmp_path))})
    bad = tmp_path / "bad.yaml"
    bad.write_text("images: x/{case}.nii.gz\nlabels: y/{case}.nii.gz\nclasses: {a: 1}\nfoo: 1\n")
    with pytest.raises(UserError, match="unknown keys.*foo"):
        registry.datasets.create("folder", {"spec": str(bad)})


def test_example_config_parses():
    from pathlib import Path

    from intrabench.config import load_config

    config = load_config(Path(__file__).parents[2] / "configs" / "example-own-data.yaml")
    assert [d.name for d in config.datasets] == ["folder", "nnunet-folder"]


def test_verify_reports_bad_cases_per_case(tmp_path, capsys):
    folder = tmp_path / "ds"
    _write(folder / "imagesTr" / "good_0000.nii.gz", np.zeros((4, 6, 6), np.float32))
    label = np.zeros((4, 6, 6), np.uint8)
    label[1, 1, 1], label[2, 3, 3] = 1, 2
    _write(folder / "labelsTr" / "good.nii.gz", label)
    _write(folder / "imagesTr" / "grid_0000.nii.gz", np.zeros((4, 6, 6), np.float32))
    _write(folder / "labelsTr" / "grid.nii.gz", label, spacing=(1.0, 1.0, 1.0))
    _write(folder / "imagesTr" / "empty_0000.nii.gz", np.zeros((4, 6, 6), np.float32))
    _write(folder / "labelsTr" / "empty.nii.gz", np.zeros((4, 6, 6), np.uint8))
    _write(folder / "labelsTr" / "lonely.nii.gz", label)  # no image
    _write(folder / "imagesTr" / "orphan_0000.nii.gz", np.zeros((4, 6, 6), np.float32))
    (folder / "labelsTr" / "notes.txt").write_text("stray")
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "name": "x",
                "labels": {"background": 0, "lesion": 1},
                "target_types": {"lesion": "instance"},
                "instance_ids": True,
                "numTraining": 3,
            }
        )
    )
    assert main(["datasets", "verify", str(folder)]) == 1
    out = capsys.readouterr().out
    # instance ids 1 and 2 (instance_ids: true), spacing (2.0, 0.8, 0.9) on disk as (z, y, x)
    assert (
        f"{folder}/good: ok, 2 targets (lesion 2), spacing 2 x 0.8 x 0.9 mm (z, y, x), "
        "orientation LPS, shape 4 x 6 x 6"
    ) in out
    assert f"{folder}/grid: FAIL: grid.nii.gz: label grid does not match image grid" in out
    assert f"{folder}/empty: FAIL: empty.nii.gz: the label is empty" in out
    assert f"{folder}/lonely: FAIL: image not found: " in out
    assert f"{folder}: stray file in labelsTr: notes.txt" in out
    assert f"{folder}: stray file in imagesTr (no label): orphan_0000.nii.gz" in out
    assert f"{folder}: numTraining is 3 but labelsTr has 4 cases" in out
    assert f"{folder}: 1/4 cases ok, 2 targets -- PROBLEMS" in out


def _targets_in_run(config_path, out):
    """{(dataset, case): targets} of the rows a run of ``config_path`` writes."""
    import pandas as pd

    assert main(["run", str(config_path), "--out", str(out)]) == 0
    rows = pd.read_csv(out / "results.csv")
    targets = rows[["dataset", "case", "target"]].drop_duplicates()
    return targets.groupby(["dataset", "case"]).size().to_dict()


def _targets_in_verify(out):
    """{(dataset, case): targets} of verify's per-case lines."""
    import re

    found = re.findall(r"^(.+)/(\w+): ok, (\d+) targets? ", out, flags=re.M)
    return {(dataset, case): int(count) for dataset, case, count in found}


def _nrrd_folder(folder):
    label = np.zeros((8, 16, 16), np.uint8)
    label[2:4, 2:6, 2:6] = 1
    label[5:7, 9:13, 9:13] = 1  # two lesions
    label[:, 14:, :] = 2  # one organ
    for case in ("a", "b"):
        _write(
            folder / "imagesTr" / f"{case}_0000.nrrd",
            np.random.default_rng(1).normal(0, 1, label.shape).astype(np.float32),
        )
        _write(folder / "labelsTr" / f"{case}.nrrd", label)
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "labels": {"background": 0, "lesion": 1, "rim": 2},
                "target_types": {"lesion": "instance", "rim": "organ"},
                "numTraining": 2,
            }
        )
    )


def test_verify_reads_nrrd_folders_and_agrees_with_the_run(tmp_path, capsys):
    folder = tmp_path / "nrrd"
    _nrrd_folder(folder)
    assert main(["datasets", "verify", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"{folder}/a: ok, 3 targets (lesion 2, rim 1), spacing 2 x 0.8 x 0.9 mm" in out
    assert f"{folder}: 2/2 cases ok, 6 targets\n" in out
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: nnunet-folder, path: '{folder}'}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
    )
    assert main(["datasets", "verify", str(config)]) == 0
    verified = _targets_in_verify(capsys.readouterr().out)
    assert verified == _targets_in_run(config, tmp_path / "run")
    assert set(verified.values()) == {3}


def test_verify_reads_the_yaml_folder_route_and_run_configs(tmp_path, capsys):
    spec = _own_folder(tmp_path / "own")
    assert main(["datasets", "verify", str(spec)]) == 0
    out = capsys.readouterr().out
    assert (
        f"{spec}/p1: ok, 3 targets (lesion 2, liver 1), spacing 2 x 0.8 x 0.9 mm (z, y, x), "
        "orientation LPS, shape 6 x 12 x 14"
    ) in out
    _nrrd_folder(tmp_path / "nrrd")
    config = tmp_path / "run.yaml"  # relative paths: resolved against the config's folder
    config.write_text(
        "name: t\ndatasets:\n  - {name: folder, spec: own/own.yaml, label: mine}\n"
        "  - {name: nnunet-folder, path: nrrd}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
    )
    assert main(["datasets", "verify", str(config), "-q"]) == 0
    out = capsys.readouterr().out  # each dataset under the name its results carry
    assert out.splitlines() == [
        "mine: 2/2 cases ok, 6 targets",
        "nnunet-folder(path=nrrd): 2/2 cases ok, 6 targets",
    ]
    assert main(["datasets", "verify", str(config)]) == 0
    verified = _targets_in_verify(capsys.readouterr().out)
    assert verified == _targets_in_run(config, tmp_path / "run")
    assert len(verified) == 4
    assert main(["datasets", "verify", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_list_shows_status_on_disk(tmp_path, capsys):
    assert main(["datasets", "list", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header == ["name", "modality", "targets", "size", "licence", "status"]
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "manual download needed" in lines["segrap"]
    assert "not downloaded" in lines["pengwin"]
    assert "CC BY-NC-SA 4.0" in lines["pengwin"]
    assert lines["demo-real"].rstrip().endswith("ready")
    (tmp_path / "raw" / "pengwin").mkdir(parents=True)
    (tmp_path / "raw" / "pengwin" / "PENGWIN_CT_train_labels.zip.partial").write_bytes(b"x")
    main(["datasets", "list", "--root", str(tmp_path)])
    assert "partially downloaded" in capsys.readouterr().out


def test_manual_download_prints_instructions(tmp_path, capsys):
    assert main(["datasets", "download", "ms-lesions", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "https://data.mendeley.com/datasets/8bctsm8jz7/1" in out
    assert str(tmp_path / "raw" / "ms-lesions") in out
    assert main(["datasets", "prepare", "ms-lesions", "--root", str(tmp_path)]) == 2
    assert "not downloaded yet" in capsys.readouterr().err


def test_unprepared_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="not prepared.*datasets download pengwin"):
        registry.datasets.create("pengwin", {"root": str(tmp_path)})


def test_data_root_from_environment(tmp_path, monkeypatch):
    from intrabench.datasets._recipe import data_root

    monkeypatch.setenv("INTRABENCH_DATA", str(tmp_path))
    assert data_root() == tmp_path
    assert data_root(tmp_path / "x") == tmp_path / "x"


def test_a_run_can_name_a_prepared_recipe_and_own_data(http_server, tmp_path, capsys):
    import sys
    from pathlib import Path

    import pandas as pd

    sys.path.insert(0, str(Path(__file__).parent))
    from test_recipes import build_pengwin

    root = tmp_path / "data"
    build_pengwin(http_server, tmp_path, root)
    common = ["--root", str(root), "-q"]
    assert main(["datasets", "download", "pengwin", "--zenodo-url", http_server.base, *common]) == 0
    assert main(["datasets", "prepare", "pengwin", *common]) == 0
    spec = _own_folder(tmp_path / "own")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\ndatasets:\n  - {{name: pengwin, root: '{root}', label: pengwin}}\n"
        f"  - {{name: folder, spec: '{spec}', label: mine}}\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 0\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    targets = rows[["dataset", "case", "target"]].drop_duplicates()
    assert targets.groupby("dataset").size().to_dict() == {"pengwin": 4, "mine": 6}
    assert set(rows.loc[rows.dataset == "pengwin", "target_kind"]) == {"instance"}


def test_verify_fails_truncated_nan_and_2d_cases(tmp_path, capsys):
    folder = tmp_path / "ds"
    label = np.zeros((20, 64, 64), np.uint8)  # large enough that a cut falls in the voxels
    label[5:15, 20:40, 20:40] = 1
    for case in ("good", "cut", "nan", "nanlabel"):
        _write(
            folder / "imagesTr" / f"{case}_0000.nii.gz",
            np.random.default_rng(0).random((20, 64, 64)).astype(np.float32),
        )
        _write(folder / "labelsTr" / f"{case}.nii.gz", label)
    cut = folder / "labelsTr" / "cut.nii.gz"
    cut.write_bytes(cut.read_bytes()[: len(cut.read_bytes()) // 2])  # SimpleITK reads it
    nan_image = np.zeros((20, 64, 64), np.float32)
    nan_image[0, 0, 0] = np.nan
    _write(folder / "imagesTr" / "nan_0000.nii.gz", nan_image)
    _write(folder / "labelsTr" / "nanlabel.nii.gz", np.where(label, 1.0, np.nan).astype(np.float32))
    flat = sitk.GetImageFromArray(np.zeros((6, 6), np.float32))
    sitk.WriteImage(flat, str(folder / "imagesTr" / "flat_0000.nii.gz"))
    sitk.WriteImage(
        sitk.GetImageFromArray(np.ones((6, 6), np.uint8)), str(folder / "labelsTr" / "flat.nii.gz")
    )
    (folder / "dataset.json").write_text(
        json.dumps({"name": "x", "labels": {"background": 0, "lesion": 1}, "numTraining": 5})
    )
    assert main(["datasets", "verify", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "/good: ok, 1 target (lesion 1)" in out
    assert "/cut: FAIL: " in out and "cut.nii.gz: truncated" in out
    assert "/nan: FAIL: " in out and "nan_0000.nii.gz: 1 voxels are NaN" in out
    assert "/nanlabel: FAIL: " in out and "nanlabel.nii.gz: 77920 voxels are NaN" in out
    assert "/flat: FAIL: " in out and "flat_0000.nii.gz: expected a 3D image, got 2D" in out
    assert "1/5 cases ok" in out


def _nnunet(folder, label, labels, image=None):
    _write(
        folder / "imagesTr" / "c1_0000.nii.gz",
        image if image is not None else np.zeros(label.shape, np.float32),
    )
    image = sitk.GetImageFromArray(label)
    image.SetSpacing((0.9, 0.8, 2.0))
    image.SetOrigin((1.0, 2.0, 3.0))
    (folder / "labelsTr").mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(folder / "labelsTr" / "c1.nii.gz"))
    (folder / "dataset.json").write_text(json.dumps({"name": "x", "labels": labels}))
    return folder


def test_instances_values_with_two_classes_is_refused(tmp_path):
    # it used to give every voxel to the last class's loop: the first class's targets had 0
    # voxels and scored Dice 1.0
    label = np.zeros((4, 6, 6), np.uint8)
    label[1, 1, 1], label[2, 3, 3] = 1, 2
    folder = _nnunet(tmp_path / "ds", label, {"background": 0, "lesion": 1, "cyst": 2})
    with pytest.raises(UserError, match="instances: values .* exactly one foreground class"):
        registry.datasets.create("nnunet-folder", {"path": str(folder), "instances": "values"})
    two = registry.datasets.create("nnunet-folder", {"path": str(folder)})
    targets = two.load("c1").targets
    assert [t.class_name for t in targets] == ["lesion", "cyst"]
    case = two.load("c1")
    assert all(case.target_mask(t).sum() == 1 for t in targets)


@pytest.mark.parametrize(
    ("label", "message"),
    [
        (
            np.where(np.indices((4, 6, 6))[0] == 1, 1.7, 0.0).astype(np.float32),
            "label values must be whole numbers; found 1.7",
        ),
        (
            np.where(np.indices((4, 6, 6))[0] == 1, 2**40 + 1, 0).astype(np.int64),
            "label values must lie in 0..2147483647",
        ),
        (
            np.where(np.indices((4, 6, 6))[0] == 1, 3, 0).astype(np.uint8),
            r"label values \[3\] are not declared classes \(dataset.json's labels: lesion: 1\)",
        ),
    ],
)
def test_labels_that_would_be_misread_are_refused(tmp_path, label, message):
    from intrabench.errors import DataError

    label = label.copy()
    label[2, 2, 2] = 1  # one declared target besides
    folder = _nnunet(tmp_path / "ds", label, {"background": 0, "lesion": 1})
    dataset = registry.datasets.create("nnunet-folder", {"path": str(folder)})
    with pytest.raises(DataError, match=message):
        dataset.load("c1")


def test_messages_name_what_is_wrong(tmp_path):
    """A target_types typo names the wrong class and the valid ones; a pattern that finds
    nothing says what it looked for and what the folders hold (#51 item 6)."""
    _own_folder(tmp_path)
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        "images: images/{case}_ct.nii.gz\nlabels: labels/{case}_seg.nii.gz\n"
        "classes: {lesion: 1, liver: 2}\ntarget_types: {livr: organ}\n"
    )
    with pytest.raises(
        UserError,
        match=r"target_types names \['livr'\], which are not classes "
        r"\(classes: lesion, liver\) \(did you mean 'liver'",
    ):
        registry.datasets.create("folder", {"spec": str(typo)})
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(
        "images: images/{case}_ct.nrrd\nlabels: scans/{case}_seg.nii.gz\nclasses: {lesion: 1}\n"
    )
    with pytest.raises(UserError) as caught:
        registry.datasets.create("folder", {"spec": str(wrong)})
    message = str(caught.value)
    assert f"looked for images {tmp_path / 'images' / '{case}_ct.nrrd'}" in message
    assert "images: 0 of 2 file(s)" in message and "p1_ct.nii.gz" in message
    assert f"there is no folder {tmp_path / 'scans'}" in message


def _two_channel_folder(tmp_path):
    """An nnU-Net folder of a CT and a T2 image per case (``<case>_0000``, ``<case>_0001``)."""
    folder = tmp_path / "Dataset007_Two"
    label = np.zeros((4, 6, 6), np.uint8)
    label[1:3, 2:4, 2:4] = 1
    ct = np.arange(4 * 6 * 6, dtype=np.float32).reshape(4, 6, 6)
    _write(folder / "imagesTr" / "a_0000.nii.gz", ct)
    _write(folder / "imagesTr" / "a_0001.nii.gz", -ct)
    _write(folder / "labelsTr" / "a.nii.gz", label)
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "channel_names": {"0": "CT", "1": "T2"},
                "labels": {"background": 0, "lesion": 1},
                "numTraining": 1,
                "file_ending": ".nii.gz",
            }
        )
    )
    return folder, ct


def test_a_multi_channel_folder_is_no_problem_and_its_channel_is_chosen(tmp_path, capsys):
    """The second channel's file was a 'stray file in imagesTr (no label)', and the models saw
    channel 0 only."""
    folder, ct = _two_channel_folder(tmp_path)  # its "CT" holds no air: trusted
    assert main(["datasets", "verify", str(folder), "--trust-modality"]) == 0
    assert "stray" not in capsys.readouterr().out
    default = registry.datasets.create("nnunet-folder", {"path": str(folder)})
    by_name = registry.datasets.create("nnunet-folder", {"path": str(folder), "channel": "t2"})
    by_number = registry.datasets.create("nnunet-folder", {"path": str(folder), "channel": 1})
    first, second = default.load("a"), by_name.load("a")
    np.testing.assert_array_equal(second.image.array, -first.image.array)
    np.testing.assert_array_equal(by_number.load("a").image.array, second.image.array)
    assert sorted(np.unique(first.image.array))[:2] == [0.0, 1.0]  # the CT's values
    assert (default.case_modality("a"), by_name.case_modality("a")) == ("CT", "MR")
    for wrong, message in (
        (2, "channel 2: .* declares the channels 0 \\(CT\\), 1 \\(T2\\)"),
        ("FLAIR", "channel 'FLAIR': .* names the channels 0 \\(CT\\), 1 \\(T2\\)"),
        (True, "channel: a channel number or name, got True"),
    ):
        with pytest.raises(UserError, match=message):
            registry.datasets.create("nnunet-folder", {"path": str(folder), "channel": wrong})
    # a channel dataset.json does not declare is still a stray file
    _write(folder / "imagesTr" / "a_0002.nii.gz", ct)
    assert main(["datasets", "verify", str(folder), "--trust-modality"]) == 1
    assert (
        f"{folder}: stray file in imagesTr: a_0002.nii.gz is channel 2, which "
        "dataset.json's channel_names does not declare"
    ) in capsys.readouterr().out


@pytest.mark.parametrize(
    "channels",
    [
        ["CT"],
        {"x": "CT"},
        {"-1": "CT"},
        "CT",
        7,
        {"0": {"nested": [1, {"2": None}]}},
        {"0": float("nan")},
        {str(i): "MR" for i in range(20_000)},
    ],
)
def test_hostile_channel_names_are_one_line_or_read_as_given(tmp_path, channels):
    folder, _ = _two_channel_folder(tmp_path)
    meta = json.loads((folder / "dataset.json").read_text())
    (folder / "dataset.json").write_text(json.dumps({**meta, "channel_names": channels}))
    try:
        dataset = registry.datasets.create("nnunet-folder", {"path": str(folder)})
    except UserError as error:
        assert "channel_names must map channel numbers to names" in str(error)
        return
    assert dataset.load("a").image.shape == (4, 6, 6)  # channel 0, whatever its name
