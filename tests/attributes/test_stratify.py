"""Tertile groups, group means with bootstrap CIs, extreme-group differences and Spearman's rho
on fixed tables whose answers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.attributes.stratify import (
    assign_groups,
    bootstrap_mean_ci,
    collapse,
    extremes_table,
    printable_summary,
    spearman,
    stratified_table,
    tertile_cuts,
    tertile_group,
)


def _targets() -> pd.DataFrame:
    """Dataset A: 9 targets of volume 1..9 ml; dataset B: 3 targets of 10, 20, 30 ml. Model
    m1 does better on larger targets (Dice = volume / 10 in A), m2 worse (1 - that)."""
    records = []
    for model in ("m1", "m2"):
        for index, volume in enumerate(range(1, 10)):
            dice = volume / 10 if model == "m1" else 1 - volume / 10
            records.append(
                {
                    "model": model,
                    "prompter": "p",
                    "refiner": "none",
                    "dataset": "A",
                    "case": f"c{index // 3}",
                    "target": f"t{index}",
                    "dice_final": dice,
                    "attr_volume_ml": float(volume),
                    "attr_touches_border": index < 2,
                }
            )
        for index, volume in enumerate((10, 20, 30)):
            dice = 0.5 + index * 0.1 if model == "m1" else 0.5 - index * 0.1
            records.append(
                {
                    "model": model,
                    "prompter": "p",
                    "refiner": "none",
                    "dataset": "B",
                    "case": "b",
                    "target": f"u{index}",
                    "dice_final": dice,
                    "attr_volume_ml": float(volume),
                    "attr_touches_border": False,
                }
            )
    return pd.DataFrame(records)


def test_tertile_cuts_and_groups_by_hand():
    assert tertile_cuts(pd.Series(range(1, 10))) == pytest.approx((11 / 3, 19 / 3))
    groups = tertile_group(pd.Series(range(1, 10)), tertile_cuts(pd.Series(range(1, 10))))
    assert list(groups) == ["low"] * 3 + ["mid"] * 3 + ["high"] * 3
    # ties sit on one side of a cut: 1 1 1 | 2 2 2 | 3 3 3 (cuts 5/3 and 7/3)
    tied = pd.Series([1, 1, 1, 2, 2, 2, 3, 3, 3])
    assert tertile_cuts(tied) == pytest.approx((5 / 3, 7 / 3))
    assert list(tertile_group(tied, tertile_cuts(tied))) == ["low"] * 3 + ["mid"] * 3 + ["high"] * 3
    # both cuts on a tied value: the ties go to the lower group, and no target is "mid"
    heavy = pd.Series([1, 2, 2, 2, 2, 3])
    assert tertile_cuts(heavy) == (2.0, 2.0)
    assert list(tertile_group(heavy, (2.0, 2.0))) == ["low"] * 5 + ["high"]
    # fewer than three distinct values: no groups; missing values stay missing
    assert tertile_cuts(pd.Series([1.0, 1.0, 2.0, np.nan])) is None
    assert tertile_group(pd.Series([1.0, np.nan]), (0.5, 0.7)).isna().tolist() == [False, True]


def test_groups_are_each_datasets_tertiles_and_presence():
    targets, cuts = assign_groups(_targets())
    m1 = targets[targets["model"] == "m1"].set_index("target")
    assert m1.loc[["t0", "t1", "t2"], "group_volume_ml"].tolist() == ["low"] * 3
    assert m1.loc[["t6", "t7", "t8"], "group_volume_ml"].tolist() == ["high"] * 3
    # B's 10 ml is low in B although larger than all of A
    assert m1.loc[["u0", "u1", "u2"], "group_volume_ml"].tolist() == ["low", "mid", "high"]
    assert m1.loc[["t0", "t1", "t2"], "group_touches_border"].tolist() == ["yes", "yes", "no"]
    by_dataset = cuts.set_index(["dataset", "attribute"])
    assert by_dataset.loc[("A", "volume_ml"), ["cut_low", "cut_high"]].tolist() == pytest.approx(
        [11 / 3, 19 / 3]
    )
    assert by_dataset.loc[("B", "volume_ml"), ["cut_low", "cut_high"]].tolist() == pytest.approx(
        [50 / 3, 70 / 3]
    )


def test_group_means_differences_and_rank_correlations_by_hand():
    targets, _ = assign_groups(_targets())
    table = stratified_table(targets, n_boot=200, seed=0)
    means = table.set_index(["model", "attribute", "group"])["mean"]
    # m1, volume low: A's 0.1 0.2 0.3 and B's 0.5 -> 0.275; high: 0.7 0.8 0.9 and 0.7 -> 0.775
    assert means[("m1", "volume_ml", "low")] == pytest.approx(0.275)
    assert means[("m1", "volume_ml", "mid")] == pytest.approx((0.4 + 0.5 + 0.6 + 0.6) / 4)
    assert means[("m1", "volume_ml", "high")] == pytest.approx(0.775)
    assert means[("m2", "volume_ml", "low")] == pytest.approx((0.9 + 0.8 + 0.7 + 0.5) / 4)
    # touches_border yes: t0, t1 (0.1, 0.2); no: the other 10 targets
    assert means[("m1", "touches_border", "yes")] == pytest.approx(0.15)
    counts = table.set_index(["model", "attribute", "group"])["n_targets"]
    assert counts[("m1", "volume_ml", "low")] == 4 and counts[("m1", "touches_border", "no")] == 10

    extremes = extremes_table(targets, n_boot=200, seed=0).set_index(["model", "attribute"])
    assert extremes.loc[("m1", "volume_ml"), "difference"] == pytest.approx(0.5)
    assert extremes.loc[("m2", "volume_ml"), "difference"] == pytest.approx(-0.5)
    # yes - no: 0.15 - mean(0.3 .. 0.9, 0.5, 0.6, 0.7) = 0.15 - 0.6
    assert extremes.loc[("m1", "touches_border"), "difference"] == pytest.approx(-0.45)
    low, high = extremes.loc[("m1", "volume_ml"), ["difference_ci_low", "difference_ci_high"]]
    assert low <= 0.5 <= high
    # Spearman over all 12 targets of m1 (SciPy's, with tied Dice values given mean ranks)
    from scipy import stats

    m1 = _targets().query("model == 'm1'")
    expected = stats.spearmanr(m1["attr_volume_ml"], m1["dice_final"])
    assert extremes.loc[("m1", "volume_ml"), "spearman_rho"] == pytest.approx(expected.statistic)
    assert extremes.loc[("m1", "volume_ml"), "n_pairs"] == 12
    assert 0.7 < expected.statistic < 1.0 and expected.pvalue < 0.01


def test_spearman_by_hand():
    # ranks x: 1 2 3 4 5, y: 2 1 4 3 5 -> d^2 = 1+1+1+1+0 = 4, rho = 1 - 6*4/(5*24) = 0.8
    rho, _p, n = spearman([10, 20, 30, 40, 50], [0.2, 0.1, 0.4, 0.3, 0.5])
    assert (rho, n) == (pytest.approx(0.8), 5)
    assert spearman([1, 2], [1, 2])[0] != spearman([1, 2], [1, 2])[0]  # too few pairs: NaN
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3])[0])  # a constant side: NaN


def test_bootstrap_mean_ci_is_seeded_and_brackets_the_mean():
    values = np.array([0.2, 0.4, 0.9, 0.5, 0.7, 0.1])
    first = bootstrap_mean_ci(values, n_boot=500, seed=3)
    assert first == bootstrap_mean_ci(values, n_boot=500, seed=3)
    assert first != bootstrap_mean_ci(values, n_boot=500, seed=4)
    assert first[0] < values.mean() < first[1]
    assert bootstrap_mean_ci(np.full(5, 0.3)) == pytest.approx((0.3, 0.3))
    assert np.isnan(bootstrap_mean_ci(np.array([np.nan]))[0])


def test_per_model_pools_prompters_and_summary_puts_groups_side_by_side():
    two = pd.concat(
        [_targets(), _targets().assign(prompter="q", dice_final=lambda f: f["dice_final"] / 2)]
    )
    targets, _ = assign_groups(two)
    per_model = collapse(targets, ["model"])
    assert len(per_model) == 24  # 2 models x 12 targets
    t0 = per_model.set_index(["model", "target"]).loc[("m1", "t0"), "dice_final"]
    assert t0 == pytest.approx((0.1 + 0.05) / 2)
    stratified = stratified_table(targets, n_boot=100, by=["model"])
    extremes = extremes_table(targets, n_boot=100, by=["model"])
    summary = printable_summary(stratified, extremes).set_index(["model", "attribute"])
    assert summary.loc[("m1", "volume_ml"), "low"] == pytest.approx(100 * 0.275 * 0.75)
    assert summary.loc[("m1", "volume_ml"), "difference"] == pytest.approx(100 * 0.5 * 0.75)
    assert summary.loc[("m1", "touches_border"), "yes"] == pytest.approx(100 * 0.15 * 0.75)


def test_a_group_of_one_target_has_its_size_and_no_interval():
    """Only one target touches the border: its group shows n = 1 and no interval (a single
    value is no sample); the difference to the other group has no interval either."""
    targets = _targets()
    targets["attr_touches_border"] = targets["target"] == "t0"
    grouped, _ = assign_groups(targets)
    table = stratified_table(grouped, n_boot=200, seed=0).set_index(
        ["model", "attribute", "group", "metric"]
    )
    one = table.loc[("m1", "touches_border", "yes", "dice_final")]
    assert one["n_targets"] == 1 and one["mean"] == pytest.approx(0.1)
    assert np.isnan(one["ci_low"]) and np.isnan(one["ci_high"])
    many = table.loc[("m1", "touches_border", "no", "dice_final")]
    assert many["n_targets"] == 11 and many["ci_low"] <= many["mean"] <= many["ci_high"]
    extremes = extremes_table(grouped, n_boot=200, seed=0).set_index(["model", "attribute"])
    row = extremes.loc[("m1", "touches_border")]
    assert row["n_last"] == 1 and np.isnan(row["difference_ci_low"])
    summary = printable_summary(table.reset_index(), extremes.reset_index())
    sizes = summary.set_index(["model", "attribute"]).loc[("m1", "touches_border")]
    assert sizes["n_yes"] == 1 and sizes["n_no"] == 11
