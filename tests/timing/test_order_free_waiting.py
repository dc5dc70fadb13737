"""A configuration's waiting does not depend on the order the config lists the prompters in
(#70 item 5): the case's cold call (the image encoder) is charged to every configuration's
first call on the case, as a user of that configuration alone would wait it."""

from __future__ import annotations

import pandas as pd

from intrabench.timing.budget import episode_time_metrics
from intrabench.timing.human import TimeModel
from intrabench.timing.table import time_table
from intrabench.timing.waiting import configuration_first_calls, waiting_seconds

ENCODER = 48.0  # the shared per-case cost, paid inside the first call that reaches the case
OWN = {"box-3d": 0.3, "box-per-slice": 0.1}  # each prompter's own call


def unit(prompter: str, first_in_case: bool) -> pd.DataFrame:
    """Two targets x two steps of ``prompter`` on case c; its first call pays the encoder when
    its unit reaches the case first."""
    own = OWN[prompter]
    latencies = [own + (ENCODER if first_in_case else 0.0), own, own, own]
    return pd.DataFrame(
        {
            "run": "r",
            "dataset": "d",
            "case": "c",
            "target": ["1", "1", "2", "2"],
            "target_class": "organ",
            "model": "litemedsam",
            "prompter": prompter,
            "refiner": "none",
            "seed": 0,
            "step": [0, 1, 0, 1],
            "dice": [0.6, 0.8, 0.5, 0.9],
            "latency_seconds": latencies,
            "latency_first_call": [first_in_case, False, False, False],
            "converged": False,
            "interactions_box3d": [1, 0, 1, 0],
            "interactions_click": [0, 1, 0, 1],
            "slices_scrolled": 0,
        }
    )


def run_rows(order: list[str]) -> pd.DataFrame:
    return pd.concat([unit(p, i == 0) for i, p in enumerate(order)], ignore_index=True)


def by_configuration(rows: pd.DataFrame, model: TimeModel) -> pd.DataFrame:
    return (
        episode_time_metrics(rows, model).sort_values(["prompter", "target"]).reset_index(drop=True)
    )


def test_each_configurations_first_call_on_a_case_is_marked():
    rows = run_rows(["box-3d", "box-per-slice"])
    assert configuration_first_calls(rows).tolist() == [True, False, False, False] * 2


def test_measured_waiting_charges_the_encoder_to_every_configuration():
    forward = waiting_seconds(run_rows(["box-3d", "box-per-slice"]), TimeModel())
    backward = waiting_seconds(run_rows(["box-per-slice", "box-3d"]), TimeModel())
    # box-3d listed first: both first calls wait the case's cold call, 48.3 s (before: 48.3 s
    # for box-3d and 0.1 s for box-per-slice, the other way round when listed the other way)
    assert forward.round(6).tolist() == [48.3, 0.3, 0.3, 0.3, 48.3, 0.1, 0.1, 0.1]
    assert backward.round(6).tolist() == [48.1, 0.1, 0.1, 0.1, 48.1, 0.3, 0.3, 0.3]
    # what differs between the orders is the first configuration's own 0.2 s, not the encoder
    forward_metrics = by_configuration(run_rows(["box-3d", "box-per-slice"]), TimeModel())
    backward_metrics = by_configuration(run_rows(["box-per-slice", "box-3d"]), TimeModel())
    difference = (
        (forward_metrics["model_seconds_waited"] - backward_metrics["model_seconds_waited"])
        .round(6)
        .tolist()
    )
    assert difference == [0.2, 0.0, 0.2, 0.0]


def test_swapping_the_prompters_order_gives_the_same_time_table():
    table = TimeModel(
        waiting="table",
        latency_table={"litemedsam": {"first": 48.2, "warm": 0.2, "box3d": 0.3, "click": 0.1}},
    )
    forward = run_rows(["box-3d", "box-per-slice"])
    backward = run_rows(["box-per-slice", "box-3d"])
    pd.testing.assert_frame_equal(
        by_configuration(forward, table), by_configuration(backward, table)
    )
    pd.testing.assert_frame_equal(
        time_table(forward, table).sort_index(), time_table(backward, table).sort_index()
    )
    waited = by_configuration(forward, table).set_index(["prompter", "target"])
    # each prompter's first target: 48.2 s cold + 0.1 s (a click); its second: 0.3 + 0.1
    assert waited["model_seconds_waited"].round(6).to_dict() == {
        ("box-3d", "1"): 48.3,
        ("box-3d", "2"): 0.4,
        ("box-per-slice", "1"): 48.3,
        ("box-per-slice", "2"): 0.4,
    }
