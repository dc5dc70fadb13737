"""Robustness statistics of a robustness run (RClicks section 5 and appendix E), from its rows.

Rows carry ``click_group`` ("baseline", "G1" ... "G<n>"), ``click_prompter`` (the prompter
without the strategy) and ``click_groups`` (n). A *round* is one step of an episode: round 1
is the initial prompt (step 0), round r the (r - 1)-th correction; N = the number of rounds.

Per episode (one target under one strategy), with v_r the IoU (or Dice) after round r:

* ``noc_iou_<t>`` / ``noc_dice_<t>`` (t = 0.8, 0.85, 0.9): the first round r with v_r >= t,
  N when no round reaches t (capped, as RClicks' NoC20@90);
* ``iou_auc`` / ``dice_auc``: the area under v_1..v_N over unit spacing divided by N - 1
  (trapezoids; the mean height of the curve, in [0, 1]; v_1 when N = 1);
* ``iou_1`` / ``dice_1``: v_1, the first click's quality.

Per target, over its clicking groups G1..Gn (x_g = an episode statistic under group g,
x_base under the baseline strategy; percentages as RClicks' tables):

* ``<x>_mean``, ``<x>_std``: mean and population standard deviation over the n groups
  (RClicks' "Sample" statistic, mean +- std);
* ``<x>_base``: x_base;
* ``<x>_sb``, ``<x>_gr``, ``<x>_hh``: RClicks' official definitions (its
  ``compute_benchmark_metrics.ipynb``, Tables 9-11), with h = n // 2 pairs (G_k, G_{k+n-h}),
  k = 1..h (G1..G5 against G6..G10 for n = 10). For click counts (NoC), relative, in %:
  SB = 100 (mean - x_base) / x_base (how much more an average user clicks than the baseline
  strategy predicts), GR = 100 (x_G1 - x_Gn) / x_Gn (the least likely clicks against the most
  likely), HH = 100 mean_k((x_G_k - x_G_{k+n-h}) / x_G_{k+n-h}) (the two halves of the
  probability mass, pair by pair). For qualities in [0, 1] (IoU-AUC, Dice-AUC, IoU@1,
  Dice@1), absolute differences x100: SB = 100 (mean - x_base), GR = 100 (x_G1 - x_Gn),
  HH = 100 mean_k(x_G_k - x_G_{k+n-h});
* extra columns, clearly named, for the definitions IntraBench used before: ``<x>_hh_halves``
  = 100 (mean(lower half) - mean(upper half)) / mean(upper half) (NoC), and for qualities the
  relative versions ``<x>_sb_relative``, ``<x>_gr_relative``, ``<x>_hh_relative``;
* ``nsr_iou_1`` = 100 std / (mean + 1e-9) of the first click's IoU over the groups, a
  percentage as in RClicks' Table 12 (noise-to-signal ratio: high = a hard target, whose result
  depends on where the person clicks); ``nsr_iou_1_fraction`` is the same as a fraction.

A ratio whose denominator is 0 is NaN and left out of the averages. Target statistics are then
averaged per dataset in one of two ways (``averaging``):

* ``"hierarchical"`` (IntraBench's tables): like every other metric
  (:mod:`intrabench.evaluation.aggregate`), over the targets of a case, the cases of a class,
  the classes of a dataset, and the seeds;
* ``"flat"`` (RClicks' tables): the plain mean over the dataset's instances (every target of
  every case and seed weighs the same), as RClicks' notebook averages per-instance statistics.

Either way ``Average`` is the mean over datasets. The two differ wherever cases hold different
numbers of targets (up to 75 points of GR NoC@80 on the demo).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from intrabench.evaluation.metric_registry import metric_label, metrics_with

THRESHOLDS = (0.8, 0.85, 0.9)

#: the metric RClicks defines its statistics with (rows without it get it from Dice: a run's
#: rows always carry it; hand-made rows may not)
RCLICKS_METRIC = "iou"

#: the metrics the robustness summaries take (the registered ones with the ``robustness``
#: feature), RClicks' own IoU first as in its tables
ROBUSTNESS_METRICS = sorted(
    (m.name for m in metrics_with("robustness")), key=lambda name: name != RCLICKS_METRIC
)
#: the columns that identify one episode of a robustness run (the strategy included)
EPISODE = [
    "dataset",
    "case",
    "target",
    "target_class",
    "model",
    "click_prompter",
    "refiner",
    "seed",
    "click_group",
]
TARGET = [k for k in EPISODE if k != "click_group"]
CONFIGURATION = ["model", "click_prompter", "refiner"]


def _key(threshold: float) -> str:
    return f"{threshold:g}"


def number_of_clicks(values: np.ndarray, threshold: float) -> float:
    """First round (1-based) whose value reaches ``threshold``; the number of rounds if none.

    Args:
        values: Per-round values (e.g. IoU, 0-1), round 1 first.
        threshold: The value to reach (e.g. 0.9).

    Returns:
        The number of clicks (NoC), as a float.
    """
    hits = np.flatnonzero(np.asarray(values, dtype=np.float64) >= threshold)
    return float(hits[0] + 1) if hits.size else float(len(values))


def curve_area(values: np.ndarray) -> float:
    """Trapezoidal area under v_1..v_N over unit spacing / (N - 1); v_1 when N = 1.

    Args:
        values: Per-round values (0-1), round 1 first.

    Returns:
        The normalised area in the values' range; NaN for no value.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return float("nan")
    if values.size == 1:
        return float(values[0])
    return float(np.sum((values[1:] + values[:-1]) / 2.0) / (values.size - 1))


