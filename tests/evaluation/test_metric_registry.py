"""Metrics declared once: a new metric is one declaration (plus its function) and shows up in
the result rows, the episode table, the report's summary table, the supplement's per-target
table and the ``--metric`` choices, and its values are checked against its range when results
are read; a run resumed with another metric set is refused with the difference named; the
protocols are registered objects, and the config's ``protocol:`` accepts a plugin's."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from intrabench.errors import ConfigError, DataError, UserError
from intrabench.evaluation.cvpr25 import step_metrics_cvpr25
from intrabench.evaluation.episode_metrics import episode_table
from intrabench.evaluation.metric_registry import (
    METRICS,
    PROTOCOLS,
    Metric,
    StepPair,
    metric_names,
    metric_ranges,
    protocol,
    register_metric,
    require_metric,
    unregister_metric,
)
from intrabench.evaluation.metrics import step_metrics
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results

from .conftest import narrowed_demo


def _precision(pair: StepPair) -> float:
    """TP / (TP + FP): the share of the predicted voxels that are the target's; NaN for an
    empty prediction."""
    true_positives, false_positives, _ = pair.counts
    predicted = true_positives + false_positives
    return true_positives / predicted if predicted else float("nan")


#: the whole declaration of a new metric
PRECISION = Metric(
    "precision", _precision, "Precision", report=("final",), features=("supplement",)
)


@pytest.fixture
def precision():
    register_metric(PRECISION)
    try:
        yield PRECISION
    finally:
        unregister_metric("precision")
    assert "precision" not in METRICS


def _cubes() -> tuple[np.ndarray, np.ndarray]:
    prediction = np.zeros((5, 6, 7), bool)
    prediction[1:4, 1:4, 1:4] = True  # 27 voxels
    truth = np.zeros_like(prediction)
    truth[1:4, 2:5, 1:4] = True  # 27 voxels, 18 shared
    return prediction, truth


def test_the_built_in_metrics_in_their_order():
    assert metric_names()[:4] == ["dice", "iou", "nsd", "hd95"]
    assert METRICS["dice"].shown_label("final") == "Dice final x100"
    assert METRICS["dice"].shown_label("auc_norm") == "Dice AUC (norm.) x100"
    assert METRICS["hd95"].shown_label("final") == "HD95 final (mm)"
    assert [m for m in METRICS if METRICS[m].needs_surface] == ["nsd", "hd95"]
    assert not METRICS["hd95"].higher_is_better
    # what reading results checks: (lowest, highest, whether NaN is a value the run writes)
    assert metric_ranges() == {
        "dice": (0.0, 1.0, False),
        "iou": (0.0, 1.0, False),
        "nsd": (0.0, 1.0, True),
        "hd95": (0.0, math.inf, True),
    }


def test_a_registered_metric_is_computed_at_every_step_after_the_built_in_ones(precision):
    prediction, truth = _cubes()
    values = step_metrics(prediction, truth, (1.0, 0.5, 0.7))
    assert list(values)[:6] == ["dice", "iou", "nsd", "hd95", "precision", "true_positives"]
    assert values["precision"] == 18 / 27
    assert values["dice"] == 2 * 18 / 54 and values["iou"] == 18 / 36
    # the challenge's protocol computes it too, from the same declaration
    assert step_metrics_cvpr25(prediction, truth, (1.0, 0.5, 0.7))["precision"] == 18 / 27
    empty = step_metrics(np.zeros_like(truth), truth, (1.0, 1.0, 1.0))
    assert math.isnan(empty["precision"]) and empty["dice"] == 0.0


def test_a_surface_metric_is_nan_where_surfaces_are_not_computed():
    def surface_voxels(pair: StepPair) -> float:
        distances = pair.distances
        return float("nan") if distances is None else float(len(distances[0]) + len(distances[1]))

    register_metric(Metric("surface_voxels", surface_voxels, "Surface voxels", needs_surface=True))
    try:
        prediction, truth = _cubes()
        with_surface = step_metrics(prediction, truth, (1.0, 1.0, 1.0))
        assert with_surface["surface_voxels"] == 26 + 26  # a 3x3x3 cube: all but its centre
        without = step_metrics(prediction, truth, (1.0, 1.0, 1.0), with_surface=False)
        assert math.isnan(without["surface_voxels"]) and math.isnan(without["nsd"])
        assert without["dice"] == with_surface["dice"]
    finally:
        unregister_metric("surface_voxels")


def test_a_new_metric_shows_up_in_results_tables_and_the_report(precision, tmp_path):
    from intrabench.reports.html import build_report, configuration_summary

    run_dir = tmp_path / "run"
    Runner(narrowed_demo("precision", save_predictions=False, steps=1), run_dir).run()
    rows = load_results(run_dir)
    # results: one value per step row, the declared function of the row's own voxel counts
    assert rows["precision"].notna().all() and len(rows) > 0
    expected = rows["true_positives"] / (rows["true_positives"] + rows["false_positives"])
    assert (rows["precision"] == expected).all()
    assert json.loads((run_dir / "run.json").read_text())["metrics"][-1] == "precision"
    # tables: its episode summaries and the report's summary column
    episodes = episode_table(rows)
    assert {"precision_initial", "precision_final"} <= set(episodes.columns)
    assert "precision_auc" not in episodes  # not declared
    summary = configuration_summary(episodes)
    assert "Precision final x100" in summary.columns
    headers = list(summary.columns)
    assert headers.index("HD95 final (mm)") < headers.index("Precision final x100")
    by_hand = (  # the hierarchical mean: targets of a case, cases of a class, classes
        episodes.groupby(["target_class", "case"])["precision_final"]
        .mean()
        .groupby("target_class")
        .mean()
        .mean()
    )
    assert summary["Precision final x100"].iloc[0] == pytest.approx(100 * by_hand)
    assert len(summary) == 1 and 50 < summary["Precision final x100"].iloc[0] <= 100
    # the --metric choices, and the report drawn for it
    require_metric(rows.columns, "precision")
    with pytest.raises(UserError, match="choose one of dice, iou, nsd, hd95, precision"):
        require_metric(rows.columns, "precison")
    html = build_report(run_dir, tmp_path / "report", n_boot=10).read_text()
    assert "Precision final x100" in html
    # the supplement's per-target table: its initial and final value after Dice's and NSD's
    from intrabench.reports.supplement import per_target_table, write_supplement
    from intrabench.reports.tables import load_runs

    targets = per_target_table(rows)
    assert list(targets.columns)[-6:] == [
        "dice initial x100",
        "dice final x100",
        "nsd initial x100",
        "nsd final x100",
        "precision initial x100",
        "precision final x100",
    ]
    assert targets["precision final x100"].tolist() == (100 * episodes["precision_final"]).tolist()
    write_supplement(rows, tmp_path / "supplement", n_boot=10)
    caption = (tmp_path / "supplement" / "per-target.tex").read_text()
    assert "initial and final Dice, NSD and Precision x100" in caption
    # its range is checked when results are read: NaN (undefined) is a value, 1.5 is damage
    assert metric_ranges()["precision"] == (0.0, 1.0, True)
    consolidated = run_dir / "results.parquet"
    damaged = pd.read_parquet(consolidated)
    damaged.loc[0, "precision"] = float("nan")
    damaged.to_parquet(consolidated)
    assert len(load_runs([run_dir])[run_dir]) == len(rows)
    damaged.loc[1, "precision"] = 1.5
    damaged.to_parquet(consolidated)
    with pytest.raises(DataError, match=r"precision = 1.5 is outside its range \(0..1, or NaN\)"):
        load_runs([run_dir])


def test_a_resume_with_another_metric_set_is_refused_naming_the_difference(tmp_path):
    run_dir = tmp_path / "run"
    config = narrowed_demo("resumed", save_predictions=False, steps=1)
    Runner(config, run_dir).run()
    units = sorted((run_dir / "units").glob("*.parquet"))
    written = {path: path.stat().st_mtime_ns for path in units}
    register_metric(PRECISION)
    try:
        with pytest.raises(UserError) as refused:
            Runner(config, run_dir).run()
        message = str(refused.value)
        assert "\n" not in message
        assert "metrics dice, iou, nsd, hd95;" in message and "(+precision)" in message
        assert "use another --out" in message
        # a run made before the metric set was recorded: read from a unit file's columns
        record = json.loads((run_dir / "run.json").read_text())
        assert record["metrics"] == ["dice", "iou", "nsd", "hd95"]  # not overwritten
        del record["metrics"]
        (run_dir / "run.json").write_text(json.dumps(record))
        with pytest.raises(UserError, match=r"\(\+precision\)"):
            Runner(config, run_dir).run()
    finally:
        unregister_metric("precision")
    assert {path: path.stat().st_mtime_ns for path in units} == written  # nothing lost
    Runner(config, run_dir).run()  # the same set again: resumes
    assert json.loads((run_dir / "run.json").read_text())["metrics"] == [
        "dice",
        "iou",
        "nsd",
        "hd95",
    ]


def test_a_removed_metric_is_named_too(tmp_path):
    from intrabench.io.results import check_metric_set

    (tmp_path / "units").mkdir()
    (tmp_path / "units" / "a.parquet").write_bytes(b"")
    (tmp_path / "run.json").write_text(json.dumps({"metrics": ["dice", "iou", "volume"]}))
    with pytest.raises(UserError, match=r"\(\+nsd -volume\)"):
        check_metric_set(tmp_path, ["dice", "iou", "nsd"])
    check_metric_set(tmp_path, ["dice", "iou", "volume"])  # the same: no error
    check_metric_set(tmp_path / "new", ["dice"])  # no unit files: nothing to mix


def test_protocols_are_registered_objects():
    from intrabench.config import RunConfig, builtin_demo_path, load_config
    from intrabench.engine.finishing import metrics_for_protocol

    assert protocol("intrabench").metric_function() is step_metrics
    assert protocol("cvpr25").metric_function() is step_metrics_cvpr25
    assert metrics_for_protocol("cvpr25-corrected") is step_metrics_cvpr25
    assert protocol("cvpr25-corrected").defaults["prompters"] == ["cvpr25-box-corrected"]
    with pytest.raises(UserError, match="'cvpr24' is not one of intrabench, cvpr25"):
        protocol("cvpr24")
    data = load_config(builtin_demo_path()).model_dump(mode="json")
    for key in ("prompters", "refiners", "refinement_steps"):
        data.pop(key)
    config = RunConfig.model_validate({**data, "protocol": "cvpr25"})
    assert [p.name for p in config.prompters] == ["cvpr25-box"]
    assert [r.name for r in config.refiners] == ["cvpr25-click"]
    assert config.refinement_steps == 5


@pytest.fixture
def plugin_protocol(tmp_path, monkeypatch):
    """A module beside a config that registers the protocol ``by-plugin`` when imported."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "")
    (tmp_path / "my_protocol_plugin.py").write_text(
        "from intrabench.evaluation.metric_registry import EvaluationProtocol, register_protocol\n"
        "register_protocol(EvaluationProtocol('by-plugin', "
        "'intrabench.evaluation.metrics:step_metrics', {'refinement_steps': 2}))\n"
    )
    try:
        yield tmp_path
    finally:
        PROTOCOLS.pop("by-plugin", None)
        sys.modules.pop("my_protocol_plugin", None)


