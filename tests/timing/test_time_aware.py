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
from intrabench.errors import ConfigError
from intrabench.execution.runner import Runner
from intrabench.interfaces import RefineContext
from intrabench.io.results import measured_columns
from intrabench.timing.budget import episode_time_metrics, kept_steps
from intrabench.timing.human import TimeModel, human_seconds, step_kind
from intrabench.timing.latency import latency_table
from intrabench.types import Box2D, Prompt

#: round numbers: a click 10 s, a scribble 20 s, no scrolling; 30 s x 3 interactions = 90 s
MODEL = TimeModel(
    seconds={"click": 10.0, "scribble": 20.0},
    seconds_per_slice_scrolled=0.0,
    budget_per_interaction=30.0,
    max_interactions=3,
)


def episode(latencies: list[float], dice: list[float]) -> pd.DataFrame:
    """A click, then scribbles; the model's latency and the Dice of each step."""
    return pd.DataFrame(
        {
            "run": "r",
            "dataset": "d",
            "case": "c",
            "target": "1",
            "target_class": "lesion",
            "model": "m",
            "prompter": "p",
            "refiner": "r",
            "seed": 0,
            "step": range(len(dice)),
            "dice": dice,
            "latency_seconds": latencies,
            "interactions_click": [1] + [0] * (len(dice) - 1),
            "interactions_scribble": [0] + [1] * (len(dice) - 1),
            "slices_scrolled": 0,
        }
    )


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
    rows = pd.DataFrame(
        {
            "interactions_click": [1, 0],
            "interactions_box2d": [1, 0],
            "interactions_scribble": [0, 1],
            "slices_scrolled": [10, 3],
        }
    )
    defaults = TimeModel()
    assert human_seconds(rows, defaults).tolist() == pytest.approx(
        [2.4 + 7.0 + 10 * 0.1, 10.9 + 3 * 0.1]
    )
    assert defaults.budget == 240
    assert step_kind(rows).tolist() == ["box2d", "scribble"]  # a box's effort (2) beats a click's
    with pytest.raises(ConfigError, match="unknown interaction kinds \\['polygon'\\]"):
        parse_config(
            {
                "datasets": ["demo-real"],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
                "time_model": {"seconds": {"polygon": 3}},
            }
        )
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
    prediction[2, 4:16, 4:8] = False  # slice 2: a 12 x 4 false negative (Dice 0.8)
    prediction[3, 2:4, 4:16] = True  # slice 3: a 2 x 12 false positive (Dice 0.92)
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
        RefineContext(gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 2, 3)
    )
    (scribble,) = prompt.scribbles
    assert scribble.label == 0 and set(scribble.points[:, 0].tolist()) == {3}
    assert (prediction & ~gt)[tuple(scribble.points.T)].all()
    assert (
        registry.refiners.create("scribble-robot").refine(
            RefineContext(gt, gt, (1.0, 1.0, 1.0), np.random.default_rng(0), 3, 3)
        )
        is None
    )


def test_the_davis_robot_scribbles_every_error_and_never_the_same_slice_twice():
    gt = np.zeros((5, 24, 24), dtype=bool)
    gt[1:4, 4:20, 4:20] = True
    prediction = gt.copy()
    prediction[2, 4:20, 4:8] = False  # slice 2: a 16 x 4 false negative ...
    prediction[2, 4:20, 16:20] = False  # ... a second one ...
    prediction[2, 0:3, 4:20] = True  # ... and a 3 x 16 false positive (Dice 0.55)
    prediction[1, 4:20, 4:6] = False  # slice 1: a 16 x 2 false negative (Dice 0.93)
    robot = registry.refiners.create("scribble-robot")
    context = RefineContext(gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 1, 3)
    first = robot.refine(context)
    # every component of slice 2: the two false negatives (positive), then the false positive
    assert [s.label for s in first.scribbles] == [1, 1, 0]
    assert all(set(s.points[:, 0].tolist()) == {2} for s in first.scribbles)
    assert first.effort == 9  # three scribbles
    for scribble in first.scribbles:
        region = (gt & ~prediction) if scribble.label else (prediction & ~gt)
        assert region[tuple(scribble.points.T)].all()
    # slice 2 is still the worst, but it was used: the robot goes to slice 1
    again = robot.refine(
        RefineContext(
            gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 2, 3, history=[first]
        )
    )
    assert {int(z) for s in again.scribbles for z in s.points[:, 0]} == {1}
    # every erroneous slice used: back to the worst
    both = robot.refine(
        RefineContext(
            gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 3, 3, history=[first, again]
        )
    )
    assert {int(z) for s in both.scribbles for z in s.points[:, 0]} == {2}
    # the earlier robot: one scribble, the largest region, the same slice again
    largest = registry.refiners.create("scribble-robot", {"mode": "largest"})
    one = largest.refine(
        RefineContext(
            gt, prediction, (1.0, 1.0, 1.0), np.random.default_rng(0), 2, 3, history=[first]
        )
    )
    (scribble,) = one.scribbles
    assert scribble.label == 1 and set(scribble.points[:, 0].tolist()) == {2}


