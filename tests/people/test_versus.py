"""The statistics of the simulated user against people, each on hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from intrabench.people import versus
from intrabench.timing.human import TimeModel


def test_dice_of_two_masks_and_of_two_empty_ones():
    a = np.array([1, 1, 0, 0], bool).reshape(1, 1, 4)
    b = np.array([1, 0, 1, 0], bool).reshape(1, 1, 4)
    assert versus.dice(a, b) == 0.5  # 2 x 1 / (2 + 2)
    assert versus.dice(np.zeros((1, 1, 4), bool), np.zeros((1, 1, 4), bool)) == 1.0


def test_t_interval_by_hand():
    # mean 8/3; s = sqrt(1/3) = 0.57735; t(0.975, 2) = 4.302653; half = 4.302653 s / sqrt(3)
    interval = versus.t_interval([3.0, 3.0, 2.0])
    assert interval.n == 3
    assert interval.mean == pytest.approx(2.666667, abs=1e-6)
    assert interval.low == pytest.approx(2.666667 - 1.434218, abs=1e-6)
    assert interval.high == pytest.approx(2.666667 + 1.434218, abs=1e-6)
    one = versus.t_interval([4.0])
    assert one.mean == 4.0 and math.isnan(one.low) and math.isnan(one.high)


def test_first_reaching_and_carried():
    assert versus.first_reaching([0.5, 0.79, 0.8, 0.9], 0.8) == 2
    assert versus.first_reaching([0.5, 0.6], 0.8) is None
    assert versus.carried([0.5, 0.7], 4) == [0.5, 0.7, 0.7, 0.7]


def _square_error():
    """A 5 x 5 missed square on slice 1 of a (3, 9, 9) grid, z spacing 10 mm, in-plane 1 mm:
    its distance transform is 3 mm at (1, 4, 4) only, 1 mm on its edge."""
    reference = np.zeros((3, 9, 9), bool)
    reference[1, 2:7, 2:7] = True
    return np.zeros_like(reference), reference, (10.0, 1.0, 1.0)


def test_click_position_inside_the_error():
    previous, reference, spacing = _square_error()
    position = versus.click_position((1, 2, 4), previous, reference, spacing)
    assert position == versus.ClickPosition(border_mm=1.0, centre_mm=2.0, in_error=True)
    centre = versus.click_position((1, 4, 4), previous, reference, spacing)
    assert centre == versus.ClickPosition(border_mm=3.0, centre_mm=0.0, in_error=True)


def test_click_position_outside_the_error_is_negative():
    previous, reference, spacing = _square_error()
    # (1, 4, 0) is 2 mm from the square's edge voxel (1, 4, 2) and 4 mm from its centre
    position = versus.click_position((1, 4, 0), previous, reference, spacing)
    assert position == versus.ClickPosition(border_mm=-2.0, centre_mm=4.0, in_error=False)
    assert versus.click_position((1, 4, 4), reference, reference, spacing) is None


def test_wasserstein_distance_of_two_samples():
    assert versus.wasserstein([0.0, 1.0], [1.0, 2.0]) == 1.0
    assert versus.wasserstein([0.0, 0.0, 3.0], [0.0, 0.0, 0.0]) == 1.0
    assert math.isnan(versus.wasserstein([], [1.0]))


def _steps():
    """People: one session reaching 0.9 at step 1, one accepted after step 0 at 0.7; the
    simulated user: two episodes, [0.6, 0.8] and [0.8, 1.0]."""
    rows = [
        ("people", "s1", 0, 0.5, 7.5),
        ("people", "s1", 1, 0.9, 11.0),
        ("people", "s2", 0, 0.7, 9.0),
        ("box-3d + click", "", 0, 0.6, 13.5),
        ("box-3d + click", "", 1, 0.8, 16.4),
        ("box-3d + click", "", 0, 0.8, 13.5),
        ("box-3d + click", "", 1, 1.0, 16.4),
    ]
    targets = ["a", "a", "b", "a", "a", "b", "b"]
    return pd.DataFrame(
        [
            {
                "user": user,
                "rater": "",
                "session_id": session,
                "dataset": "d",
                "case": "c",
                "target": target,
                "model": "m",
                "step": step,
                "kind": "",
                "dice": dice,
                "seconds": seconds,
            }
            for (user, session, step, dice, seconds), target in zip(rows, targets)
        ]
    )


def test_dice_per_step_carries_an_accepted_session_and_the_shift_is_simulated_minus_people():
    curves = versus.dice_per_step(_steps(), 2)
    people = curves[curves["user"] == "people"]
    assert people["dice"].tolist() == pytest.approx([0.6, 0.8])  # (0.5+0.7)/2, (0.9+0.7)/2
    simulated = curves[curves["user"] == "box-3d + click"]
    assert simulated["dice"].tolist() == pytest.approx([0.7, 0.9])
    assert versus.dice_shift(curves, "box-3d + click", "m") == pytest.approx([0.1, 0.1])


def test_reaching_a_dice_counts_interactions_and_seconds_of_those_that_reach_it():
    reach = versus.reaching(_steps(), 0.8).set_index("user")
    assert reach.loc["people", "episodes"] == 2 and reach.loc["people", "reached"] == 1
    assert reach.loc["people", "interactions"] == 2.0  # s1 at step 1
    assert reach.loc["people", "seconds"] == 11.0
    assert reach.loc["box-3d + click", "reached"] == 2
    assert reach.loc["box-3d + click", "interactions"] == 1.5  # steps 1 and 0: 2 and 1
    assert reach.loc["box-3d + click", "seconds"] == pytest.approx((16.4 + 13.5) / 2)


def test_simulated_seconds_are_the_time_models_plus_the_latencies_cumulated():
    results = pd.DataFrame(
        {
            "dataset": ["d", "d", "d"],
            "case": ["c", "c", "c"],
            "target": ["a", "a", "other"],
            "model": ["m", "m", "m"],
            "prompter": ["box-3d"] * 3,
            "refiner": ["center-error-click"] * 3,
            "seed": [0, 0, 0],
            "step": [0, 1, 0],
            "dice": [0.6, 0.8, 0.1],
            "latency_seconds": [0.5, 0.5, 0.5],
            "interactions_box3d": [1, 0, 1],
            "interactions_click": [0, 1, 0],
            "slices_scrolled": [0, 0, 0],
        }
    )
    steps = versus.simulated_steps(results, [("d", "c", "a")], TimeModel())
    assert steps["user"].tolist() == ["box-3d + center-error-click"] * 2  # "other": no session
    assert steps["seconds"].tolist() == pytest.approx([13.5, 16.4])  # 13 + 0.5, + 2.4 + 0.5


def test_seconds_table_rounds_the_means():
    frame = pd.DataFrame({"kind": ["box3d", "click"], "mean": [7.0, 2.666667]})
    assert versus.seconds_table(frame) == {"box3d": 7.0, "click": 2.7}


def test_a_run_without_refinement_is_named_by_its_prompter():
    results = pd.DataFrame(
        {
            "dataset": ["d"],
            "case": ["c"],
            "target": ["a"],
            "model": ["m"],
            "prompter": ["box-3d"],
            "refiner": ["none"],  # how the rows name no refiner
            "seed": [0],
            "step": [0],
            "dice": [0.6],
            "latency_seconds": [0.25],
            "interactions_box3d": [1],
            "slices_scrolled": [0],
        }
    )
    steps = versus.simulated_steps(results, [("d", "c", "a")], TimeModel())
    assert steps["user"].tolist() == ["box-3d"] and steps["seconds"].tolist() == [13.25]


def test_seconds_per_kind_beside_the_time_models():
    frame = pd.DataFrame({"kind": ["box3d", "click"], "mean": [7.0, 2.666667]})
    model = TimeModel(seconds={"click": 3.0})
    beside = versus.beside_time_model(frame, model)
    assert beside["time_model"].tolist() == [13.0, 3.0]  # the default 3D box, the run's click
