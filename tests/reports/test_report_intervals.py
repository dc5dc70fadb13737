"""The HTML report's summary tables give every cell its 95% bootstrap interval and each column
its n (cases / targets), as the files of ``intrabench tables`` do, keeping the training-data
daggers and the failed-units column of an incomplete run; the results page's Dice tables give
the n and, from 5 cases, the intervals (#70 item 4). The intervals are recomputed here by hand
with numpy."""

from __future__ import annotations

import html as html_text

import numpy as np
import pandas as pd

from intrabench.reports.html import summary_tables


def _rows(values: dict[str, dict[str, list[float]]], model: str = "m") -> pd.DataFrame:
    """Final-step rows of one configuration: dataset -> case -> its targets' Dice values."""
    return pd.DataFrame(
        [
            {
                "run": "r",
                "dataset": dataset,
                "case": case,
                "target": f"t{t}",
                "target_class": "lesion",
                "model": model,
                "prompter": "box-3d",
                "refiner": "none",
                "seed": 0,
                "step": 0,
                "dice": dice,
                "effort_label": "1 box",
                "cumulative_effort": 1,
            }
            for dataset, cases in values.items()
            for case, targets in cases.items()
            for t, dice in enumerate(targets)
        ]
    )


def _interval(case_means: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """The percentile interval (x100) of ``n_boot`` resampled means of ``case_means``."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, case_means.size, size=(n_boot, case_means.size))
    low, high = np.quantile(case_means[drawn].mean(axis=1), [0.025, 0.975])
    return 100 * low, 100 * high


NO_FAILURES = pd.DataFrame(columns=["model", "prompter", "refiner"])
#: 5 cases, c4 with two targets (0.5 and 0.7: its case mean 0.6); the mean x100 is 32.00
A = {"c0": [0.1], "c1": [0.2], "c2": [0.3], "c3": [0.4], "c4": [0.5, 0.7]}


def _page(rows: pd.DataFrame, failures: pd.DataFrame = NO_FAILURES, n_boot: int = 400) -> str:
    return html_text.unescape("\n".join(summary_tables(rows, None, "dice", failures, n_boot)))


def test_each_cell_carries_the_hand_computed_interval_and_the_n_line():
    page = _page(_rows({"A": A}))
    low, high = _interval(np.array([0.1, 0.2, 0.3, 0.4, 0.6]), 400, 0)
    # the dataset cell and the Average (one dataset: the same draws) read the same
    assert page.count(f"<td>32.00 [{low:.2f}, {high:.2f}]</td>") == 2
    assert (
        "95% CI: percentile bootstrap over the cases (targets nested in their case); "
        "n (cases / targets): A 5 / 6; Average 5 / 6</p>"
    ) in page
    assert "training data: no table cell is of a dataset its model was trained on" in page


def test_three_cases_say_n_too_small_and_keep_the_dagger_and_the_failed_units():
    rows = _rows({"B": {"d0": [0.2], "d1": [0.4], "d2": [0.9]}})
    rows["in_training_data"] = "yes"
    failures = pd.DataFrame({"model": ["m"], "prompter": ["box-3d"], "refiner": ["none"]})
    page = _page(rows, failures)
    # mean of 20, 40, 90: 50.00; the dagger, then the interval's place says why there is none
    assert "<td>50.00\u2020 [n too small (at least 5)]</td>" in page
    assert "<td>50.00 [n too small (at least 5 per dataset)]</td>" in page
    assert "n (cases / targets): B 3 / 3; Average 3 / 3" in page
    assert "<th>Failed units</th>" in page and "<td>1</td>" in page
    assert "training data: 1 table cell(s) marked \u2020" in page


def test_the_results_page_tables_give_intervals_where_5_cases_allow():
    from intrabench.reports.results_page import dice_table

    table, gap, line = dice_table(_rows({"A": A}), iterations=False, n_boot=400)
    low, high = _interval(np.array([0.1, 0.2, 0.3, 0.4, 0.6]), 400, 0)
    assert table.splitlines()[2] == (
        f"| box-3d | m | 1 box | 32.00 [{low:.2f}, {high:.2f}] | 32.00 [{low:.2f}, {high:.2f}] |"
    )
    assert gap == "" and line == (
        "n (cases / targets): A 5 / 6; Average 5 / 6; 95% CI: percentile bootstrap over the "
        "cases (targets nested in their case)."
    )


def test_the_results_page_says_once_that_3_cases_give_no_interval():
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.reports.results_page import dice_table
    from intrabench.reports.tables import build_table

    rows = _rows({"B": {"d0": [0.2], "d1": [0.4], "d2": [0.9, 0.5]}})
    table, _gap, line = dice_table(rows, iterations=False, n_boot=400)
    # the bare table (case means 20, 40, 70: 43.33), no cell saying n too small ...
    assert table == to_markdown(build_table(rows, iterations=False))
    assert table.endswith("| box-3d | m | 1 box | 43.33 | 43.33 |") and "n too small" not in table
    # ... and the line under it says why, once
    assert line == (
        "n (cases / targets): B 3 / 4; Average 3 / 4; no 95% intervals: they need at least 5 "
        "cases (here 3)."
    )
