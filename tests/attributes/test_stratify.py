"""Tertile groups, group means with bootstrap CIs, extreme-group differences and Spearman's rho
on fixed tables whose answers are computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.attributes.stratify import (
    MIN_TARGETS_TERTILES,
    assign_groups,
    bootstrap_mean_ci,
    collapse,
    displayed_summary,
    extremes_table,
    printable_summary,
    spearman,
    stratified_table,
    tertile_cuts,
    tertile_cuts_and_note,
    tertile_group,
)


def _targets() -> pd.DataFrame:
    """Dataset A: 9 targets of volume 1..9 ml; dataset B: 3 targets of 10, 20, 30 ml (too few
    for tertiles: 9 are needed). Model m1 does better on larger targets (Dice = volume / 10 in
    A), m2 worse (1 - that)."""
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
    heavy = pd.Series([1, 2, 2, 2, 2, 2, 2, 2, 3])
    assert tertile_cuts(heavy) == (2.0, 2.0)
    assert list(tertile_group(heavy, (2.0, 2.0))) == ["low"] * 8 + ["high"]
    # fewer than three distinct values: no groups; missing values stay missing
    assert tertile_cuts(pd.Series([1.0, 1.0, 2.0, np.nan])) is None
    assert tertile_group(pd.Series([1.0, np.nan]), (0.5, 0.7)).isna().tolist() == [False, True]


def test_groups_are_each_datasets_tertiles_and_presence():
    targets, cuts = assign_groups(_targets())
    m1 = targets[targets["model"] == "m1"].set_index("target")
    assert m1.loc[["t0", "t1", "t2"], "group_volume_ml"].tolist() == ["low"] * 3
    assert m1.loc[["t6", "t7", "t8"], "group_volume_ml"].tolist() == ["high"] * 3
    # B's 3 targets are too few for tertiles (9 are needed): no group, and the cuts say why
    assert m1.loc[["u0", "u1", "u2"], "group_volume_ml"].isna().all()
    assert m1.loc[["t0", "t1", "t2"], "group_touches_border"].tolist() == ["yes", "yes", "no"]
    by_dataset = cuts.set_index(["dataset", "attribute"])
    assert by_dataset.loc[("A", "volume_ml"), ["cut_low", "cut_high"]].tolist() == pytest.approx(
        [11 / 3, 19 / 3]
    )
    assert by_dataset.loc[("A", "volume_ml"), "note"] == ""
    assert by_dataset.loc[("B", "volume_ml"), ["cut_low", "cut_high"]].isna().all()
    assert by_dataset.loc[("B", "volume_ml"), "note"] == "n too small (at least 9 targets)"


def test_tertiles_need_nine_targets_and_are_relative_to_each_dataset():
    """8 targets in a dataset form no tertiles, 9 do (3 per group); a dataset's groups are its
    own: B's smallest target (10 ml) is "low" in B although larger than all of A."""
    assert MIN_TARGETS_TERTILES == 9
    cuts, note = tertile_cuts_and_note(pd.Series(range(1, 9), dtype=float))
    assert cuts is None and note == "n too small (at least 9 targets)"
    assert tertile_cuts(pd.Series(range(1, 10), dtype=float)) == pytest.approx((11 / 3, 19 / 3))
    records = [
        {
            "model": "m",
            "prompter": "p",
            "refiner": "none",
            "dataset": d,
            "case": f"c{i}",
            "target": f"{d}{i}",
            "dice_final": 0.5,
            "attr_volume_ml": float(v),
        }
        for d, volumes in (("A", range(1, 10)), ("B", range(10, 100, 10)))
        for i, v in enumerate(volumes)
    ]
    targets, cuts = assign_groups(pd.DataFrame(records))
    groups = targets.set_index("target")["group_volume_ml"]
    expected = ["low"] * 3 + ["mid"] * 3 + ["high"] * 3
    assert groups[[f"A{i}" for i in range(9)]].tolist() == expected
    assert groups[[f"B{i}" for i in range(9)]].tolist() == expected
    b = cuts.set_index(["dataset", "attribute"]).loc[("B", "volume_ml")]
    assert [b["cut_low"], b["cut_high"]] == pytest.approx([110 / 3, 190 / 3])


