"""Quality against accumulated time, within a budget (DAVIS interactive track; docs/time-aware.md).

Per episode (one target, steps k = 0..K; v_k a metric after step k):

* cost_k = human seconds of step k (:func:`~intrabench.timing.human.human_seconds`) + the
  wait for the model at step k (:func:`~intrabench.timing.waiting.waiting_seconds`: the
  measured ``latency_seconds``, or the latency table's with ``waiting: table``; 0 once
  converged); T_k = cost_0 + ... + cost_k;
* the budget B = budget_per_interaction x max_interactions (default 30 s x 8 = 240 s). Step
  k is *kept* when k < max_interactions and T_k <= B; the first step that would exceed the
  budget is discarded with every later one (DAVIS: "the last interaction will be discarded"),
  and the missing steps keep the last kept result at zero time cost;
* the curve: (0, 0), then (T_k, v_k) for the kept steps, then flat to (B, v_last); linear in
  between. ``<metric>_auc_time``: its area divided by B, in [0, 1]. ``<metric>_at_60s``: the
  curve at 60 s (linear interpolation; the last value beyond the last kept step).
  ``time_to_<metric>_<t>``: T_k of the first kept step with v_k >= t (NaN when never);
* ``interactions_in_budget``: kept steps; ``human_seconds`` / ``model_seconds_waited``: their
  human time and latency; ``accumulated_seconds``: T of the last kept step.

A step without a measured latency (runs made before it was recorded) counts 0 s of latency.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from intrabench.evaluation.episode_metrics import EPISODE_KEYS
from intrabench.evaluation.metric_registry import metrics_with
from intrabench.timing.human import TimeModel, human_seconds

THRESHOLDS = (0.8, 0.9)
AT_SECONDS = 60.0


def curve(times: np.ndarray, values: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """The curve's points: (0, 0), the kept steps' (T_k, v_k), and (budget, v_last).

    Args:
        times: T_k of the kept steps, accumulated seconds (human time + waiting), ascending.
        values: The metric's values v_k at those steps.
        budget: The time budget, in seconds.

    Returns:
        (seconds, values) of the points, float arrays of one length.
    """
    last = float(values[-1]) if len(values) else 0.0
    return (np.concatenate([[0.0], times, [budget]]), np.concatenate([[0.0], values, [last]]))


def area(times: np.ndarray, values: np.ndarray, budget: float) -> float:
    """Area under :func:`curve` divided by ``budget``: the mean value over the budget.

    Args:
        times: T_k of the kept steps, accumulated seconds (human time + waiting), ascending.
        values: The metric's values v_k at those steps.
        budget: The time budget, in seconds.

    Returns:
        The mean value over [0, budget], in the values' unit (in [0, 1] for Dice).
    """
    x, y = curve(times, values, budget)
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0) / budget)


def value_at(times: np.ndarray, values: np.ndarray, budget: float, seconds: float) -> float:
    """The curve at ``seconds`` (linear interpolation; flat beyond the budget).

    Args:
        times: T_k of the kept steps, accumulated seconds (human time + waiting), ascending.
        values: The metric's values v_k at those steps.
        budget: The time budget, in seconds.
        seconds: The time at which the curve is read, in seconds.

    Returns:
        The interpolated value, in the values' unit.
    """
    x, y = curve(times, values, budget)
    return float(np.interp(seconds, x, y))


def kept_steps(costs: np.ndarray, model: TimeModel) -> np.ndarray:
    """Boolean per step: within the budget and the interaction limit (a prefix of the steps).

    Args:
        costs: Seconds of each step (human time + waiting), in step order.
        model: The time model: its ``budget`` (seconds) and ``max_interactions``.

    Returns:
        Bool (steps,), True for the kept prefix.
    """
    accumulated = np.cumsum(costs)
    within = (accumulated <= model.budget + 1e-9) & (np.arange(len(costs)) < model.max_interactions)
    first_out = np.flatnonzero(~within)
    if first_out.size:
        within[first_out[0] :] = False
    return within


@dataclass(frozen=True)
class TimedEpisode:
    """One episode's steps (sorted), their human seconds and latencies, and which are kept."""

    identity: dict
    steps: pd.DataFrame
    human: np.ndarray
    latency: np.ndarray
    kept: np.ndarray

    @property
    def times(self) -> np.ndarray:
        """T_k of the kept steps."""
        return np.cumsum(self.human + self.latency)[self.kept]

    def values(self, metric: str) -> np.ndarray:
        """One metric's values of the kept steps (float).

        Args:
            metric: A metric column of the steps (e.g. ``"dice"``).

        Returns:
            Float64 values of the kept steps, in step order.
        """
        return self.steps[metric].to_numpy(dtype=float)[self.kept]


