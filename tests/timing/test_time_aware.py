"""Time-aware evaluation: curves and budget rules against hand-computed values, the human time
model, the scribble robot, latency columns in a real run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from intrabench import registry
from intrabench.cli import main
from intrabench.config import parse_config
from intrabench.engine.finishing import slices_scrolled
from intrabench.engine.runner import Runner
from intrabench.errors import ConfigError
from intrabench.io.results import measured_columns
from intrabench.protocols import RefineContext
from intrabench.timing.budget import episode_time_metrics, kept_steps
from intrabench.timing.human import TimeModel, human_seconds, step_kind
from intrabench.timing.latency import latency_table
from intrabench.types import Box2D, Prompt

#: round numbers: a click 10 s, a scribble 20 s, no scrolling; 30 s x 3 interactions = 90 s
MODEL = TimeModel(seconds={"click": 10.0, "scribble": 20.0}, seconds_per_slice_scrolled=0.0,
                  budget_per_interaction=30.0, max_interactions=3)


def episode(latencies: list[float], dice: list[float]) -> pd.DataFrame:
    """A click, then scribbles; the model's latency and the Dice of each step."""
    return pd.DataFrame({
        "run": "r", "dataset": "d", "case": "c", "target": "1", "target_class": "lesion",
        "model": "m", "prompter": "p", "refiner": "r", "seed": 0,
        "step": range(len(dice)), "dice": dice, "latency_seconds": latencies,
        "interactions_click": [1] + [0] * (len(dice) - 1),
        "interactions_scribble": [0] + [1] * (len(dice) - 1),
        "slices_scrolled": 0})


def test_curve_metrics_by_hand():
    # T = 15, 40, 65; the 4th step is beyond max_interactions (3) and discarded
    rows = episode([5, 5, 5, 5], [0.5, 0.7, 0.9, 1.0])
    m = episode_time_metrics(rows, MODEL).iloc[0]
    assert m["interactions_in_budget"] == 3 and m["accumulated_seconds"] == 65
    assert m["human_seconds"] == 50 and m["model_seconds_waited"] == 15
    # curve (0, 0) (15, .5) (40, .7) (65, .9) (90, .9): 3.75 + 15 + 20 + 22.5 = 61.25 of 90
    assert m["dice_auc_time"] == pytest.approx(61.25 / 90)
    assert m["dice_at_60s"] == pytest.approx(0.7 + 0.2 * 20 / 25)
    assert m["time_to_dice_0.8"] == 65 and m["time_to_dice_0.9"] == 65
    assert m["dice_final_in_budget"] == 0.9


def test_the_interaction_past_the_budget_is_discarded():
    # step 1 would end at 15 + 20 + 60 = 95 s > 90 s: it and every later step are dropped,
    # the missing ones keep Dice 0.5 at no time cost
    rows = episode([5, 60, 1], [0.5, 0.95, 0.99])
    m = episode_time_metrics(rows, MODEL).iloc[0]
    assert m["interactions_in_budget"] == 1
    assert m["dice_auc_time"] == pytest.approx((15 * 0.25 + 75 * 0.5) / 90)
    assert m["dice_at_60s"] == pytest.approx(0.5)
    assert math.isnan(m["time_to_dice_0.8"])
    assert kept_steps(np.array([15.0, 80.0, 1.0]), MODEL).tolist() == [True, False, False]
    # the first step alone over the budget: no result at all
    m = episode_time_metrics(episode([100], [0.9]), MODEL).iloc[0]
    assert m["interactions_in_budget"] == 0 and m["dice_auc_time"] == 0.0
    # runs made before latencies were recorded count 0 s of waiting
    old = episode([5, 5], [0.5, 0.7]).drop(columns="latency_seconds")
    assert episode_time_metrics(old, MODEL).iloc[0]["accumulated_seconds"] == 30


def test_human_time_model():
    rows = pd.DataFrame({"interactions_click": [1, 0], "interactions_box2d": [1, 0],
                         "interactions_scribble": [0, 1], "slices_scrolled": [10, 3]})
    defaults = TimeModel()
    assert human_seconds(rows, defaults).tolist() == pytest.approx(
        [2.4 + 7.0 + 10 * 0.1, 10.9 + 3 * 0.1])
    assert defaults.budget == 240
    assert step_kind(rows).tolist() == ["box2d", "scribble"]  # a box's effort (2) beats a click's
    with pytest.raises(ConfigError, match="unknown interaction kinds \\['polygon'\\]"):
        parse_config({"datasets": ["demo-real"], "models": ["region-growing-3d"],
                      "prompters": ["box-3d"], "time_model": {"seconds": {"polygon": 3}}})
    lasso = pd.DataFrame({"interactions_lasso": [1], "slices_scrolled": [0]})
    assert human_seconds(lasso, defaults).tolist() == [10.9]  # one stroke, as a scribble
    assert step_kind(lasso).tolist() == ["lasso"]