def robustness_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``rows`` that belong to a robustness run (empty when none).

    Args:
        rows: Step rows (``results.parquet``).

    Returns:
        The rows with a ``click_group``.
    """
    if "click_group" not in rows:
        return rows.iloc[0:0]
    return rows[rows["click_group"].notna()]


def episode_statistics(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per episode of a robustness run: NoC, AUC and first-round values (see the
    module docstring), with ``rounds`` and ``click_groups``.

    Args:
        rows: Step rows of a robustness run (IoU and Dice 0-1).

    Returns:
        One row per episode (its keys, then the statistics).
    """
    rows = robustness_rows(rows)
    if RCLICKS_METRIC not in rows and not rows.empty:
        rows = rows.assign(**{RCLICKS_METRIC: rows["dice"] / (2.0 - rows["dice"])})
    keys = [k for k in EPISODE if k in rows]
    records = []
    for identity, episode in rows.sort_values("step").groupby(keys, sort=True, dropna=False):
        record = dict(zip(keys, identity))
        record["click_groups"] = int(episode["click_groups"].iloc[0])
        record["rounds"] = int(len(episode))
        for metric in ROBUSTNESS_METRICS:
            values = episode[metric].to_numpy(dtype=np.float64)
            record[f"{metric}_1"] = float(values[0])
            record[f"{metric}_auc"] = curve_area(values)
            for threshold in THRESHOLDS:
                record[f"noc_{metric}_{_key(threshold)}"] = number_of_clicks(values, threshold)
        records.append(record)
    return pd.DataFrame.from_records(records)


#: the episode statistics summarised over the groups
STATISTICS = [f"noc_{m}_{_key(t)}" for m in ROBUSTNESS_METRICS for t in THRESHOLDS] + [
    f"{m}_{statistic}" for statistic in ("auc", "1") for m in ROBUSTNESS_METRICS
]


def _relative(value: float, reference: float) -> float:
    return 100.0 * (value - reference) / reference if reference != 0 else float("nan")


#: statistics that are qualities in [0, 1]: RClicks compares them by absolute differences x100
QUALITIES = tuple(f"{m}_{statistic}" for statistic in ("auc", "1") for m in ROBUSTNESS_METRICS)


def _pairwise_relative(lower: np.ndarray, upper: np.ndarray) -> float:
    if np.any(upper == 0):
        return float("nan")
    return float(100.0 * np.mean((lower - upper) / upper))


