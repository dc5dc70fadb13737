"""The DAVIS interactive track's summary: the mean curve first, then its AUC and value at 60 s.

DAVIS ranks with ``DavisInteractiveEvaluationService.summarize_report`` (albertomontesg/
davis-interactive, ``davisinteractive/evaluation/service.py``), which does **not** average the
per-episode AUCs. It:

1. reconstructs the report: an interaction not evaluated (the budget ran out) keeps the
   previous interaction's quality at zero time (zeros before the first);
2. averages, at each interaction index i = 1..max_i, the quality over all episodes, and the
   time of interaction i over all episodes; the times are summed into accumulated times;
3. the curve is (0, 0), (T_i, mean quality_i) for i = 1..max_i, then (timeout, last quality);
4. AUC = trapezoid area / the curve's last time (the timeout); J@60 = the curve at 60 s.

Here an episode (one target under one seed) stands for DAVIS's (sequence, scribble, object);
its interaction i is step i - 1, with the time of :mod:`intrabench.timing.budget` (human
seconds + latency), kept within the budget as there; the timeout is the budget
(``budget_per_interaction x max_interactions``); max_i is the number of steps of the run, at
most ``max_interactions``. The curve is averaged per dataset (DAVIS scores one dataset), and
the configurations' ``Average`` is the mean over datasets.

Columns: ``<metric>_auc_time_davis`` and ``<metric>_at_60s_davis`` (Dice and, when present,
NSD). The per-episode means (:func:`intrabench.timing.budget.episode_time_metrics`
averaged) stay as extra columns of the time summary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from intrabench.timing.budget import AT_SECONDS, timed_episodes
from intrabench.timing.human import TimeModel

CONFIGURATION = ["model", "prompter", "refiner"]


def reconstructed(
    values: np.ndarray, costs: np.ndarray, kept: np.ndarray, length: int
) -> tuple[np.ndarray, np.ndarray]:
    """An episode's (quality, time) at interactions 1..``length``: kept steps as they are,
    later ones the last kept quality (0 before any) at zero time.

    Args:
        values: The metric at each step of the episode (e.g. Dice, 0-1).
        costs: Seconds of each step (human time + waiting).
        kept: Bool per step, True for the steps within the budget.
        length: The number of interactions of the reconstruction.

    Returns:
        (quality, seconds), float64 arrays of ``length``.
    """
    quality = np.zeros(length)
    time = np.zeros(length)
    last = 0.0
    for index in range(length):
        if index < len(values) and kept[index]:
            last = float(values[index])
            time[index] = float(costs[index])
        quality[index] = last
    return quality, time


def mean_curve(
    qualities: np.ndarray, times: np.ndarray, timeout: float
) -> tuple[np.ndarray, np.ndarray]:
    """DAVIS's curve from (episodes, interactions) arrays: (0, 0), the accumulated mean times
    with the mean qualities, then (timeout, last mean quality).

    Args:
        qualities: (episodes, interactions) qualities from :func:`reconstructed`.
        times: (episodes, interactions) seconds from :func:`reconstructed`.
        timeout: The budget in seconds, the curve's last x.

    Returns:
        (seconds, quality) of the curve's points, float64 arrays of interactions + 2.
    """
    mean_quality = qualities.mean(axis=0)
    accumulated = np.cumsum(times.mean(axis=0))
    return (
        np.concatenate([[0.0], accumulated, [timeout]]),
        np.concatenate([[0.0], mean_quality, mean_quality[-1:]]),
    )


def curve_scores(
    x: np.ndarray, y: np.ndarray, at_seconds: float = AT_SECONDS
) -> tuple[float, float]:
    """(AUC = trapezoids / the last time, the curve at ``at_seconds``), as summarize_report.

    Args:
        x: The curve's seconds, ascending.
        y: Its qualities at those seconds.
        at_seconds: Where the curve is read, in seconds.

    Returns:
        (normalised area, value at ``at_seconds``), in the qualities' unit; area 0 for a
        curve that ends at 0 s.
    """
    top = float(x.max())
    auc = 0.0 if top == 0.0 else float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0) / top)
    return auc, float(np.interp(at_seconds, x, y))


def davis_summary(rows: pd.DataFrame, model: TimeModel | None = None) -> pd.DataFrame:
    """Per model x prompter x refiner and dataset (plus ``Average``): ``<metric>_auc_time_davis``
    and ``<metric>_at_60s_davis`` for Dice (and NSD when the rows have it).

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model; None for the defaults (30 s x 8 interactions).

    Returns:
        One row per configuration and dataset, then ``Average`` rows, sorted.
    """
    model = model or TimeModel()
    # NSD only where every step has one (surface metrics may be left out of some steps)
    from intrabench.evaluation.metric_registry import metrics_with

    metrics = [
        m.name for m in metrics_with("time") if m.name in rows and rows[m.name].notna().all()
    ]
    columns = [f"{m}_{kind}_davis" for m in metrics for kind in ("auc_time", "at_60s")]
    if rows.empty:
        return pd.DataFrame(columns=[*CONFIGURATION, "dataset", *columns])
    length = int(min(rows["step"].max() + 1, model.max_interactions))
    collected: dict[tuple, dict[str, list]] = {}
    for episode in timed_episodes(rows, model):
        key = (*(episode.identity[c] for c in CONFIGURATION), episode.identity["dataset"])
        costs = episode.human + episode.latency
        store = collected.setdefault(key, {m: [] for m in metrics} | {"time": []})
        for metric in metrics:
            values = episode.steps[metric].to_numpy(dtype=float)
            quality, time = reconstructed(values, costs, episode.kept, length)
            store[metric].append(quality)
        store["time"].append(time)
    records = []
    for key, store in sorted(collected.items(), key=lambda item: tuple(map(str, item[0]))):
        record = dict(zip([*CONFIGURATION, "dataset"], key))
        times = np.array(store["time"])
        for metric in metrics:
            x, y = mean_curve(np.array(store[metric]), times, model.budget)
            record[f"{metric}_auc_time_davis"], record[f"{metric}_at_60s_davis"] = curve_scores(
                x, y
            )
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    average = (
        frame.groupby(CONFIGURATION, dropna=False)[columns]
        .mean()
        .reset_index()
        .assign(dataset="Average")
    )
    return pd.concat([frame, average], ignore_index=True).sort_values(
        [*CONFIGURATION, "dataset"], kind="stable", ignore_index=True
    )