def test_slices_scrolled_by_hand():
    # clicks on slices 4 and 9: 5 slices across; then a box on slice 12 from slice 9: 3 more
    first = Prompt(points=[(4, 1, 1), (9, 2, 2)], point_labels=[1, 1])
    scrolled, touched = slices_scrolled(first, [])
    assert (scrolled, touched) == (5, [4, 9])
    second = Prompt(boxes={12: Box2D(0, 0, 3, 3)})
    assert slices_scrolled(second, touched) == (3, [12])
    assert slices_scrolled(Prompt(), [12]) == (0, [12])


def test_the_robot_scribbles_the_worst_slice():
    gt = np.zeros((6, 20, 20), dtype=bool)
    gt[1:5, 4:16, 4:16] = True
    prediction = gt.copy()
    prediction[2, 4:16, 4:8] = False      # slice 2: a 12 x 4 false negative (Dice 0.8)
    prediction[3, 2:4, 4:16] = True       # slice 3: a 2 x 12 false positive (Dice 0.92)
    context = RefineContext(gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 1, 3)
    prompt = registry.refiners.create("scribble-robot").refine(context)
    (scribble,) = prompt.scribbles
    assert scribble.label == 1 and prompt.effort == 3
    assert set(scribble.points[:, 0].tolist()) == {2}
    assert (~prediction & gt)[tuple(scribble.points.T)].all()
    # the skeleton of a 12 x 4 bar runs along it: rows spread, columns in its middle
    assert np.ptp(scribble.points[:, 1]) >= 8 and set(scribble.points[:, 2]) <= {5, 6}
    # fix slice 2: slice 3's false positive is now the worst; a negative scribble
    prediction[2] = gt[2]
    prompt = registry.refiners.create("scribble-robot").refine(
        RefineContext(gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 2, 3))
    (scribble,) = prompt.scribbles
    assert scribble.label == 0 and set(scribble.points[:, 0].tolist()) == {3}
    assert (prediction & ~gt)[tuple(scribble.points.T)].all()
    assert registry.refiners.create("scribble-robot").refine(
        RefineContext(gt, gt, (1.0, 1.0, 1.0), np.random.default_rng(0), 3, 3)) is None




def test_a_run_records_latencies_and_its_tables(tmp_path, capsys):
    spec = {"name": "timed", "datasets": [{"name": "demo-phantoms", "n_cases": 2, "label": "phantoms",
                                           "shape": [16, 48, 48]}],
            "models": ["region-growing-3d", "random-walker-2d"], "prompters": ["box-3d"],
            "refiners": ["scribble-robot"], "refinement_steps": 3}
    config = parse_config(spec)
    Runner(config, tmp_path / "a", background="inline").run()
    Runner(config, tmp_path / "b").run()
    a = pd.read_parquet(tmp_path / "a" / "results.parquet")
    b = pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(a.drop(columns=measured_columns(a)),
                                  b.drop(columns=measured_columns(b)))
    called = a[~a["converged"]]
    assert (called["latency_seconds"] > 0).all() and (a["case_setup_seconds"] >= 0).all()
    assert (a["peak_host_mb"] > 0).all()
    # exactly one cold call per (case, model)
    assert a.groupby(["case", "model"])["latency_first_call"].sum().eq(1).all()
    table = latency_table(a)
    assert set(table["model"]) == {"region-growing-3d", "random-walker-2d"}
    assert (table[table["kind"].str.startswith("cold")]["calls"] == 2).all()
    assert (table["p50_ms"] > 0).all()

    assert main(["tables", str(tmp_path / "a"), "--out", str(tmp_path / "t")]) == 0
    printed = capsys.readouterr().out
    assert "## Quality against the clinician's time" in printed and "## Model latency" in printed
    summary = pd.read_csv(tmp_path / "t" / "time.csv")
    assert set(summary["dataset"]) == {"phantoms", "Average"}
    assert summary["dice_auc_time"].between(0, 1).all()
    assert main(["report", str(tmp_path / "a")]) == 0
    assert "Quality against the clinician" in (tmp_path / "a" / "report" / "report.html").read_text()


def test_the_demo_config_writes_out_the_default_time_model():
    from pathlib import Path

    from intrabench.config import load_config

    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "configs" / "time-aware-demo.yaml")
    assert config.time_model == TimeModel()  # the defaults, as documented
    assert config.refinement_steps + 1 == config.time_model.max_interactions
