"""Damaged run folders (issue 65, item 7): ``tables`` and ``report`` refuse results whose metrics
lie outside their range in one line naming the row (they wrote tables averaging Dice 1e308, or
failed with a traceback on Dice NaN); a ``run.json`` with ``units: Infinity`` and a
``failures.csv`` that is no list of failed units are no tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from intrabench.cli import main
from intrabench.errors import DataError
from intrabench.evaluation.metric_registry import metric_ranges
from intrabench.io.result_checks import checked_rows
from tests.run_helpers import run_config

CONFIG = {
    "name": "small",
    "seeds": [0],
    "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
    "models": ["region-growing-3d"],
    "prompters": ["box-3d"],
    "refiners": ["scribble"],
    "refinement_steps": 1,
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    return run_config(tmp_path_factory.mktemp("finished"), yaml.safe_dump(CONFIG))


def _copy(finished_run: Path, folder: Path) -> Path:
    run = folder / "run"
    shutil.copytree(finished_run, run)
    return run


def _set(run: Path, column: str, value) -> dict:
    """Sets ``column`` of the second row of results.parquet to ``value``; returns that row."""
    rows = pd.read_parquet(run / "results.parquet")
    rows[column] = rows[column].astype(object) if isinstance(value, str) else rows[column]
    rows.loc[1, column] = value
    rows.to_parquet(run / "results.parquet")
    return rows.loc[1].to_dict()


@pytest.mark.parametrize(
    ("column", "value", "shown", "allowed"),
    [
        ("dice", float("nan"), "nan", "0..1"),
        ("dice", 1e308, "1e+308", "0..1"),
        ("dice", -1.0, "-1", "0..1"),
        ("dice", 2.0, "2", "0..1"),
        ("iou", float("inf"), "inf", "0..1"),
        ("nsd", -0.5, "-0.5", "0..1, or NaN"),
        ("hd95", -3.0, "-3", "finite, >= 0, or NaN"),
        ("hd95", float("inf"), "inf", "finite, >= 0, or NaN"),
    ],
)
@pytest.mark.parametrize("command", ["tables", "report"])
def test_a_metric_outside_its_range_is_refused_naming_the_row(
    finished_run, tmp_path, capsys, column, value, shown, allowed, command
):
    run = _copy(finished_run, tmp_path)
    row = _set(run, column, value)
    assert main([command, str(run)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert f"{column} = {shown} is outside its range ({allowed})" in line
    assert (
        f"case {row['case']}, target {row['target']}, model region-growing-3d, prompter "
        f"box-3d, refiner scribble, seed 0, step {row['step']}"
    ) in line
    assert not (run / "tables" / "refinement.md").exists()
    assert not (run / "report" / "report.html").exists()


def test_nan_where_the_run_writes_it_is_accepted(finished_run, tmp_path, capsys):
    """HD95 and NSD are NaN where they are not defined (an empty mask, surface metrics not
    computed): those rows are summarised as before."""
    run = _copy(finished_run, tmp_path)
    _set(run, "hd95", float("nan"))
    _set(run, "nsd", float("nan"))
    assert main(["tables", str(run)]) == 0
    assert (run / "tables" / "refinement.md").is_file()


def test_the_check_counts_every_row_outside():
    rows = pd.DataFrame(
        {
            "dataset": "d",
            "case": ["a", "b", "c"],
            "target": "t",
            "model": "m",
            "prompter": "p",
            "refiner": "r",
            "seed": 0,
            "step": 0,
            "dice": [0.5, 1.5, np.nan],
        }
    )
    with pytest.raises(
        DataError,
        match=r"src: dice = 1.5 is outside its range \(0..1\) in the "
        r"row of dataset d, case b, .* \(and 1 more row\(s\)\)",
    ):
        checked_rows(rows, "src", metric_ranges())
    assert checked_rows(rows.iloc[:1], "src", metric_ranges()) is not None


def test_a_metric_that_is_text_is_refused():
    rows = pd.DataFrame({"case": ["a"], "dice": ["high"]})
    with pytest.raises(DataError, match="dice = 'high' is outside its range"):
        checked_rows(rows, "src", metric_ranges())


@pytest.mark.parametrize("units", ["Infinity", "1e400", '"many"', "null"])
def test_run_json_with_units_that_are_no_count_is_no_traceback(
    finished_run, tmp_path, capsys, units
):
    run = _copy(finished_run, tmp_path)
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(
        json.dumps(record).replace(f'"units": {record["units"]}', f'"units": {units}')
    )
    assert main(["tables", str(run)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "is incomplete" not in err


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'a,b\n"unterminated\n\x00\xff,,,,,\n', "not CSV text"),
        (bytes(range(256)) * 10, "not CSV text"),
        (b"x,y\n1,2\n", "no model, prompter, refiner column"),
    ],
)
def test_a_failures_csv_that_is_no_list_of_failures_is_left_out_with_a_warning(
    finished_run, tmp_path, capsys, content, why
):
    run = _copy(finished_run, tmp_path)
    (run / "failures.csv").write_bytes(content)
    assert main(["tables", str(run)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{run / 'failures.csv'} is not a list of failed units ({why}" in err
    assert (run / "tables" / "refinement.md").is_file()
