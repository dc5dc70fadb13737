"""Robustness statistics against hand-computed values on fixed tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.clicks.robustness import (
    curve_area,
    episode_statistics,
    group_summary,
    number_of_clicks,
    robustness_table,
    target_statistics,
)


def test_number_of_clicks_and_area():
    assert number_of_clicks(np.array([0.5, 0.85, 0.95]), 0.8) == 2
    assert number_of_clicks(np.array([0.5, 0.85, 0.95]), 0.9) == 3
    assert number_of_clicks(np.array([0.91, 0.5]), 0.9) == 1
    assert number_of_clicks(np.array([0.5, 0.6, 0.7, 0.79]), 0.8) == 4  # capped at N
    # trapezoids (0.2 + 0.6) / 2 + (0.6 + 1.0) / 2 = 1.2 over N - 1 = 2
    assert curve_area(np.array([0.2, 0.6, 1.0])) == pytest.approx(0.6)
    assert curve_area(np.array([0.7])) == 0.7


def test_group_summary_by_hand():
    # NoC per group, G1 (least likely clicks) .. G10; the baseline strategy needs 4
    noc = {f"G{g}": v for g, v in enumerate([12, 10, 9, 8, 8, 7, 6, 6, 5, 4], start=1)}
    s = group_summary(noc, 4.0, 10)
    assert s["mean"] == pytest.approx(7.5)
    # squared deviations 20.25 + 6.25 + 2.25 + 0.25 * 3 + 2.25 * 2 + 6.25 + 12.25 = 52.5
    assert s["std"] == pytest.approx(np.sqrt(52.5 / 10))  # population std over the groups
    assert s["base"] == 4.0
    assert s["sb"] == pytest.approx(87.5)  # (7.5 - 4) / 4
    assert s["gr"] == pytest.approx(200.0)  # (12 - 4) / 4
    # RClicks' HH: pairs (12, 7), (10, 6), (9, 6), (8, 5), (8, 4):
    # mean(5/7, 4/6, 3/6, 3/5, 4/4) = 0.6961904761904762
    assert s["hh"] == pytest.approx(100 * (5 / 7 + 4 / 6 + 3 / 6 + 3 / 5 + 4 / 4) / 5)
    # the ratio of the halves' means, kept as an extra column: 9.4 against 5.6
    assert s["hh_halves"] == pytest.approx(100 * (9.4 - 5.6) / 5.6)
    assert np.isnan(group_summary(noc, None, 10)["sb"])
    zero = group_summary({"G1": 0.5, "G2": 0.0}, 0.0, 2)
    assert np.isnan(zero["gr"]) and np.isnan(zero["sb"]) and np.isnan(zero["hh"])


def rclicks_official(values: list[float], base: float, quality: bool) -> dict[str, float]:
    """RClicks' compute_benchmark_metrics.ipynb for one image: SB from G_mean and Base, GR from
    G1 and G10, HH from H1 = G1..G5 and H2 = G6..G10; relative for NoC, absolute for IoU."""
    groups = np.array(values, dtype=np.float32).astype(np.float64)
    h1, h2 = groups[:5], groups[5:]
    g_mean = np.mean(np.vstack([h1, h2]), axis=0).mean()
    if quality:
        return {
            "sb": 100 * (g_mean - base),
            "gr": 100 * (groups[0] - groups[9]),
            "hh": 100 * (h1 - h2).mean(),
        }
    return {
        "sb": 100 * (g_mean - base) / base,
        "gr": 100 * (groups[0] - groups[9]) / groups[9],
        "hh": 100 * ((h1 - h2) / h2).mean(),
    }


@pytest.mark.parametrize("quality", [False, True])
def test_group_summary_equals_rclicks_official_formulas(quality):
    if quality:  # IoU-AUC per group, G1 (least likely) .. G10: absolute differences x100
        values = [0.61, 0.66, 0.70, 0.71, 0.75, 0.77, 0.80, 0.81, 0.83, 0.86]
        base = 0.84
    else:  # NoC
        values = [14.0, 11.0, 9.0, 9.0, 8.0, 7.0, 6.0, 6.0, 5.0, 3.0]
        base = 5.0
    summary = group_summary(
        {f"G{g}": v for g, v in enumerate(values, start=1)}, base, 10, quality=quality
    )
    for name, value in rclicks_official(values, base, quality).items():
        assert summary[name] == pytest.approx(value, abs=1e-5), name
    if quality:  # hand-computed: mean 0.75, SB 100 (0.75 - 0.84) = -9; GR 100 (0.61 - 0.86)
        assert summary["sb"] == pytest.approx(-9.0)
        assert summary["gr"] == pytest.approx(-25.0)
        # HH: mean of (0.61-0.77, 0.66-0.80, 0.70-0.81, 0.71-0.83, 0.75-0.86) = -0.128
        assert summary["hh"] == pytest.approx(-12.8)
        assert summary["sb_relative"] == pytest.approx(100 * (0.75 - 0.84) / 0.84)
    else:  # mean 7.8; SB (7.8 - 5) / 5 = 56%; GR (14 - 3) / 3
        assert summary["sb"] == pytest.approx(56.0)
        assert summary["gr"] == pytest.approx(1100 / 3)


def rows_for(curves: dict[str, list[float]], target: str = "t1", model: str = "m") -> pd.DataFrame:
    """Result rows of one target: IoU after each round per strategy."""
    records = []
    for strategy, values in curves.items():
        for step, iou in enumerate(values):
            records.append(
                {
                    "dataset": "d",
                    "case": "c",
                    "target": target,
                    "target_class": "lesion",
                    "model": model,
                    "prompter": f"click [{strategy}]",
                    "click_prompter": "click",
                    "refiner": "center-error-click",
                    "seed": 0,
                    "step": step,
                    "click_group": strategy,
                    "click_groups": 4,
                    "clickability": "distance",
                    "iou": iou,
                    "dice": 2 * iou / (1 + iou),
                }
            )
    return pd.DataFrame.from_records(records)


def test_target_statistics_from_a_fixed_step_table():
    rows = rows_for(
        {
            "baseline": [0.85, 0.92, 0.95],
            "G1": [0.30, 0.60, 0.70],  # never reaches 0.9 -> NoC@90 = 3 (capped)
            "G2": [0.50, 0.85, 0.91],  # 3
            "G3": [0.70, 0.91, 0.93],  # 2
            "G4": [0.90, 0.95, 0.96],  # 1
        }
    )
    episodes = episode_statistics(rows)
    assert episodes.set_index("click_group")["noc_iou_0.9"].to_dict() == {
        "G1": 3.0,
        "G2": 3.0,
        "G3": 2.0,
        "G4": 1.0,
        "baseline": 2.0,
    }
    assert episodes.set_index("click_group").loc["G1", "iou_auc"] == pytest.approx(
        ((0.3 + 0.6) / 2 + (0.6 + 0.7) / 2) / 2
    )
    targets = target_statistics(episodes)
    assert len(targets) == 1
    t = targets.iloc[0]
    assert t["noc_iou_0.9_mean"] == pytest.approx(2.25)
    assert t["noc_iou_0.9_base"] == 2.0
    assert t["noc_iou_0.9_sb"] == pytest.approx(12.5)
    assert t["noc_iou_0.9_gr"] == pytest.approx(200.0)
    # HH pair by pair (RClicks): G1 with G3, G2 with G4: mean((3 - 2) / 2, (3 - 1) / 1)
    assert t["noc_iou_0.9_hh"] == pytest.approx(100 * (0.5 + 2.0) / 2)
    assert t["noc_iou_0.9_hh_halves"] == pytest.approx(100 * (3.0 - 1.5) / 1.5)
    first = np.array([0.30, 0.50, 0.70, 0.90])
    assert t["iou_1_mean"] == pytest.approx(0.6)
    assert t["nsr_iou_1"] == pytest.approx(100 * first.std() / first.mean())  # a percentage
    assert t["nsr_iou_1_fraction"] == pytest.approx(first.std() / first.mean())
    # IoU-AUC: absolute differences x100 (RClicks' Table 11): G1 (0.45 + 0.65) / 2 = 0.55,
    # G4 (0.925 + 0.955) / 2 = 0.94
    assert t["iou_auc_gr"] == pytest.approx(100 * (0.55 - 0.94))
    # NoC@Dice from the Dice of the same steps: Dice 0.8 = IoU 2/3, first reached at rounds
    # 3 (G1: IoU 0.7), 2 (G2: 0.85), 1 (G3: 0.7) and 1 (G4)
    assert t["noc_dice_0.8_mean"] == pytest.approx((3 + 2 + 1 + 1) / 4)


def test_the_table_averages_targets_then_datasets():
    one = rows_for({"baseline": [0.9], "G1": [0.2], "G2": [0.4], "G3": [0.6], "G4": [0.8]}, "t1")
    two = rows_for({"baseline": [0.5], "G1": [0.5], "G2": [0.5], "G3": [0.5], "G4": [0.5]}, "t2")
    display, long, targets = robustness_table(pd.concat([one, two]), "iou", 0.9)
    assert len(targets) == 2 and len(display) == 1
    average = long[long["dataset"] == "Average"].iloc[0]
    # first-click IoU: t1 mean 0.5, std sqrt(0.05); t2 mean 0.5, std 0 -> NSR (sqrt(0.05)/0.5 + 0) / 2
    assert average["nsr_iou_1"] == pytest.approx(100 * np.sqrt(0.05) / 0.5 / 2)
    # AUC with one round is the first value: SB of t1 = 100 (0.5 - 0.9), of t2 = 0 (absolute)
    assert average["iou_auc_sb"] == pytest.approx(100 * -0.4 / 2)
    assert average["iou_auc_sb_relative"] == pytest.approx(100 * (-0.4 / 0.9) / 2)
    assert display.loc[0, "SB IoU-AUC x100"] == -20.0
    assert display.loc[0, "Sample IoU-AUC x100"] == "50.00±11.18"
    # a target with a group missing (an interrupted run) is left out, not half-counted
    partial = one[one["click_group"] != "G3"]
    assert target_statistics(episode_statistics(partial)).empty
    with pytest.raises(ValueError, match="NoC is computed"):
        robustness_table(one, "iou", 0.95)


def test_the_table_says_how_many_targets_entered_each_ratio():
    """The display counts, per configuration, the targets whose SB, GR and HH of NoC are
    finite (a ratio is NaN without a baseline run or with a zero denominator, and is left out
    of the averages): both targets here, then one SB removed by hand."""
    one = rows_for({"baseline": [0.9], "G1": [0.2], "G2": [0.4], "G3": [0.6], "G4": [0.8]}, "t1")
    two = rows_for({"baseline": [0.5], "G1": [0.5], "G2": [0.5], "G3": [0.5], "G4": [0.5]}, "t2")
    display, _, targets = robustness_table(pd.concat([one, two]), "iou", 0.9)
    assert display.loc[0, "targets in SB/GR/HH NoC@IoU90"] == "2/2/2 of 2"
    # a target without a baseline run enters GR and HH but not SB
    targets.loc[targets["target"] == "t2", "noc_iou_0.9_sb"] = float("nan")
    from intrabench.clicks.robustness import ratio_counts

    assert ratio_counts(targets, "noc_iou_0.9", display) == ["1/2/2 of 2"]


def test_rclicks_flat_means_by_hand():
    """RClicks' tables are flat means over instances; IntraBench's own average targets ->
    cases -> classes. Case c1 holds three targets, c2 one (one round each, every group equal):
    IoU-AUC SB per target = 100 (G - Base) = -40, 0, 0 in c1 and +20 in c2. Hierarchical:
    (mean(-40, 0, 0) + 20) / 2 = 3.33; flat: (-40 + 0 + 0 + 20) / 4 = -5 (#49 item 8)."""

    def target(name, case, base, group):
        frame = rows_for({"baseline": [base], **{f"G{g}": [group] for g in range(1, 5)}}, name)
        return frame.assign(case=case)

    rows = pd.concat(
        [
            target("t1", "c1", 0.9, 0.5),
            target("t2", "c1", 0.5, 0.5),
            target("t3", "c1", 0.7, 0.7),
            target("t4", "c2", 0.3, 0.5),
        ]
    )
    _, hierarchical, _ = robustness_table(rows, "iou", 0.9)
    display, flat, _ = robustness_table(rows, "iou", 0.9, averaging="flat")
    value = {
        name: table.set_index("dataset").loc["d", "iou_auc_sb"]
        for name, table in (("hierarchical", hierarchical), ("flat", flat))
    }
    assert value["hierarchical"] == pytest.approx((-40 / 3 + 20) / 2)
    assert value["flat"] == pytest.approx(-5.0)
    assert display.loc[0, "SB IoU-AUC x100"] == -5.0
    assert flat.set_index("dataset").loc["Average", "iou_auc_sb"] == pytest.approx(-5.0)
    with pytest.raises(ValueError, match="averaging"):
        robustness_table(rows, "iou", 0.9, averaging="median")