def group_summary(
    by_group: dict[str, float], baseline: float | None, n_groups: int, quality: bool = False
) -> dict[str, float]:
    """Sample mean and std, SB, GR and HH of one statistic of one target from its value per
    group (``{"G1": x, ...}``, all n groups) and under the baseline (None: not run), as RClicks
    defines them (module docstring): relative % for click counts, absolute x100 for
    ``quality`` statistics; the extra columns hold the other definitions.

    Args:
        by_group: The statistic per group, ``{"G1": x, ..., "G<n>": x}``.
        baseline: Its value under the baseline strategy, or None when not run.
        n_groups: The number of groups.
        quality: True for quality statistics (IoU), False for click counts (NoC).

    Returns:
        ``mean``, ``std``, ``base``, ``sb``, ``gr``, ``hh`` and the other definitions' keys.
    """
    values = np.array([by_group[f"G{g}"] for g in range(1, n_groups + 1)], dtype=np.float64)
    mean = float(values.mean())
    half = n_groups // 2
    lower, upper = values[:half], values[n_groups - half :]
    base = float("nan") if baseline is None else float(baseline)
    relative = {
        "sb": float("nan") if baseline is None else _relative(mean, base),
        "gr": _relative(float(values[0]), float(values[-1])),
    }
    halves = _relative(float(lower.mean()), float(upper.mean())) if half else float("nan")
    summary = {"mean": mean, "std": float(values.std()), "base": base}
    if quality:
        summary.update(
            {
                "sb": 100.0 * (mean - base),
                "gr": 100.0 * float(values[0] - values[-1]),
                "hh": float(100.0 * np.mean(lower - upper)) if half else float("nan"),
                "sb_relative": relative["sb"],
                "gr_relative": relative["gr"],
                "hh_relative": halves,
            }
        )
    else:
        summary.update(
            {
                **relative,
                "hh": _pairwise_relative(lower, upper) if half else float("nan"),
                "hh_halves": halves,
            }
        )
    return summary


def target_statistics(episodes: pd.DataFrame) -> pd.DataFrame:
    """One row per target and configuration: every statistic's mean, std, base, sb, gr, hh
    over the groups, and ``nsr_iou_1``. Targets missing a group are left out (a partial run).

    Args:
        episodes: :func:`episode_statistics`'s rows.

    Returns:
        One row per target and configuration (empty, with the target keys, when none).
    """
    if episodes.empty:
        return pd.DataFrame(columns=TARGET)
    keys = [k for k in TARGET if k in episodes]
    records = []
    for identity, target in episodes.groupby(keys, sort=True, dropna=False):
        n_groups = int(target["click_groups"].iloc[0])
        by_strategy = target.set_index("click_group")
        if not all(f"G{g}" in by_strategy.index for g in range(1, n_groups + 1)):
            continue
        record = dict(zip(keys, identity))
        for statistic in STATISTICS:
            column = by_strategy[statistic]
            baseline = float(column["baseline"]) if "baseline" in column.index else None
            summary = group_summary(
                column.to_dict(), baseline, n_groups, quality=statistic in QUALITIES
            )
            record.update({f"{statistic}_{name}": value for name, value in summary.items()})
        first = by_strategy.loc[[f"G{g}" for g in range(1, n_groups + 1)], "iou_1"]
        fraction = float(first.std(ddof=0)) / (float(first.mean()) + 1e-9)
        record["nsr_iou_1"] = 100.0 * fraction
        record["nsr_iou_1_fraction"] = fraction
        records.append(record)
    return pd.DataFrame.from_records(records)


#: the two ways of averaging target statistics per dataset, and how a table names them
AVERAGING = {
    "hierarchical": "targets -> cases -> classes -> dataset, then seeds (as every IntraBench "
    "table)",
    "flat": "the plain mean over the dataset's instances (targets x seeds), as RClicks' tables",
}


def summary(
    targets: pd.DataFrame, columns: list[str], averaging: str = "hierarchical"
) -> pd.DataFrame:
    """``columns`` of :func:`target_statistics` averaged per configuration and dataset
    (``averaging``: see :data:`AVERAGING`), plus an ``Average`` over datasets; long format:
    model, prompter, refiner, dataset, one column per statistic.

    Args:
        targets: :func:`target_statistics`'s rows.
        columns: The statistics' columns to average.
        averaging: One of :data:`AVERAGING` ("hierarchical": as the benchmark's tables).

    Returns:
        The long table, sorted by model, prompter, refiner and dataset.

    Raises:
        ValueError: ``averaging`` is not one of :data:`AVERAGING`.
    """
    from intrabench.evaluation.aggregate import dataset_means

    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {', '.join(AVERAGING)}, not {averaging!r}")
    frame = targets.rename(columns={"click_prompter": "prompter"})
    if averaging == "hierarchical":
        return dataset_means(frame, columns)
    keys = ["model", "prompter", "refiner"]
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "dataset", *columns])
    per_dataset = frame.groupby([*keys, "dataset"], dropna=False)[columns].mean().reset_index()
    average = (
        per_dataset.groupby(keys, dropna=False)[columns]
        .mean()
        .reset_index()
        .assign(dataset="Average")
    )
    return pd.concat([per_dataset, average], ignore_index=True).sort_values(
        [*keys, "dataset"], kind="stable", ignore_index=True
    )


