"""Attributes end to end: in the rows of a run, ``intrabench attributes``, the report section."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from intrabench import registry
from intrabench.attributes.catalogue import ATTRIBUTES, COLUMNS
from intrabench.attributes.compute import case_attributes
from intrabench.cli import main
from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results


def _config(name: str, **extra) -> RunConfig:
    return RunConfig.model_validate(
        {
            "name": name,
            "datasets": [{"name": "demo-phantoms", "n_cases": 3, "label": "phantoms"}],
            "models": ["region-growing-3d"],
            "prompters": ["box-3d", {"name": "center-points-per-volume", "n_points": 1}],
            "refiners": ["scribble"],
            "refinement_steps": 1,
            **extra,
        }
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("attributes") / "run"
    Runner(_config("attributes"), path).run()
    return path


def test_every_row_carries_its_targets_attributes(run_dir):
    rows = load_results(run_dir)
    assert set(COLUMNS) <= set(rows.columns)
    assert not rows["attr_volume_ml"].isna().any()
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 3})
    for case_id in dataset.case_ids():
        expected = case_attributes(dataset.load(case_id), dataset.modality)
        for target_id, values in expected.items():
            chosen = rows[(rows["case"] == case_id) & (rows["target"] == target_id)]
            assert len(chosen) == 2 * 2  # 2 prompters x (step 0, step 1)
            for name, value in values.items():
                column = chosen[f"attr_{name}"]
                if value != value:
                    assert column.isna().all()
                else:
                    assert (column == value).all(), name


def test_attributes_do_not_depend_on_how_the_run_is_executed(run_dir, tmp_path):
    Runner(_config("attributes"), tmp_path / "inline", background="inline").run()
    first = load_results(run_dir)
    second = load_results(tmp_path / "inline")
    pd.testing.assert_frame_equal(first[list(COLUMNS)], second[list(COLUMNS)])


def test_attributes_command_prints_a_table_and_writes_csv(run_dir, tmp_path, capsys):
    out = tmp_path / "attributes"
    assert main(["attributes", str(run_dir), "--out", str(out), "--n-boot", "200"]) == 0
    printed = capsys.readouterr().out
    assert "| model | attribute | unit |" in printed
    assert "| region-growing-3d | volume_ml | ml |" in printed
    assert "| region-growing-3d | sphericity | 1 |" in printed
    groups = pd.read_csv(out / "attribute-groups.csv")
    targets = pd.read_csv(out / "attribute-targets.csv")
    n_targets = len(targets[["dataset", "case", "target"]].drop_duplicates())
    volume = groups[(groups["attribute"] == "volume_ml") & (groups["metric"] == "dice_final")]
    # the files hold every configuration; in each, every target sits in exactly one group
    assert volume.groupby(["model", "prompter", "refiner"]).ngroups == 2
    assert (volume.groupby(["model", "prompter", "refiner"])["n_targets"].sum() == n_targets).all()
    assert set(volume["group"]) == {"low", "mid", "high"}
    # the same command twice: the same numbers (seeded bootstrap)
    assert (
        main(["attributes", str(run_dir), "--out", str(tmp_path / "again"), "--n-boot", "200"]) == 0
    )
    pd.testing.assert_frame_equal(groups, pd.read_csv(tmp_path / "again" / "attribute-groups.csv"))
    assert (
        main(
            [
                "attributes",
                str(run_dir),
                "--out",
                str(out),
                "--by",
                "configuration",
                "--metric",
                "effort_to_dice_0.8",
                "--n-boot",
                "50",
            ]
        )
        == 0
    )
    assert "| region-growing-3d | box-3d | scribble | volume_ml |" in capsys.readouterr().out


def test_a_run_without_attributes_gets_them_measured_from_its_config(tmp_path, capsys):
    Runner(_config("plain", target_attributes=False, refiners=[]), tmp_path / "plain").run()
    rows = load_results(tmp_path / "plain")
    assert not any(column.startswith("attr_") for column in rows.columns)
    assert main(["attributes", str(tmp_path / "plain"), "--n-boot", "50"]) == 0
    assert "| region-growing-3d | volume_ml | ml |" in capsys.readouterr().out
    assert main(["attributes", str(tmp_path / "plain"), "--metric", "dice_auc"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --metric dice_auc") and "Traceback" not in error


def test_report_gains_the_attribute_section(run_dir, tmp_path):
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Which targets are hard, for which model</h2>" in page
    assert "sphericity" in page
    for name in ("dice-by-attribute-group.png", "dice-vs-attributes.png"):
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_attribute_is_defined_in_the_docs():
    text = (Path(__file__).parents[2] / "docs" / "attributes.md").read_text()
    for spec in ATTRIBUTES:
        assert f"`{spec.name}`" in text, spec.name


def test_a_run_folder_with_attribute_files_can_be_run_again(run_dir):
    assert main(["attributes", str(run_dir), "--n-boot", "20"]) == 0
    assert (run_dir / "attributes" / "attribute-groups.csv").exists()
    Runner(_config("attributes"), run_dir).run()  # resumes: the folder is still the run's own
