"""Config paths, changed configs, overrides and the dry run (issue #20, items 3, 4, 8)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk
import yaml

from intrabench.cli import main
from intrabench.config import load_config
from intrabench.errors import ConfigError


def _own_folder(root: Path) -> None:
    """A tiny folder dataset: one image and label with two lesions, and its YAML spec."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    image = np.zeros((12, 32, 32), np.float32)
    label = np.zeros(image.shape, np.uint8)
    label[3:7, 4:12, 4:12] = 1
    label[5:9, 18:28, 16:26] = 1
    image[label > 0] = 200.0
    for array, path in (
        (image, root / "images" / "c1.nii.gz"),
        (label, root / "labels" / "c1.nii.gz"),
    ):
        volume = sitk.GetImageFromArray(array)
        volume.SetSpacing((0.8, 0.8, 2.0))
        sitk.WriteImage(volume, str(path))
    (root / "dataset.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "mine",
                "images": "images/{case}.nii.gz",
                "labels": "labels/{case}.nii.gz",
                "classes": {"lesion": 1},
            }
        )
    )


def _config(folder: Path, **extra) -> Path:
    path = folder / "run.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "own",
                "datasets": [{"name": "folder", "spec": "data/dataset.yaml"}],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
                "target_attributes": False,
                **extra,
            }
        )
    )
    return path


