"""Aggregation and per-episode summaries on hand-made rows with known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import cumulative_trapezoid

from intrabench.evaluation.aggregate import (
    bootstrap_ci,
    dataset_statistics,
    merge_datasets,
    per_case_table,
    per_dataset,
    summary_table,
)
from intrabench.evaluation.episode_metrics import (
    auc,
    auc_normalized,
    cvpr_nsd,
    episode_table,
    success_summary,
)


def row(
    dataset,
    case,
    target,
    cls,
    dice,
    model="m",
    prompter="p",
    refiner="none",
    step=0,
    seed=0,
    effort=3,
):
    return {
        "run": "r",
        "dataset": dataset,
        "case": case,
        "target": target,
        "target_class": cls,
        "model": model,
        "prompter": prompter,
        "refiner": refiner,
        "seed": seed,
        "step": step,
        "dice": dice,
        "cumulative_effort": effort,
        "effort_label": "3",
    }


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        [
            # dataset A, class lesion: case c1 = mean(0.2, 0.6) = 0.4, case c2 = 0.8 -> 0.6
            row("A", "c1", "t1", "lesion", 0.2),
            row("A", "c1", "t2", "lesion", 0.6),
            row("A", "c2", "t1", "lesion", 0.8),
            # dataset A, class organ: only c1 -> 1.0. Dataset A = (0.6 + 1.0) / 2 = 0.8
            row("A", "c1", "t3", "organ", 1.0),
            # dataset B: one class, one case -> 0.5
            row("B", "c3", "t1", "x", 0.5),
        ]
    )


def test_hierarchical_means(table):
    scores = per_dataset(table).set_index("dataset")["dice"]
    assert scores["A"] == pytest.approx(0.8) and scores["B"] == pytest.approx(0.5)
    wide = summary_table(table)
    assert wide.loc[0, "A"] == pytest.approx(80.0)
    assert wide.loc[0, "B"] == pytest.approx(50.0)
    assert wide.loc[0, "Average"] == pytest.approx(65.0)


def test_dataset_statistics(table):
    stats = dataset_statistics(table, n_boot=500).set_index("dataset")
    a = stats.loc["A"]
    assert a["mean"] == pytest.approx(0.8)
    # per-case scores: c1 = mean(0.4 lesion, 1.0 organ) = 0.7, c2 = 0.8
    assert a["median"] == pytest.approx(0.75)
    assert a["std"] == pytest.approx(np.std([0.7, 0.8], ddof=1))
    assert a["n_cases"] == 2 and a["n_targets"] == 4
    # two cases: no interval (a bootstrap of 2 cases is their range), and the note says why
    assert math.isnan(a["ci_low"]) and math.isnan(a["ci_high"])
    assert a["ci_note"] == "n too small (at least 5 cases)"
    b = stats.loc["B"]
    # one case: no interval (a bootstrap of one case resamples that case), not a zero-width one
    assert b["mean"] == pytest.approx(0.5) and b["n_cases"] == 1
    assert math.isnan(b["ci_low"]) and math.isnan(b["ci_high"]) and math.isnan(b["std"])
    again = dataset_statistics(table, n_boot=500).set_index("dataset")
    pd.testing.assert_frame_equal(stats, again)


def test_seeds_are_averaged(table):
    other_seed = table.assign(seed=1, dice=table["dice"] - 0.1)
    both = pd.concat([table, other_seed])
    scores = per_dataset(both).set_index("dataset")["dice"]
    assert scores["A"] == pytest.approx(0.75)
    stats = dataset_statistics(both).set_index("dataset")
    assert stats.loc["A", "mean"] == pytest.approx(0.75)


def test_bootstrap_ci_known_cases():
    matrix = np.array([[0.0], [1.0]])
    low, high = bootstrap_ci(matrix, n_boot=4000, seed=3)
    # resample means are k/2 for k ~ Binomial(2, 1/2): 0, 0.5, 1 with P = 1/4, 1/2, 1/4
    assert (low, high) == (0.0, 1.0)
    assert bootstrap_ci(matrix, n_boot=200, seed=3) == bootstrap_ci(matrix, n_boot=200, seed=3)
    narrow = bootstrap_ci(np.linspace(0.4, 0.6, 200)[:, None], n_boot=2000, seed=0)
    assert 0.48 < narrow[0] < 0.5 < narrow[1] < 0.52


def test_merge_datasets_scores_classes_together(table):
    merged = merge_datasets(table, {"AB": ["A", "B"]})
    scores = per_dataset(merged).set_index("dataset")["dice"]
    # classes A/lesion 0.6, A/organ 1.0, B/x 0.5
    assert scores["AB"] == pytest.approx((0.6 + 1.0 + 0.5) / 3)


def test_per_case_table(table):
    cases = per_case_table(table).set_index("case")
    assert cases.loc["c1", "dice"] == pytest.approx(0.7)
    assert cases.loc["c1", "targets"] == 3
    assert cases.loc["c1", "classes"] == "lesion, organ"


def episode(target, dices, efforts, **extra):
    return [
        row("A", "c1", target, "lesion", d, refiner="scribble", step=k, effort=e, **extra)
        for k, (d, e) in enumerate(zip(dices, efforts))
    ]


def test_auc_matches_the_cvpr_formula():
    dices = [0.5, 0.6, 0.7, 0.85, 0.95, 0.95]
    expected = cumulative_trapezoid(dices[-5:], np.arange(5))[-1]
    assert auc(dices) == pytest.approx(expected) == pytest.approx(3.275)
    assert auc_normalized(dices) == pytest.approx(3.275 / 4)
    assert auc([1.0] * 6) == 4.0 and auc_normalized([1.0] * 6) == 1.0
    assert math.isnan(auc([0.7])) and math.isnan(auc_normalized([0.7]))
    assert auc([0.7, 0.9]) == 0.0 and auc_normalized([0.7, 0.9]) == 0.9


def test_episode_table_and_interactions_to_threshold():
    rows = pd.DataFrame(
        episode("t1", [0.5, 0.6, 0.7, 0.85, 0.95, 0.95], [6, 9, 12, 15, 18, 18])
        + episode("t2", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [6, 9, 12, 15, 18, 21])
        + episode("t3", [0.79, 0.81, 0.9, 0.9, 0.9, 0.9], [6, 9, 12, 15, 18, 21])
    )
    rows = rows.sample(frac=1.0, random_state=1)  # order must not matter
    episodes = episode_table(rows).set_index("target")
    t1 = episodes.loc["t1"]
    assert t1["dice_auc"] == pytest.approx(3.275)
    assert t1["dice_final"] == 0.95 and t1["dice_initial"] == 0.5 and t1["n_steps"] == 5
    assert t1["effort_to_dice_0.8"] == 15 and t1["steps_to_dice_0.8"] == 3
    assert t1["effort_to_dice_0.9"] == 18 and bool(t1["reached_dice_0.9"])
    assert t1["cumulative_effort"] == 18
    t2 = episodes.loc["t2"]
    assert math.isnan(t2["effort_to_dice_0.8"]) and not bool(t2["reached_dice_0.8"])
    summary = success_summary(episodes.reset_index(), 0.8).iloc[0]
    assert summary["episodes"] == 3
    assert summary["success_rate"] == pytest.approx(2 / 3)
    assert summary["median_effort"] == 15  # median of (9, 15, failure = inf)
    assert summary["mean_effort_successes"] == 12
    only_two = success_summary(episodes.loc[["t1", "t2"]].reset_index(), 0.8).iloc[0]
    assert math.isinf(only_two["median_effort"])


def test_cvpr_nsd_rule_and_model_time():
    assert list(cvpr_nsd([0.1, 0.2, 0.21], [0.9, 0.9, 0.9])) == [0.0, 0.0, 0.9]
    rows = pd.DataFrame(episode("t1", [0.1, 0.5, 1.0, 1.0], [3, 4, 5, 5]))
    rows["nsd"] = [0.8, 0.6, 1.0, 1.0]
    rows["model_seconds"] = [2.0, 1.0, 3.0, 0.0]
    rows["converged"] = [False, False, False, True]
    summary = episode_table(rows).iloc[0]
    assert summary["nsd_auc"] == pytest.approx((0.6 + 1.0) / 2 + 1.0)
    assert summary["model_seconds_total"] == 6.0
    assert summary["model_seconds_per_step"] == 2.0


def test_vectorised_episode_table_matches_the_per_episode_definition(tiny_run):
    """The one implementation of the episode summaries against the definitions written per
    episode (auc, auc_normalized, first_reaching, the CVPR NSD rule), episode by episode;
    summarize_episode is its row."""
    from intrabench.evaluation.episode_metrics import (
        EPISODE_KEYS,
        first_reaching,
        summarize_episode,
    )
    from intrabench.io.results import load_results

    rows = load_results(tiny_run)
    single = rows[rows["step"] == 0].assign(refiner="none", run="single")  # K = 0 episodes
    one_step = rows[rows["step"] <= 1].assign(run="one-step")  # K = 1 episodes
    rows = pd.concat([rows, single, one_step], ignore_index=True)
    table = episode_table(rows).set_index(EPISODE_KEYS)
    assert len(table) == rows.groupby(EPISODE_KEYS).ngroups
    for identity, steps in rows.groupby(EPISODE_KEYS):
        steps = steps.sort_values("step")
        dice, effort = steps["dice"].to_numpy(), steps["cumulative_effort"].to_numpy()
        nsd = cvpr_nsd(dice, steps["nsd"].to_numpy())
        index = first_reaching(dice, 0.8)
        expected = {
            "n_steps": len(steps) - 1,
            "dice_initial": dice[0],
            "dice_final": dice[-1],
            "dice_auc": auc(dice),
            "dice_auc_norm": auc_normalized(dice),
            "iou_final": steps["iou"].iloc[-1],
            "hd95_initial": steps["hd95"].iloc[0],
            "nsd_auc": auc(nsd),
            "nsd_auc_norm": auc_normalized(nsd),
            "reached_dice_0.8": index is not None,
            "effort_to_dice_0.8": float("nan") if index is None else effort[index],
            "cumulative_effort": effort[-1],
        }
        got = table.loc[identity]
        for column, value in expected.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(got[column]), column
            else:
                assert got[column] == pytest.approx(value), column
        summary = summarize_episode(steps)
        assert summary["dice_auc"] == got["dice_auc"] or math.isnan(summary["dice_auc"])
        assert list(summary)[:3] == ["target_class", "effort_label", "n_steps"]


# --------------------------------------------------------------------------------------
# Honest aggregates: missing values are counted (or penalised), targets are counted once
# --------------------------------------------------------------------------------------


@pytest.fixture
def hd95_rows() -> pd.DataFrame:
    # One case, two lesions, two seeds. t2 has an empty prediction with seed 1: HD95 NaN.
    rows = []
    for seed, (h1, h2) in enumerate([(2.0, 4.0), (6.0, float("nan"))]):
        for target, value in (("t1", h1), ("t2", h2)):
            r = row("A", "c1", target, "lesion", 0.5, seed=seed)
            r["hd95"] = value
            rows.append(r)
    return pd.DataFrame(rows)


def test_missing_hd95_is_counted_and_targets_are_not_doubled_by_seeds(hd95_rows):
    stats = dataset_statistics(hd95_rows, "hd95", n_boot=10).iloc[0]
    # NaN left out, seeds averaged last as in the tables: seed 0 (2 + 4) / 2 = 3, seed 1 gives
    # 6 (t2 left out): 4.5, which hides the empty prediction (hence n_missing)
    assert stats["mean"] == pytest.approx(4.5)
    assert stats["n_missing"] == 1 and stats["n_values"] == 3
    assert stats["n_targets"] == 2  # two targets, not 4 target x seed rows
    penalised = dataset_statistics(hd95_rows, "hd95", n_boot=10, missing_value=100.0).iloc[0]
    assert penalised["mean"] == pytest.approx((3 + (6 + 100) / 2) / 2)
    assert penalised["n_missing"] == 1 and penalised["n_values"] == 4


def test_summary_tables_show_the_missing_count(hd95_rows):
    from intrabench.reports.tables import build_table

    # The tables average seeds last: seed 0 gives (2 + 4) / 2 = 3, seed 1 gives 6 (t2 left
    # out), so 4.5; with the penalty seed 1 gives (6 + 100) / 2 = 53, so 28.
    wide = summary_table(hd95_rows, "hd95", scale=1.0)
    assert wide.loc[0, "missing"] == 1 and wide.loc[0, "A"] == pytest.approx(4.5)
    filled = summary_table(hd95_rows, "hd95", scale=1.0, missing_value=100.0)
    assert "missing" not in filled and filled.loc[0, "A"] == pytest.approx(28.0)
    paper = build_table(hd95_rows, metric="hd95", scale=1.0)
    assert paper.loc[0, "Missing"] == 1 and paper.loc[0, "A"] == pytest.approx(4.5)
    assert build_table(hd95_rows, metric="hd95", scale=1.0, missing_value=100.0).loc[
        0, "A"
    ] == pytest.approx(28.0)
    # Dice has no missing value: no column
    assert "Missing" not in build_table(hd95_rows, metric="dice")


def test_hd95_aggregate_is_one_definition_for_statistics_and_tables():
    """HD95 with a NaN (an empty prediction) and two seeds. Seeds are averaged last: seed 0's
    case score is 10 (its second target is NaN, left out), seed 1's is (20 + 30) / 2 = 25, so
    the dataset score is (10 + 25) / 2 = 17.5 in the table and in the statistics alike
    (pooling the seeds at the case level would give (10 + 20 + 30) / 3 = 20)."""
    from intrabench.evaluation.aggregate import dataset_statistics, per_dataset, summary_table

    base = {
        "model": "m",
        "prompter": "p",
        "refiner": "none",
        "step": 0,
        "dataset": "d",
        "case": "c1",
        "target_class": "lesion",
        "effort_label": "1",
        "cumulative_effort": 1,
    }
    rows = pd.DataFrame(
        [
            {**base, "seed": 0, "target": "t1", "hd95": 10.0},
            {**base, "seed": 0, "target": "t2", "hd95": float("nan")},
            {**base, "seed": 1, "target": "t1", "hd95": 20.0},
            {**base, "seed": 1, "target": "t2", "hd95": 30.0},
        ]
    )
    statistics = dataset_statistics(rows, "hd95")
    table = summary_table(rows, "hd95", scale=1.0)
    assert per_dataset(rows, "hd95")["hd95"].item() == 17.5
    assert statistics["mean"].item() == 17.5
    assert table["d"].item() == 17.5 and table["Average"].item() == 17.5
    assert statistics["n_missing"].item() == 1 and table["missing"].item() == 1
    assert statistics["median"].item() == 17.5  # one case: (10 + 25) / 2
    # with a penalty for the missing value, both again agree: (55 + 25) / 2 = 40
    assert dataset_statistics(rows, "hd95", missing_value=100.0)["mean"].item() == 40.0
    assert summary_table(rows, "hd95", scale=1.0, missing_value=100.0)["d"].item() == 40.0


def test_hd95_aggregate_bootstrap_draws_the_same_cases_for_every_seed():
    from intrabench.evaluation.aggregate import bootstrap_replicates

    seed0 = np.array([[1.0], [3.0]])
    seed1 = np.array([[5.0], [np.nan]])
    draws = bootstrap_replicates(np.stack([seed0, seed1]), n_boot=200, seed=3)
    # each resample: per seed the mean over the drawn cases, then the mean over seeds
    rng = np.random.default_rng(3)
    indices = rng.integers(0, 2, size=(200, 2))
    expected = [
        np.nanmean(
            [seed0[i].mean(), np.nanmean(seed1[i]) if not np.isnan(seed1[i]).all() else np.nan]
        )
        for i in indices
    ]
    np.testing.assert_allclose(draws, expected)


def test_the_average_says_which_datasets_it_covers_when_rows_differ():
    from intrabench.evaluation.aggregate import summary_table
    from intrabench.reports.tables import build_table

    base = {
        "prompter": "p",
        "refiner": "none",
        "step": 0,
        "seed": 0,
        "case": "c",
        "target": "t",
        "target_class": "lesion",
        "effort_label": "1",
        "cumulative_effort": 1,
    }
    rows = pd.DataFrame(
        [
            {**base, "model": "both", "dataset": "A", "dice": 0.8},
            {**base, "model": "both", "dataset": "B", "dice": 0.4},
            {**base, "model": "only-a", "dataset": "A", "dice": 0.9},
        ]
    )
    table = summary_table(rows).set_index("model")
    assert table.loc["both", "Average"] == pytest.approx(60.0)
    assert table.loc["only-a", "Average"] == pytest.approx(90.0)
    assert table.loc["both", "Average over"] == "A, B"
    assert table.loc["only-a", "Average over"] == "A"
    paper = build_table(rows).set_index("Model")
    assert paper.loc["only-a", "Average over"] == "A"
    # every row on the same datasets: no such column
    assert "Average over" not in summary_table(rows[rows.model == "both"])
    assert "Average over" not in build_table(rows[rows.model == "both"])


def _reference_scores(rows: pd.DataFrame, metric: str) -> tuple[float, dict]:
    """docs/evaluation.md section 3 written out with loops: per seed, target -> case (mean over
    a class's targets), case -> class (mean over cases), class -> dataset (mean over classes);
    then the mean over seeds. A case's score: per seed the mean over its classes, then over
    seeds. NaN values are left out of every mean. Returns (dataset score, {case: score})."""

    def mean(values):
        values = [v for v in values if not math.isnan(v)]
        return sum(values) / len(values) if values else math.nan

    seed_scores, case_values = [], {}
    for seed in sorted(rows["seed"].unique()):
        part = rows[rows["seed"] == seed]
        class_means = []
        cells = {}
        for cls in sorted(part["target_class"].unique()):
            case_means = []
            for case in sorted(part["case"].unique()):
                values = part[(part["case"] == case) & (part["target_class"] == cls)][metric]
                if len(values):
                    cells[case, cls] = mean(list(values))
                    case_means.append(cells[case, cls])
            class_means.append(mean(case_means))
        seed_scores.append(mean(class_means))
        for case in part["case"].unique():
            case_values.setdefault(case, []).append(
                mean([v for (c, _), v in cells.items() if c == case])
            )
    return mean(seed_scores), {case: mean(v) for case, v in case_values.items()}


def _rows_with_missing(rng: np.random.Generator, shift: float = 0.0) -> pd.DataFrame:
    records = []
    for seed in (0, 1):
        for case in ("c1", "c2", "c3", "c4"):
            for cls in ("lesion", "organ"):
                for target in range(int(rng.integers(0, 4))):
                    value = float(rng.uniform(1, 40)) + shift
                    if rng.random() < 0.35:
                        value = math.nan
                    records.append(
                        {**row("D", case, f"{cls}{target}", cls, 0.5, seed=seed), "hd95": value}
                    )
    return pd.DataFrame(records)


@pytest.mark.parametrize("draw", range(5))
def test_hd95_every_aggregate_follows_one_definition(draw):
    """Every function that aggregates rows gives the documented number on the same rows with
    missing (NaN) HD95 values and two seeds that cover different targets (#49 item 6: before,
    compare_runs and per_case_table pooled seeds at the case level)."""
    from intrabench.evaluation.aggregate import dataset_means
    from intrabench.reports.compare import compare_runs

    rng = np.random.default_rng(draw)
    rows = _rows_with_missing(rng)
    expected, cases = _reference_scores(rows, "hd95")
    assert per_dataset(rows, "hd95")["hd95"].item() == pytest.approx(expected)
    assert summary_table(rows, "hd95", scale=1.0)["D"].item() == pytest.approx(expected)
    stats = dataset_statistics(rows, "hd95", n_boot=50)
    assert stats["mean"].item() == pytest.approx(expected)
    episodes = rows.drop(columns="step")
    assert dataset_means(episodes, ["hd95"]).set_index("dataset").loc["D", "hd95"] == (
        pytest.approx(expected)
    )
    table = per_case_table(rows, "hd95").set_index("case")["hd95"]
    for case, value in cases.items():
        assert table[case] == pytest.approx(value, nan_ok=True)
    finite = [v for v in cases.values() if not math.isnan(v)]
    assert stats["median"].item() == pytest.approx(float(np.median(finite)))
    other = _rows_with_missing(np.random.default_rng(draw), shift=2.5)
    expected_b, _ = _reference_scores(other, "hd95")
    summary, per_case = compare_runs(rows, other, metric="hd95", n_boot=50)
    line = summary.set_index("dataset").loc["D"]
    assert line["A"] == pytest.approx(expected) and line["B"] == pytest.approx(expected_b)
    assert line["B - A"] == pytest.approx(2.5)
    assert per_case.set_index("case")["A"].to_dict() == pytest.approx(cases, nan_ok=True)