def robustness_table(
    rows: pd.DataFrame,
    noc_metric: str = "iou",
    threshold: float = 0.9,
    averaging: str = "hierarchical",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(display table: rows model x prompter x refiner, the Average over datasets, as RClicks'
    tables 9-11; long summary per dataset; per-target statistics) of a run's rows, the target
    statistics averaged per dataset as ``averaging`` says (:data:`AVERAGING`).

    Args:
        rows: Step rows of a robustness run.
        noc_metric: The metric of the NoC columns (one of ``ROBUSTNESS_METRICS``).
        threshold: The NoC threshold (one of ``THRESHOLDS``).
        averaging: One of :data:`AVERAGING`.

    Returns:
        (display table, long summary, per-target statistics).

    Raises:
        ValueError: The metric or threshold has no NoC column.
    """
    if threshold not in THRESHOLDS or noc_metric not in ROBUSTNESS_METRICS:
        shown = " or ".join(metric_label(m) for m in ROBUSTNESS_METRICS)
        raise ValueError(f"NoC is computed for {shown} at {', '.join(map(str, THRESHOLDS))}")
    targets = target_statistics(episode_statistics(rows))
    long = summary(targets, [c for c in targets.columns if c not in TARGET], averaging)
    average = long[long["dataset"] == "Average"]
    noc = f"noc_{noc_metric}_{_key(threshold)}"
    label = f"NoC@{metric_label(noc_metric)}{int(round(threshold * 100))}"
    display = pd.DataFrame(
        {
            "Model": average["model"],
            "Prompter": average["prompter"],
            "Refiner": average["refiner"],
            f"Sample {label}": [
                f"{m:.2f}±{s:.2f}" for m, s in zip(average[f"{noc}_mean"], average[f"{noc}_std"])
            ],
            f"Base {label}": average[f"{noc}_base"].round(2),
            f"SB {label} %": average[f"{noc}_sb"].round(2),
            f"GR {label} %": average[f"{noc}_gr"].round(2),
            f"HH {label} %": average[f"{noc}_hh"].round(2),
            "Sample IoU-AUC x100": [
                f"{100 * m:.2f}±{100 * s:.2f}"
                for m, s in zip(average["iou_auc_mean"], average["iou_auc_std"])
            ],
            "Base IoU-AUC x100": (100 * average["iou_auc_base"]).round(2),
            "SB IoU-AUC x100": average["iou_auc_sb"].round(2),
            "GR IoU-AUC x100": average["iou_auc_gr"].round(2),
            "HH IoU-AUC x100": average["iou_auc_hh"].round(2),
            "NSR IoU@1 %": average["nsr_iou_1"].round(2),
        }
    ).reset_index(drop=True)
    display[f"targets in SB/GR/HH {label}"] = ratio_counts(targets, noc, display)
    return display, long, targets


def ratio_counts(targets: pd.DataFrame, statistic: str, display: pd.DataFrame) -> list[str]:
    """Per display row, how many targets entered its SB, GR and HH of ``statistic`` (a ratio
    whose denominator is 0 is left out) out of its targets: ``"11/12/12 of 12"``.

    Args:
        targets: :func:`target_statistics`'s rows.
        statistic: The statistic's column prefix (e.g. ``"noc_iou_0.9"``).
        display: The display table (its Model, Prompter and Refiner columns).

    Returns:
        One text per display row ("" each when there are no targets).
    """
    if targets.empty:
        return ["" for _ in range(len(display))]
    keys = ["model", "click_prompter", "refiner"]
    out = []
    for model, prompter, refiner in zip(display["Model"], display["Prompter"], display["Refiner"]):
        mine = targets[
            (targets[keys[0]] == model)
            & (targets[keys[1]] == prompter)
            & (targets[keys[2]] == refiner)
        ]
        counts = [
            int(np.isfinite(mine[f"{statistic}_{ratio}"].astype(float)).sum())
            for ratio in ("sb", "gr", "hh")
        ]
        out.append("/".join(map(str, counts)) + f" of {len(mine)}")
    return out