def test_a_run_records_latencies_and_its_tables(tmp_path, capsys):
    spec = {
        "name": "timed",
        "datasets": [
            {"name": "demo-phantoms", "n_cases": 2, "label": "phantoms", "shape": [16, 48, 48]}
        ],
        "models": ["region-growing-3d", "random-walker-2d"],
        "prompters": ["box-3d"],
        "refiners": ["scribble-robot"],
        "refinement_steps": 3,
    }
    config = parse_config(spec)
    Runner(config, tmp_path / "a", background="inline").run()
    Runner(config, tmp_path / "b").run()
    a = pd.read_parquet(tmp_path / "a" / "results.parquet")
    b = pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(
        a.drop(columns=measured_columns(a)), b.drop(columns=measured_columns(b))
    )
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
    assert (
        "Quality against the clinician" in (tmp_path / "a" / "report" / "report.html").read_text()
    )


def test_the_demo_config_writes_out_the_default_time_model():
    from pathlib import Path

    from intrabench.config import load_config

    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "configs" / "time-aware-demo.yaml")
    assert config.time_model == TimeModel()  # the defaults, as documented
    assert config.refinement_steps + 1 == config.time_model.max_interactions


def davis_official_summary(
    reports: list[tuple[list[float], list[float], list[bool]]], max_i: int, timeout: float
) -> tuple[float, float]:
    """davis-interactive's ``summarize_report`` on per-episode (J, timing, evaluated) lists:
    reconstruct (an interaction not evaluated keeps the previous J at timing 0), average J and
    timing per interaction, accumulate the timing, add (0, 0) and (timeout, last J), then
    ``np.trapz / time.max()`` and ``np.interp(60)``."""
    records = []
    for index, (jaccard, timing, evaluated) in enumerate(reports):
        previous = 0.0
        for interaction in range(1, max_i + 1):
            if interaction <= len(jaccard) and evaluated[interaction - 1]:
                previous = jaccard[interaction - 1]
                spent = timing[interaction - 1]
            else:
                spent = 0.0
            records.append(
                {
                    "interaction": interaction,
                    "sequence": index,
                    "jaccard": previous,
                    "timing": spent,
                }
            )
    frame = pd.DataFrame(records)
    average = frame.groupby("interaction")[["jaccard", "timing"]].mean()
    time = np.concatenate([[0.0], average["timing"].cumsum().to_numpy(), [timeout]])
    metric = np.concatenate(
        [[0.0], average["jaccard"].to_numpy(), average["jaccard"].to_numpy()[-1:]]
    )
    trapezoid = getattr(np, "trapezoid", None) or np.trapz
    return float(trapezoid(metric, x=time) / time.max()), float(np.interp(60, time, metric))


def test_davis_official_summary_averages_the_curve_before_auc_and_value_at_60s():
    from intrabench.timing.davis_summary import davis_summary
    from intrabench.timing.table import time_summary

    latencies = [[5, 5, 5], [5, 60, 1], [0, 0, 0]]
    dices = [[0.5, 0.7, 0.9], [0.5, 0.95, 0.99], [0.2, 0.4, 0.9]]
    rows = pd.concat(
        [
            episode(latency, dice).assign(target=str(index))
            for index, (latency, dice) in enumerate(zip(latencies, dices))
        ]
    )
    summary = davis_summary(rows, MODEL)
    got = summary[summary["dataset"] == "d"].iloc[0]
    # by hand: costs per step are 10 + 5 = 15, 20 + 5, ...; episode 2's step 1 (95 s) and 2
    # are past the budget; episode 3 costs 10, 20, 20 s
    reports = [
        ([0.5, 0.7, 0.9], [15, 25, 25], [True, True, True]),
        ([0.5, 0.95, 0.99], [15, 80, 21], [True, False, False]),
        ([0.2, 0.4, 0.9], [10, 20, 20], [True, True, True]),
    ]
    auc, at_60 = davis_official_summary(reports, max_i=3, timeout=90.0)
    assert got["dice_auc_time_davis"] == pytest.approx(auc, abs=1e-12)
    assert got["dice_at_60s_davis"] == pytest.approx(at_60, abs=1e-12)
    # hand-computed: mean times per interaction (15 + 15 + 10) / 3, (25 + 0 + 20) / 3 = 15 and
    # 15 again: accumulated 13.33, 28.33, 43.33 s; mean Dice 0.4, 0.5333, 0.7667; at 60 s
    # the curve is flat at 0.7667; area 2.667 + 6.889 + 9.833 + 35.267 = 54.656 over 90 s
    assert at_60 == pytest.approx((0.9 + 0.5 + 0.9) / 3)
    assert auc == pytest.approx(
        (
            13.333333 * 0.4 / 2
            + 15 * (0.4 + 0.533333) / 2
            + 15 * (0.533333 + 0.766667) / 2
            + 46.666667 * 0.766667
        )
        / 90,
        abs=1e-5,
    )
    # the per-episode means differ (the point): kept as extra columns
    table = time_summary(rows, MODEL)
    row = table[table["dataset"] == "d"].iloc[0]
    per_episode = episode_time_metrics(rows, MODEL)
    assert row["dice_at_60s"] == pytest.approx(per_episode["dice_at_60s"].mean())
    assert abs(row["dice_at_60s"] - row["dice_at_60s_davis"]) > 0.01
    assert row["dice_auc_time_davis"] == got["dice_auc_time_davis"]