def timed_episodes(rows: pd.DataFrame, model: TimeModel) -> Iterator[TimedEpisode]:
    """Every episode of ``rows`` with its costs and the budget applied (module docstring).

    Args:
        rows: Step rows (``results.parquet``) with the episode keys and ``step``.
        model: The time model (human seconds per interaction, budget, limit, waiting).

    Yields:
        One :class:`TimedEpisode` per episode, in sorted key order.
    """
    from intrabench.timing.waiting import waiting_seconds

    rows = rows.assign(_human=human_seconds(rows, model), _latency=waiting_seconds(rows, model))
    keys = [k for k in EPISODE_KEYS if k in rows]
    for identity, steps in rows.sort_values("step").groupby(keys, sort=True, dropna=False):
        human = steps["_human"].to_numpy(dtype=float)
        waited = steps["_latency"].to_numpy(dtype=float)
        yield TimedEpisode(
            dict(zip(keys, identity)), steps, human, waited, kept_steps(human + waited, model)
        )


def episode_time_metrics(rows: pd.DataFrame, model: TimeModel | None = None) -> pd.DataFrame:
    """One row per episode with the module docstring's columns for each registered metric
    that takes the time-aware summaries (Dice, and NSD when present).

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model; None for the defaults (30 s x 8 interactions).

    Returns:
        One row per episode: its keys, ``target_class`` and the columns above (empty, with
        the episode keys, when ``rows`` is).
    """
    model = model or TimeModel()
    if rows.empty:
        return pd.DataFrame(columns=EPISODE_KEYS)
    metrics = [m.name for m in metrics_with("time") if m.name in rows]
    records = []
    for episode in timed_episodes(rows, model):
        kept, times = episode.kept, episode.times
        steps = episode.steps
        record = dict(episode.identity)
        record.update(
            {
                "target_class": steps["target_class"].iloc[0] if "target_class" in steps else "",
                "budget_seconds": model.budget,
                "interactions_in_budget": int(kept.sum()),
                "human_seconds": float(episode.human[kept].sum()),
                "model_seconds_waited": float(episode.latency[kept].sum()),
                "accumulated_seconds": float(times[-1]) if kept.any() else 0.0,
            }
        )
        for metric in metrics:
            values = episode.values(metric)
            record[f"{metric}_auc_time"] = area(times, values, model.budget)
            record[f"{metric}_at_60s"] = value_at(times, values, model.budget, AT_SECONDS)
            record[f"{metric}_final_in_budget"] = float(values[-1]) if len(values) else 0.0
            for threshold in THRESHOLDS:
                hits = np.flatnonzero(values >= threshold)
                record[f"time_to_{metric}_{threshold:g}"] = (
                    float(times[hits[0]]) if hits.size else float("nan")
                )
        records.append(record)
    return pd.DataFrame.from_records(records)


def time_curves(
    rows: pd.DataFrame, model: TimeModel | None = None, metric: str = "dice", points: int = 121
) -> pd.DataFrame:
    """Mean curve per model x prompter x refiner: the mean over episodes of each episode's curve.

    Args:
        rows: Result rows with their human seconds and latencies.
        model: The time model (None: its defaults).
        metric: The metric column on the curve's y axis.
        points: The number of grid times from 0 to the budget.

    Returns:
        Columns model, prompter, refiner, seconds, value: one row per configuration and time.
    """
    model = model or TimeModel()
    grid = np.linspace(0.0, model.budget, points)
    sums: dict[tuple, np.ndarray] = {}
    counts: dict[tuple, int] = {}
    for episode in timed_episodes(rows, model):
        named = episode.identity
        configuration = (named["model"], named["prompter"], named["refiner"])
        x, y = curve(episode.times, episode.values(metric), model.budget)
        sums[configuration] = sums.get(configuration, 0.0) + np.interp(grid, x, y)
        counts[configuration] = counts.get(configuration, 0) + 1
    records = [
        {"model": c[0], "prompter": c[1], "refiner": c[2], "seconds": t, "value": v}
        for c in sorted(sums)
        for t, v in zip(grid, sums[c] / counts[c])
    ]
    return pd.DataFrame.from_records(records)