def test_group_means_differences_and_rank_correlations_by_hand():
    targets, _ = assign_groups(_targets())
    table = stratified_table(targets, n_boot=200, seed=0)
    means = table.set_index(["model", "attribute", "group"])["mean"]
    # m1, volume low: A's 0.1 0.2 0.3 -> 0.2 (B has no groups); high: 0.7 0.8 0.9 -> 0.8
    assert means[("m1", "volume_ml", "low")] == pytest.approx(0.2)
    assert means[("m1", "volume_ml", "mid")] == pytest.approx(0.5)
    assert means[("m1", "volume_ml", "high")] == pytest.approx(0.8)
    assert means[("m2", "volume_ml", "low")] == pytest.approx(0.8)
    # touches_border yes: t0, t1 (0.1, 0.2); no: the other 10 targets
    assert means[("m1", "touches_border", "yes")] == pytest.approx(0.15)
    counts = table.set_index(["model", "attribute", "group"])["n_targets"]
    assert counts[("m1", "volume_ml", "low")] == 3 and counts[("m1", "touches_border", "no")] == 10
    # 3 targets are too few for an interval (5 are needed), 10 are not
    indexed = table.set_index(["model", "attribute", "group", "metric"])
    low = indexed.loc[("m1", "volume_ml", "low", "dice_final")]
    assert np.isnan(low["ci_low"]) and low["note"] == "n too small (at least 5 targets)"
    no = indexed.loc[("m1", "touches_border", "no", "dice_final")]
    assert no["ci_low"] <= no["mean"] <= no["ci_high"] and no["note"] == ""

    extremes = extremes_table(targets, n_boot=200, seed=0).set_index(["model", "attribute"])
    assert extremes.loc[("m1", "volume_ml"), "difference"] == pytest.approx(0.6)
    assert extremes.loc[("m2", "volume_ml"), "difference"] == pytest.approx(-0.6)
    # yes - no: 0.15 - mean(0.3 .. 0.9, 0.5, 0.6, 0.7) = 0.15 - 0.6
    assert extremes.loc[("m1", "touches_border"), "difference"] == pytest.approx(-0.45)
    # groups of 3 targets: no interval of the difference, and the note says why
    row = extremes.loc[("m1", "volume_ml")]
    assert np.isnan(row["difference_ci_low"]) and np.isnan(row["difference_ci_high"])
    assert row["difference_note"] == "n too small (at least 5 targets)"
    assert row["spearman_note"] == ""
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
    assert summary.loc[("m1", "volume_ml"), "low"] == pytest.approx(100 * 0.2 * 0.75)
    assert summary.loc[("m1", "volume_ml"), "difference"] == pytest.approx(100 * 0.6 * 0.75)
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


def test_a_correlation_needs_nine_targets_and_the_print_says_so():
    """Spearman's rho from 8 targets is not given (NaN, "n too small (at least 9 targets)"),
    from 9 it is SciPy's; the printed summary shows the notes in place of the numbers."""
    from scipy import stats

    records = [
        {
            "model": "m",
            "prompter": "p",
            "refiner": "none",
            "dataset": "A",
            "case": f"c{i}",
            "target": f"t{i}",
            "dice_final": d,
            "attr_volume_ml": float(v),
        }
        for i, (v, d) in enumerate(zip(range(1, 10), (0.2, 0.1, 0.4, 0.3, 0.5, 0.7, 0.6, 0.9, 0.8)))
    ]
    nine = pd.DataFrame(records)
    targets, _ = assign_groups(nine)
    row = extremes_table(targets, n_boot=50).iloc[0]
    expected = stats.spearmanr(nine["attr_volume_ml"], nine["dice_final"])
    assert row["n_pairs"] == 9 and row["spearman_rho"] == pytest.approx(expected.statistic)
    assert row["spearman_note"] == ""
    # 8 targets: no tertiles (the volume row has no groups, no difference and no rho); a
    # presence attribute still groups them, and its correlation is withheld
    eight = nine.iloc[:8].assign(attr_touches_border=[True] * 5 + [False] * 3)
    targets, _ = assign_groups(eight)
    assert targets["group_volume_ml"].isna().all()
    extremes = extremes_table(targets, n_boot=50).set_index("attribute")
    volume = extremes.loc["volume_ml"]
    assert volume["n_first"] == 0 and np.isnan(volume["difference"])
    assert np.isnan(volume["spearman_rho"]) and volume["n_pairs"] == 8
    border = extremes.loc["touches_border"]
    assert border["n_pairs"] == 8 and np.isnan(border["spearman_rho"])
    assert border["spearman_note"] == "n too small (at least 9 targets)"
    # yes: 5 targets, no: 3 -> no interval of the difference either
    assert border["difference_note"] == "n too small (at least 5 targets)"
    summary = printable_summary(stratified_table(targets, n_boot=50), extremes.reset_index())
    shown = displayed_summary(summary).set_index("attribute").loc["touches_border"]
    assert shown["difference 95% CI"] == "n too small (at least 5 targets)"
    assert shown["spearman_rho"] == "n too small (at least 9 targets)"
    assert "n_yes" not in shown.index
