"""Paired comparisons (issue 70, item 1): hand-computed values on tiny tables, and agreement
with scipy.stats.wilcoxon and statsmodels' multipletests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wilcoxon
from statsmodels.stats.multitest import multipletests

from intrabench.evaluation.aggregate import bootstrap_replicates, per_dataset
from intrabench.evaluation.paired import (
    MIN_CASES_INTERVAL,
    MIN_CASES_TEST,
    case_weights,
    holm,
    paired_cases,
    paired_comparisons,
    rank_biserial,
    resampled_scores,
    signed_rank_p,
)

# exactly representable values, so that equal |differences| tie exactly
A = [0.5, 0.25, 0.75, 0.5, 0.625, 0.125]
B = [0.625, 0.5, 0.5, 0.75, 0.6875, 0.5]


def rows_of(
    scores: dict[str, list[float]], dataset: str = "D", classes=None, steps: int = 1
) -> pd.DataFrame:
    """One target per case (class ``classes[i]`` or ``x``), one row per step; the last step
    holds the score, earlier steps 0."""
    records = []
    for model, values in scores.items():
        for i, value in enumerate(values):
            for step in range(steps):
                records.append(
                    {
                        "dataset": dataset,
                        "case": f"c{i}",
                        "target": f"t{i}",
                        "target_class": classes[i] if classes else "x",
                        "model": model,
                        "prompter": "p",
                        "refiner": "none",
                        "seed": 0,
                        "step": step,
                        "dice": value if step == steps - 1 else 0.0,
                    }
                )
    return pd.DataFrame(records)


def test_two_configurations_hand_computed():
    table = paired_comparisons(rows_of({"m1": A, "m2": B}, steps=2), n_boot=500)
    assert len(table) == 1
    line = table.iloc[0]
    assert line["A"] == "m1 / p / none" and line["B"] == "m2 / p / none"
    assert line["score_A"] == pytest.approx(2.75 / 6, abs=1e-15)
    assert line["score_B"] == pytest.approx(3.5625 / 6, abs=1e-15)
    assert line["difference"] == pytest.approx(0.8125 / 6, abs=1e-15)  # the final step only
    assert line["n_cases"] == 6 and line["b_better"] == 5
    # |d| = 1/8, 1/4, 1/4, 1/4, 1/16, 3/8: ranks 2, 4, 4, 4, 1, 6; R+ = 17, R- = 4
    assert line["rank_biserial"] == pytest.approx(13 / 21, abs=1e-15)
    # scipy's exact null distribution of W = min(R+, R-) = 4 for n = 6: 7 of 64 sign
    # patterns reach a rank sum <= 4 (0, 1, 2, 3, 1+2, 4, 1+3), two-sided 14 / 64
    assert line["p"] == pytest.approx(14 / 64, abs=1e-15)
    assert line["p_holm"] == line["p"]  # one pair: nothing to correct
    assert line["ci_low"] < line["difference"] < line["ci_high"]


def test_difference_equals_the_tables_difference():
    rng = np.random.default_rng(3)
    scores = {m: list(rng.random(8)) for m in ("m1", "m2", "m3")}
    rows = rows_of(scores, classes=["x", "y"] * 4)
    table = paired_comparisons(rows, n_boot=200)
    tables = per_dataset(rows).set_index("model")["dice"]
    assert len(table) == 3  # m1-m2, m1-m3, m2-m3
    for line in table.itertuples():
        expected = tables[line.B_model] - tables[line.A_model]
        assert line.difference == pytest.approx(expected, abs=1e-14)
        assert line.score_A == pytest.approx(tables[line.A_model], abs=1e-14)


def test_wilcoxon_and_holm_agree_with_scipy_and_statsmodels():
    rng = np.random.default_rng(11)
    base = rng.random(12)
    scores = {f"m{i}": list(np.clip(base + rng.normal(0.05 * i, 0.1, 12), 0, 1)) for i in range(4)}
    rows = rows_of(scores)
    table = paired_comparisons(rows, n_boot=100)
    cases = paired_cases(rows)
    raw = []
    for line in table.itertuples():
        d = cases[(cases["A"] == line.A) & (cases["B"] == line.B)]["difference"].to_numpy()
        expected = wilcoxon(d).pvalue
        assert abs(line.p - expected) <= 1e-12
        raw.append(expected)
    adjusted = multipletests(raw, method="holm")[1]
    assert np.max(np.abs(table["p_holm"].to_numpy() - adjusted)) <= 1e-12
    assert len(table) == 6


def test_holm_hand_computed():
    # sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04 -> running maximum 0.06
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06], abs=1e-15)
    adjusted = holm([0.2, np.nan, 0.01])
    assert adjusted[0] == pytest.approx(0.2) and np.isnan(adjusted[1])
    assert adjusted[2] == pytest.approx(0.02)


def test_signed_rank_exact_and_too_few():
    d = np.array([1, 2, 3, 4, 5, -6]) / 16
    # W = R- = 6; sign patterns with a rank sum <= 6: 14 of 64, two-sided 28 / 64
    assert signed_rank_p(d) == pytest.approx(28 / 64, abs=1e-15)
    assert rank_biserial(d) == pytest.approx((15 - 6) / 21, abs=1e-15)
    # five non-zero differences (a zero is dropped): the smallest p would be 2/32
    assert np.isnan(signed_rank_p(np.array([1, 2, 3, 4, 5, 0]) / 16))
    assert MIN_CASES_TEST == 6


def test_resampled_scores_hand_computed_and_as_the_loop_bootstrap():
    # case 0 has class x only; case 1 both x and y
    values = np.array([[[[0.2, np.nan], [0.6, 0.8]]]])  # (1 matrix, 1 seed, 2 cases, 2 classes)
    weights = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    # draw 1: x = 0.2, y absent -> 0.2; draw 2: x = 0.4, y = 0.8 -> 0.6; draw 3: (0.6+0.8)/2
    assert resampled_scores(values, weights)[0].tolist() == pytest.approx([0.2, 0.6, 0.7])
    rng = np.random.default_rng(1)
    matrix = rng.random((2, 7, 3))
    matrix[0, 2, 1] = np.nan
    matrix[:, 4, 0] = np.nan
    loop = bootstrap_replicates(matrix, n_boot=500, seed=3)
    vectorised = resampled_scores(matrix[None], case_weights(7, 500, 3))[0]
    assert np.max(np.abs(loop - vectorised)) <= 1e-12


def test_too_few_cases_no_interval_and_no_test():
    table = paired_comparisons(rows_of({"m1": A[:4], "m2": B[:4]}), n_boot=100)
    line = table.iloc[0]
    assert line["n_cases"] == 4 < MIN_CASES_INTERVAL
    assert np.isnan(line["ci_low"]) and np.isnan(line["ci_high"])
    assert np.isnan(line["p"]) and np.isnan(line["p_holm"])
    assert line["difference"] == pytest.approx((0.125 + 0.25 - 0.25 + 0.25) / 4)


def test_overall_is_the_mean_over_datasets_and_pools_the_cases():
    first = rows_of({"m1": A, "m2": B}, dataset="D1")
    second = rows_of({"m1": B, "m2": A}, dataset="D2")
    table = paired_comparisons(pd.concat([first, second]), n_boot=300).set_index("dataset")
    assert list(table.index) == ["D1", "D2", "Overall"]
    assert table.loc["Overall", "difference"] == pytest.approx(0.0, abs=1e-15)
    assert table.loc["Overall", "n_cases"] == 12
    assert table.loc["Overall", "b_better"] == 5 + 1
    assert table.loc["D2", "difference"] == pytest.approx(-0.8125 / 6, abs=1e-15)


def test_incomplete_configuration_compared_on_the_shared_targets():
    rows = rows_of({"m1": A, "m2": B})
    # m2 lost case c5's target; m1 is compared with it on c0..c4 only
    rows = rows[~((rows["model"] == "m2") & (rows["case"] == "c5"))]
    line = paired_comparisons(rows, n_boot=100).iloc[0]
    assert line["n_cases"] == 5
    assert line["score_A"] == pytest.approx(sum(A[:5]) / 5)
    assert line["difference"] == pytest.approx(sum(np.subtract(B[:5], A[:5])) / 5)