def test_paths_are_relative_to_the_config_and_stored_absolute(tmp_path, monkeypatch, capsys):
    project = tmp_path / "project"
    _own_folder(project / "data")
    config_path = _config(project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the config's folder
    config = load_config(config_path)
    [dataset] = config.datasets
    assert dataset.params["spec"] == str((project / "data" / "dataset.yaml").resolve())
    assert dataset.key == "mine"  # the spec's own name (#69), wherever the config lies
    out = tmp_path / "out"
    assert main(["run", str(config_path), "--out", str(out)]) == 0
    recorded = yaml.safe_load((out / "config.yaml").read_text())
    assert recorded["datasets"][0]["params"]["spec"] == str(project / "data" / "dataset.yaml")
    rows = pd.read_parquet(out / "results.parquet")
    assert set(rows.dataset) == {"mine"} and len(rows) == 2
    # the recorded config works from anywhere too (a report from another folder)
    monkeypatch.chdir(tmp_path)
    assert os.path.isabs(recorded["datasets"][0]["params"]["spec"])


@pytest.fixture
def finished_run(tmp_path, capsys) -> tuple[Path, Path]:
    """(the project folder with its config and data, a finished run's folder)."""
    project = tmp_path / "project"
    _own_folder(project / "data")
    out = tmp_path / "out"
    assert main(["run", str(_config(project)), "--out", str(out)]) == 0
    capsys.readouterr()
    return project, out


def test_a_changed_config_is_refused_with_its_difference_unless_extended(finished_run, capsys):
    project, out = finished_run
    changed = _config(project, models=["region-growing-3d", "random-walker-3d"])
    assert main(["run", str(changed), "--out", str(out), "--set", "refinement_steps=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[1:]  # after the "run ... ->" line
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "models: +random-walker-3d" in err[0] and "refinement_steps: 5 -> 2" in err[0]
    assert "--extend" in err[0]
    before = (out / "config.yaml").read_text()
    assert "random-walker-3d" not in before  # nothing was overwritten
    assert (
        main(["run", str(changed), "--out", str(out), "--extend", "--set", "refinement_steps=2"])
        == 0
    )
    assert "random-walker-3d" in (out / "config.yaml").read_text()
    assert set(pd.read_parquet(out / "results.parquet").model) == {
        "region-growing-3d",
        "random-walker-3d",
    }


def test_run_json_records_versions_and_the_code_commit(tmp_path):
    project = tmp_path / "project"
    _own_folder(project / "data")
    assert main(["run", str(_config(project)), "--out", str(tmp_path / "out")]) == 0
    metadata = json.loads((tmp_path / "out" / "run.json").read_text())
    assert {"intrabench", "numpy", "torch"} <= set(metadata["versions"])
    if (Path(__file__).resolve().parents[2] / ".git").exists():
        assert len(metadata["code"]["git_commit"]) == 40
        assert isinstance(metadata["code"]["git_dirty"], bool)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("refinement_steps=3", ("refinement_steps", 3)),
        ("seeds=[0, 1]", ("seeds", [0, 1])),
        ("robustness.groups=4", ("robustness", {"groups": 4})),
    ],
)
def test_overrides_set_keys_as_yaml_values(tmp_path, override, expected):
    from intrabench.config import apply_overrides

    data = {"name": "x", "refinement_steps": 5}
    key, value = expected
    assert apply_overrides(data, [override])[key] == value
    assert data == {"name": "x", "refinement_steps": 5}  # the original is untouched


@pytest.mark.parametrize(
    "override, message",
    [
        ("refinement_steps", "expected KEY=VALUE"),
        ("name.x=1", "'name' is not a mapping"),
        ("seeds=[0", "not valid YAML"),
    ],
)
def test_bad_overrides_are_one_line_errors(tmp_path, override, message):
    project = tmp_path / "project"
    _own_folder(project / "data")
    with pytest.raises(ConfigError, match=message):
        load_config(_config(project), overrides=[override])


def test_an_override_that_breaks_the_schema_names_the_key(tmp_path, capsys):
    project = tmp_path / "project"
    _own_folder(project / "data")
    assert main(["run", str(_config(project)), "--set", "refinement_steps=-1"]) == 2
    assert "refinement_steps" in capsys.readouterr().err


def test_dry_run_prints_the_plan_and_touches_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--dry-run", "--out", str(out), "--set", "refinement_steps=2"]) == 0
    printed = capsys.readouterr().out
    assert "72 work units (0 already done there), 1 seed, 2 refinement steps" in printed
    assert any(
        line.split() == ["litemedsam", "demo-real", "12", "3", "1"] for line in printed.splitlines()
    )
    assert (
        "litemedsam: dataset 'phantoms' left out: the config runs the model on demo-real "
        "only" in printed
    )
    assert any(
        line.split() == ["random-walker-2d", "demo-real", "21", "3", "3"]
        for line in printed.splitlines()
    )
    assert any(
        line.split() == ["mobilesam", "demo-real", "6", "3", "3"] for line in printed.splitlines()
    )
    assert (
        "mobilesam + box-3d: left out: the config runs the model with 1-point-per-slice "
        "only" in printed
    )
    assert "region-growing-3d + box-per-slice: prompter 'box-per-slice' is for 2D models" in printed
    assert printed.count("region-growing-3d + box-per-slice") == 1
    assert not out.exists()


def test_a_label_value_mismatch_is_named_not_called_empty(tmp_path):
    from intrabench import registry
    from intrabench.errors import DataError

    _own_folder(tmp_path / "data")
    spec = tmp_path / "data" / "dataset.yaml"
    spec.write_text(spec.read_text().replace("lesion: 1", "lesion: 2"))
    dataset = registry.datasets.create("folder", {"spec": str(spec)})
    with pytest.raises(
        DataError,
        match=r"label values \[1\] are not declared classes "
        r"\(the spec's classes: lesion: 2\)",
    ):
        dataset.load("c1")


def test_report_and_tables_refuse_an_unknown_metric_in_one_line(tmp_path, finished_run, capsys):
    _, out = finished_run
    for command in (
        ["report", str(out), "--metric", "dcie"],
        ["tables", str(out), "--metric", "dcie"],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --metric dcie: not a") and "dice" in err
        assert "\n" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_dry_run_warns_of_the_refusal_the_run_would_meet(tmp_path, capsys):
    out = tmp_path / "out"
    demo = [
        "run",
        "--out",
        str(out),
        "--set",
        "refinement_steps=1",
        "--set",
        "datasets=[{name: demo-phantoms, n_cases: 1}]",
        "--set",
        "models=[region-growing-3d]",
        "--set",
        "prompters=[box-3d]",
    ]
    assert main(demo) == 0
    capsys.readouterr()
    changed = [*demo[:-2], "--set", "prompters=[box-3d, {name: center-points-per-volume}]"]
    assert main([*changed, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("warning: the run would stop here: ")
    assert "pass --extend" in printed.splitlines()[0]
    assert main([*changed, "--dry-run", "--extend"]) == 0
    assert "would stop here" not in capsys.readouterr().out
