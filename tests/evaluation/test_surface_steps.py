"""``surface_metrics_at``: the costly surface metrics only at the chosen steps, the rest equal."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from intrabench.config import parse_config
from intrabench.evaluation.metrics import step_metrics, surface_at
from intrabench.execution.runner import Runner

CONFIG = """
name: surface-steps
datasets: [{name: demo-phantoms, n_cases: 1, shape: [24, 48, 48]}]
models: [region-growing-3d]
prompters: [center-points-per-volume]
refiners: [center-error-click]
refinement_steps: 3
target_attributes: false
"""


def _rows(tmp_path, setting: str | None) -> pd.DataFrame:
    text = CONFIG + (f"surface_metrics_at: {setting}\n" if setting else "")
    Runner(parse_config(yaml.safe_load(text)), tmp_path / str(setting), background="inline").run()
    rows = pd.read_parquet(tmp_path / str(setting) / "results.parquet")
    return rows.sort_values(["target", "step"]).reset_index(drop=True)


@pytest.mark.parametrize(
    "setting, steps", [("final", {3}), ("initial-and-final", {0, 3}), ("[1, 2]", {1, 2})]
)
def test_surface_metrics_only_at_the_chosen_steps(tmp_path, setting, steps):
    reference = _rows(tmp_path, None)
    rows = _rows(tmp_path, setting)
    assert reference["nsd"].notna().all()
    chosen = rows["step"].isin(steps)
    # the chosen steps carry exactly the values of a run that computes them everywhere
    pd.testing.assert_series_equal(rows.loc[chosen, "nsd"], reference.loc[chosen, "nsd"])
    pd.testing.assert_series_equal(rows.loc[chosen, "hd95"], reference.loc[chosen, "hd95"])
    assert rows.loc[~chosen, "nsd"].isna().all() and rows.loc[~chosen, "hd95"].isna().all()
    for column in ("dice", "iou", "true_positives", "false_positives", "false_negatives"):
        pd.testing.assert_series_equal(rows[column], reference[column])


def test_surface_at_rules():
    assert [surface_at("all", s, 3) for s in range(4)] == [True] * 4
    assert [surface_at("final", s, 3) for s in range(4)] == [False, False, False, True]
    assert [surface_at("initial-and-final", s, 3) for s in range(4)] == [True, False, False, True]
    assert [surface_at((1,), s, 3) for s in range(4)] == [False, True, False, False]


def test_step_metrics_without_surface_keep_the_overlap():
    prediction = np.zeros((4, 8, 8), bool)
    truth = np.zeros((4, 8, 8), bool)
    prediction[1:3, 2:6, 2:6] = True
    truth[1:3, 3:7, 2:6] = True
    full = step_metrics(prediction, truth, (2.0, 1.0, 1.0))
    fast = step_metrics(prediction, truth, (2.0, 1.0, 1.0), with_surface=False)
    assert math.isnan(fast["nsd"]) and math.isnan(fast["hd95"])
    assert {k: v for k, v in fast.items() if k not in ("nsd", "hd95")} == {
        k: v for k, v in full.items() if k not in ("nsd", "hd95")
    }
    assert fast["dice"] == pytest.approx(2 * 24 / 64)


def test_bad_setting_is_a_config_error():
    from intrabench.errors import ConfigError

    with pytest.raises(ConfigError, match="surface_metrics_at"):
        parse_config(yaml.safe_load(CONFIG + "surface_metrics_at: last\n"))
