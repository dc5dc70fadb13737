"""Unit files of another run in a run folder's units/ (#72 item 3): when results.parquet is
missing, only the units of this run's plan are read, counted and averaged."""

from __future__ import annotations

import json
import shutil

import pandas as pd

from intrabench.io.results import completeness, load_results
from tests.run_helpers import run_config

CONFIG = (
    "name: {name}\nseeds: [{seed}]\n"
    "datasets: [{{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}}]\n"
    "models: [region-growing-3d]\nprompters: [box-3d]\n"
)


def test_units_of_another_run_are_not_averaged_in(tmp_path, caplog):
    (tmp_path / "ours").mkdir()
    (tmp_path / "other").mkdir()
    ours = run_config(tmp_path / "ours", CONFIG.format(name="ours", seed=1))
    other = run_config(tmp_path / "other", CONFIG.format(name="other", seed=0))
    own_rows = pd.read_parquet(ours / "results.parquet")
    assert json.loads((ours / "run.json").read_text())["unit_keys"] == [
        p.stem for p in (ours / "units").glob("*.parquet")
    ]
    for unit in (other / "units").glob("*.parquet"):  # another run's units, copied in
        shutil.copy(unit, ours / "units" / unit.name)
    (ours / "results.parquet").unlink()  # an interrupted run: not consolidated yet

    rows = load_results(ours)
    assert set(rows["run"]) == {"ours"} and set(rows["seed"]) == {1}  # before: 'other' too
    pd.testing.assert_frame_equal(rows, own_rows)
    assert completeness(ours) == (1, 1)  # before: (2, 1), two finished of one planned
    assert "1 unit file(s) in units/ are not of this run's plan" in caplog.text
