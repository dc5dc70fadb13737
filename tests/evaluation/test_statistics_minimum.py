"""statistics.csv gives no bootstrap interval from fewer cases than an interval needs (#70 item 4):
with 2 cases the "95% CI" was the range of the two values, without a word."""

from __future__ import annotations

import math

import pandas as pd

from intrabench.evaluation.aggregate import dataset_statistics


def rows(n_cases: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "dataset": "d",
            "case": [f"c{i}" for i in range(n_cases)],
            "target": "1",
            "target_class": "organ",
            "model": "m",
            "prompter": "p",
            "refiner": "none",
            "step": 0,
            "seed": 0,
            "dice": [0.5 + 0.1 * i for i in range(n_cases)],
        }
    )


def test_two_cases_give_no_interval_and_say_so():
    two = dataset_statistics(rows(2), n_boot=200).iloc[0]
    assert math.isnan(two["ci_low"]) and math.isnan(two["ci_high"])
    assert two["ci_note"] == "n too small (at least 5 cases)"
    assert two["mean"] == 0.55 and two["n_cases"] == 2
    four = dataset_statistics(rows(4), n_boot=200).iloc[0]
    assert math.isnan(four["ci_low"]) and four["ci_note"].startswith("n too small")


def test_five_cases_give_an_interval():
    five = dataset_statistics(rows(5), n_boot=500).iloc[0]
    assert five["ci_note"] == ""
    assert 0.5 <= five["ci_low"] < five["mean"] < five["ci_high"] <= 0.9
