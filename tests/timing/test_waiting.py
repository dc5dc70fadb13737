"""Waiting for the model in the time-aware numbers: measured, or from a latency table (the same
numbers under any load); the table measured from a run and saved with its machine; the time
table saying which mode made it; the dice-vs-time figure in the report's style."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from pydantic import ValidationError

from intrabench.cli import main
from intrabench.config import load_config, parse_config
from intrabench.errors import UserError
from intrabench.execution.runner import Runner
from intrabench.timing.budget import episode_time_metrics
from intrabench.timing.human import TimeModel
from intrabench.timing.waiting import load_table, measure_table, waiting_seconds

SECONDS = {"click": 10.0, "scribble": 20.0}


def episode(latencies: list[float], model: str = "m") -> pd.DataFrame:
    """A click, then scribbles; the last step converged (the model is not called)."""
    steps = len(latencies)
    return pd.DataFrame(
        {
            "run": "r",
            "dataset": "d",
            "case": "c",
            "target": "1",
            "target_class": "lesion",
            "model": model,
            "prompter": "p",
            "refiner": "r",
            "seed": 0,
            "step": range(steps),
            "dice": [0.5, 0.7, 0.8, 0.8][:steps],
            "latency_seconds": latencies,
            "latency_first_call": [True] + [False] * (steps - 1),
            "converged": [False] * (steps - 1) + [True],
            "interactions_click": [1] + [0] * (steps - 1),
            "interactions_scribble": [0] + [1] * (steps - 1),
            "slices_scrolled": 0,
        }
    )


TABLE = {"m": {"first": 2.0, "warm": 1.0, "scribble": 3.0}}


def test_table_mode_waits_as_the_table_says():
    rows = episode([0.4, 0.6, 0.8, 0.0])
    table = TimeModel(seconds=SECONDS, waiting="table", latency_table=TABLE)
    # the first call 2 s; scribble steps their kind's 3 s; the converged step 0 s
    assert waiting_seconds(rows, table).tolist() == [2.0, 3.0, 3.0, 0.0]
    assert waiting_seconds(rows, TimeModel()).tolist() == [0.4, 0.6, 0.8, 0.0]
    # a kind the table does not list waits 'warm'
    only_warm = TimeModel(waiting="table", latency_table={"m": {"first": 2.0, "warm": 1.0}})
    assert waiting_seconds(rows, only_warm).tolist() == [2.0, 1.0, 1.0, 0.0]


def test_table_mode_does_not_move_with_the_machines_load():
    quiet, loaded = episode([0.4, 0.6, 0.8, 0.0]), episode([20.0, 30.0, 40.0, 0.0])
    table = TimeModel(seconds=SECONDS, waiting="table", latency_table=TABLE)
    pd.testing.assert_frame_equal(
        episode_time_metrics(quiet, table), episode_time_metrics(loaded, table)
    )
    measured = TimeModel(seconds=SECONDS)
    assert (
        episode_time_metrics(quiet, measured)["dice_at_60s"].iloc[0]
        != episode_time_metrics(loaded, measured)["dice_at_60s"].iloc[0]
    )
    # by hand, from the table: T = 10 + 2, + 20 + 3, + 20 + 3, + 20 + 0 (converged: no wait)
    metrics = episode_time_metrics(quiet, table).iloc[0]
    assert metrics["model_seconds_waited"] == pytest.approx(8.0)
    assert metrics["accumulated_seconds"] == pytest.approx(78.0)


def test_the_table_is_the_median_of_a_runs_calls():
    rows = pd.concat(
        [
            episode([0.4, 0.6, 0.8, 0.0]),
            episode([0.2, 0.1, 0.5, 0.0]),
            episode([1.0, 2.0, 3.0, 0.0], model="n"),
        ],
        ignore_index=True,
    )
    table = measure_table(rows)
    # m's first calls 0.4, 0.2 -> 0.3; its warm (scribble) calls 0.6, 0.8, 0.1, 0.5 -> 0.55
    assert table["m"] == {"first": 0.3, "warm": 0.55, "scribble": 0.55}
    assert table["n"] == {"first": 1.0, "warm": 2.5, "scribble": 2.5}


def test_a_bad_table_is_one_line(tmp_path):
    with pytest.raises(ValidationError, match="waiting: table needs a latency_table"):
        TimeModel(waiting="table")
    with pytest.raises(UserError, match="not found"):
        load_table(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UserError, match="is not a latency table"):
        load_table(str(tmp_path / "bad.json"))
    other = TimeModel(waiting="table", latency_table={"x": {"warm": 1.0}})
    with pytest.raises(UserError, match="has no latency for m; it has x"):
        waiting_seconds(episode([0.4, 0.6]), other)


def test_measure_save_and_use_a_latency_table_from_the_command_line(tmp_path, capsys):
    spec = {
        "name": "timed",
        "datasets": [{"name": "demo-phantoms", "n_cases": 1, "shape": [16, 48, 48]}],
        "models": ["region-growing-3d"],
        "prompters": ["box-3d"],
        "refiners": ["scribble-robot"],
        "refinement_steps": 2,
    }
    Runner(parse_config(spec), tmp_path / "run").run()
    machine = json.loads((tmp_path / "run" / "run.json").read_text())["machine"]
    assert machine["cores"] >= 1 and machine["host"]  # every run records its machine
    table = tmp_path / "latency.json"
    assert main(["latency", str(tmp_path / "run"), "--save", str(table)]) == 0
    assert "Median latency per call (ms), measured on host" in capsys.readouterr().out
    saved = json.loads(table.read_text())
    assert saved["machine"] == machine and set(saved["models"]) == {"region-growing-3d"}
    assert main(["tables", str(tmp_path / "run"), "--out", str(tmp_path / "measured")]) == 0
    assert (
        (tmp_path / "measured" / "time.md")
        .read_text()
        .startswith("waiting: measured in this run on host")
    )
    assert (
        main(
            [
                "tables",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "t"),
                "--latency-table",
                str(table),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert f"waiting: from the latency table {table} (measured on host" in printed
    assert (tmp_path / "t" / "time.md").read_text().startswith("waiting: from the latency table")
    # in a config: a path relative to the config file; the report says the mode too
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "lat.json").write_text(table.read_text())
    config_file = tmp_path / "study" / "study.yaml"
    import yaml

    config_file.write_text(
        yaml.safe_dump({**spec, "time_model": {"waiting": "table", "latency_table": "lat.json"}})
    )
    config = load_config(config_file)
    assert config.time_model.latency_table == str(tmp_path / "study" / "lat.json")
    Runner(config, tmp_path / "tabled").run()
    assert main(["tables", str(tmp_path / "tabled"), "--out", str(tmp_path / "t2")]) == 0
    assert (
        (tmp_path / "t2" / "time.md")
        .read_text()
        .startswith(f"waiting: from the latency table {tmp_path / 'study' / 'lat.json'}")
    )
    assert main(["report", str(tmp_path / "tabled")]) == 0
    page = (tmp_path / "tabled" / "report" / "report.html").read_text()
    assert "Waiting: from the latency table" in page
    # a table without the run's model: one line, exit 2
    (tmp_path / "other.json").write_text(json.dumps({"models": {"x": {"warm": 1}}}))
    assert (
        main(
            [
                "tables",
                str(tmp_path / "run"),
                "--out",
                str(tmp_path / "t3"),
                "--latency-table",
                str(tmp_path / "other.json"),
            ]
        )
        == 2
    )
    assert "has no latency for region-growing-3d" in capsys.readouterr().err


def test_the_dice_vs_time_figure_follows_the_reports_style(monkeypatch):
    from intrabench import plotting as plots
    from intrabench.timing import figures

    rows = pd.concat(
        [
            episode([0.4, 0.6, 0.8, 0.0]),
            episode([1.0, 2.0, 3.0, 0.0], model="n").assign(dice=[0.2, 0.3, 0.4, 0.4]),
        ],
        ignore_index=True,
    )
    styles = plots.configuration_styles(rows)
    drawn = {}
    monkeypatch.setattr(
        figures, "png_bytes", lambda figure: drawn.setdefault("figure", figure) and b""
    )
    figures.time_curve_plot(rows, TimeModel(seconds=SECONDS), styles=styles)
    axes = [a for a in drawn["figure"].axes if a.lines]
    assert len(axes) == 2
    for axis in axes:
        curve = axis.lines[0]
        config = (axis.get_title(), "p", "r")
        assert curve.get_color() == styles[config]["color"]
        assert curve.get_marker() == styles[config]["marker"]
        assert any(text.get_text().startswith("60 s") for text in axis.texts)
    assert axes[0].get_ylim() == axes[1].get_ylim()  # one y-range for every panel
    assert axes[0].get_ylim()[1] == pytest.approx(80 * 1.08)