def _demo_config_file(folder: Path, **changes: object) -> Path:
    from intrabench.config import builtin_demo_path, load_config

    data = load_config(builtin_demo_path()).model_dump(mode="json")
    data.pop("refinement_steps")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({**data, **changes}))
    return path


def test_the_config_accepts_a_protocol_a_plugin_registers(plugin_protocol):
    from intrabench.config import RunConfig, load_config
    from intrabench.engine.finishing import metrics_for_protocol

    path = _demo_config_file(plugin_protocol, imports=["my_protocol_plugin"], protocol="by-plugin")
    config = load_config(path)  # the module under imports: registers it before the check
    assert config.protocol == "by-plugin"
    assert config.refinement_steps == 2  # the defaults it declares are filled in
    assert metrics_for_protocol("by-plugin") is step_metrics
    # the schema (and so the reference) lists the registered protocols
    assert RunConfig.model_json_schema()["properties"]["protocol"]["enum"] == [
        "intrabench",
        "cvpr25",
        "cvpr25-corrected",
        "by-plugin",
    ]
    # a run with it: its rows say so, computed by the function it names
    data = narrowed_demo("by-plugin", save_predictions=False, steps=1).model_dump(mode="json")
    path.write_text(
        yaml.safe_dump({**data, "imports": ["my_protocol_plugin"], "protocol": "by-plugin"})
    )
    Runner(load_config(path), plugin_protocol / "run").run()
    rows = load_results(plugin_protocol / "run")
    assert set(rows["protocol"]) == {"by-plugin"} and rows["dice"].between(0, 1).all()
    with pytest.raises(ConfigError) as refused:
        load_config(_demo_config_file(plugin_protocol, protocol="by-plugins"))
    assert str(refused.value) == (
        f"{plugin_protocol / 'config.yaml'}: protocol: Input should be 'intrabench', "
        "'cvpr25', 'cvpr25-corrected' or 'by-plugin'"
    )


def test_an_unknown_protocol_is_refused_in_one_line_naming_the_registered_ones(tmp_path):
    from intrabench.config import RunConfig, load_config

    for value in ("cvpr24", 3, None, ["cvpr25"]):
        with pytest.raises(ConfigError) as refused:
            load_config(_demo_config_file(tmp_path, protocol=value))
        assert str(refused.value) == (
            f"{tmp_path / 'config.yaml'}: protocol: Input should be 'intrabench', 'cvpr25' "
            "or 'cvpr25-corrected'"
        )
    # a module under imports: that cannot be imported is named, not the protocol
    with pytest.raises(ConfigError, match="imports: cannot import 'no_such_plugin_module'"):
        load_config(_demo_config_file(tmp_path, imports=["no_such_plugin_module"], protocol="x"))
    assert "by-plugin" not in RunConfig.model_json_schema()["properties"]["protocol"]["enum"]


def test_the_noc_metric_choices_are_the_robustness_metrics(capsys):
    from intrabench.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["tables", "--help"])
    assert ended.value.code == 0
    assert "--noc-metric {iou,dice}" in capsys.readouterr().out  # RClicks' IoU first
