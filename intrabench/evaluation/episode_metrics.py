"""Per-episode summaries: pure functions of the per-step result rows.

An *episode* is one target prompted by one (model, prompter, refiner, seed): the rows that share
:data:`EPISODE_KEYS` and differ only in ``step`` (0 = the initial prompt, k = the k-th
refinement). Nothing here re-runs a model; re-aggregating only needs ``results.parquet``.

Definitions (``v_k`` = a metric after step k, K = number of refinement steps):

* ``<metric>_initial`` = v_0, ``<metric>_final`` = v_K.
* ``<metric>_auc`` (CVPR 2025 interactive challenge): trapezoidal area under v_1..v_K over unit
  spacing, i.e. sum_{k=1}^{K-1} (v_k + v_{k+1}) / 2. The initial prompt (step 0, the challenge's
  bounding-box step) is excluded. Range [0, K - 1]; for K = 5 clicks: [0, 4].
* ``<metric>_auc_norm`` = ``<metric>_auc`` / (K - 1) in [0, 1]: the mean height of the curve
  (equal to v_1 when K = 1). Both are NaN for episodes without refinement (K = 0).
* ``nsd_cvpr`` per step: NSD, set to 0 where Dice <= 0.2 (the challenge's rule); ``nsd_auc``
  and ``nsd_auc_norm`` are computed from it, ``nsd_final`` is the plain NSD.
* ``effort_to_dice_<t>`` (t = 0.8, 0.9): cumulative effort (interactions) at the first step whose
  Dice >= t; NaN when never reached (a failure). ``steps_to_dice_<t>``: that step index.
  ``reached_dice_<t>``: whether it was reached. Aggregate with :func:`success_summary`, which
  counts failures instead of dropping them.
* ``cumulative_effort``: total interactions of the episode; ``model_seconds_per_step``: mean
  model time per step that called the model (steps after convergence do not).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from intrabench.evaluation.metric_registry import (  # noqa: F401 - cvpr_nsd: its old home
    CVPR_NSD_DICE_FLOOR,
    DICE,
    METRICS,
    Metric,
    cvpr_nsd,
)

#: Columns that identify one episode (all steps of one target under one configuration).
EPISODE_KEYS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed"]

#: Dice thresholds for interactions-to-threshold (the Dice metric's declared thresholds).
THRESHOLDS = DICE.thresholds


def auc(values: Sequence[float]) -> float:
    """CVPR 2025 AUC of one episode's per-step values ``[v_0, v_1, ..., v_K]``.

    Trapezoid over the refinement steps v_1..v_K only (unit spacing): range [0, K - 1].
    NaN when K = 0; 0.0 when K = 1 (a single point has no area).

    Args:
        values: The metric at steps 0..K (0 the initial prompt), e.g. Dice in [0, 1].

    Returns:
        The area, in the values' unit times steps.
    """
    clicks = np.asarray(values, dtype=np.float64)[1:]
    if clicks.size == 0:
        return float("nan")
    return float(np.sum((clicks[1:] + clicks[:-1]) / 2.0))


def auc_normalized(values: Sequence[float]) -> float:
    """:func:`auc` divided by its maximum K - 1, in [0, 1]; v_1 when K = 1; NaN when K = 0.

    Args:
        values: The metric at steps 0..K (0 the initial prompt), in [0, 1].

    Returns:
        The normalised area, in the values' range.
    """
    clicks = np.asarray(values, dtype=np.float64)[1:]
    if clicks.size == 0:
        return float("nan")
    if clicks.size == 1:
        return float(clicks[0])
    return auc(values) / (clicks.size - 1)


def first_reaching(values: Sequence[float], threshold: float) -> int | None:
    """Index of the first value >= ``threshold``, or None if none reaches it.

    Args:
        values: Per-step values in step order (index 0: the initial prompt).
        threshold: The value to reach, in the values' unit (e.g. Dice 0.9).

    Returns:
        The first step index reaching it, or None.
    """
    hits = np.flatnonzero(np.asarray(values, dtype=np.float64) >= threshold)
    return int(hits[0]) if hits.size else None


def _key(threshold: float) -> str:
    return f"{threshold:g}"


def summarize_episode(steps: pd.DataFrame) -> dict[str, float | int | bool | str]:
    """Summary of one episode from its rows (any order): :func:`episode_table`'s row for it,
    without the episode's key columns.

    Args:
        steps: The per-step rows of one episode (the step table's columns).

    Returns:
        Column name to value (plain Python scalars), ``target_class`` and ``effort_label``
        "" when the rows lack them.
    """
    row = episode_table(steps).iloc[0]
    out: dict[str, float | int | bool | str] = {
        "target_class": "",
        "effort_label": "",
        **{k: v for k, v in row.items() if k not in EPISODE_KEYS},
    }
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in out.items()}


def episode_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per episode (see the module docstring for every column): the summaries every
    registered metric takes (:data:`~intrabench.evaluation.metric_registry.METRICS`), the
    effort and the model time. Vectorised over episodes.

    Args:
        rows: Per-step rows of any number of episodes (any order), with the episode keys,
            ``step``, ``cumulative_effort`` and the registered metrics' columns.

    Returns:
        One row per episode, its key columns first; an empty frame with the key columns when
        ``rows`` is empty.
    """
    if rows.empty:
        return pd.DataFrame(columns=EPISODE_KEYS)
    keys = [k for k in EPISODE_KEYS if k in rows]
    rows = rows.sort_values(keys + ["step"], kind="stable").reset_index(drop=True)
    episodes = _Episodes(rows, keys)
    out = pd.DataFrame(index=episodes.first.index)
    for column in ("target_class", "effort_label"):
        if column in rows:
            out[column] = episodes.first[column]
    out["n_steps"] = (episodes.groups["step"].count() - 1).astype(int)
    present = [m for m in METRICS.values() if m.name in rows]
    primary, others = present[:1], present[1:]
    for metric in primary:
        _ends(out, episodes, metric)
        _areas(out, episodes, metric)
    out["initial_effort"] = episodes.first["cumulative_effort"].astype(float)
    out["cumulative_effort"] = episodes.last["cumulative_effort"].astype(float)
    for metric in others:
        _ends(out, episodes, metric)
    for metric in others:
        _areas(out, episodes, metric)
    for metric in present:
        _reach(out, episodes, metric)
    if "model_seconds" in rows:
        _model_time(out, episodes)
    return out.reset_index()


class _Episodes:
    """The sorted step rows of many episodes, grouped by their ``keys``."""

    def __init__(self, rows: pd.DataFrame, keys: list[str]) -> None:
        self.rows, self.keys = rows, keys
        self.groups = rows.groupby(keys, sort=False, dropna=False)
        self.first = self.groups.head(1).set_index(keys)
        self.last = self.groups.tail(1).set_index(keys)
        self.episode_id = self.groups.ngroup()
        position = self.groups["step"].cumcount()
        #: refinement steps (1..K) and those after the first (a trapezoid ends there)
        self.is_click = (rows["step"] >= 1) & (position >= 1)
        self.later = self.is_click & (position >= 2)

    def curve_areas(self, values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        """:func:`auc` and :func:`auc_normalized` of every episode's ``values``."""
        previous = values.groupby(self.episode_id).shift(1)
        pieces = ((values + previous) / 2.0).where(self.later, 0.0)
        area = pieces.groupby(self.episode_id).sum().to_numpy()
        clicks = self.is_click.groupby(self.episode_id).sum().to_numpy()
        first_click = values.where(self.is_click).groupby(self.episode_id).first().to_numpy()
        area = np.where(clicks == 0, np.nan, area)
        normalised = np.where(
            clicks <= 1,
            np.where(clicks == 1, first_click, np.nan),
            area / np.maximum(clicks - 1, 1),
        )
        return area, normalised


def _ends(out: pd.DataFrame, episodes: _Episodes, metric: Metric) -> None:
    for summary, rows in (("initial", episodes.first), ("final", episodes.last)):
        if summary in metric.summaries:
            out[f"{metric.name}_{summary}"] = rows[metric.name].astype(float)


def _areas(out: pd.DataFrame, episodes: _Episodes, metric: Metric) -> None:
    if "auc" not in metric.summaries:
        return
    values = pd.Series(metric.curve_values(episodes.rows), index=episodes.rows.index)
    area, normalised = episodes.curve_areas(values)
    out[f"{metric.name}_auc"] = area
    out[f"{metric.name}_auc_norm"] = normalised


def _reach(out: pd.DataFrame, episodes: _Episodes, metric: Metric) -> None:
    if "reach" not in metric.summaries:
        return
    rows, keys = episodes.rows, episodes.keys
    values = rows[metric.name].astype(float)
    for threshold in metric.thresholds:
        reached = values >= threshold if metric.higher_is_better else values <= threshold
        hits = rows[reached]
        first_hit = hits.groupby(keys, sort=False, dropna=False).head(1).set_index(keys)
        step = first_hit["step"].astype(float).reindex(out.index)
        name = f"{metric.name}_{_key(threshold)}"
        out[f"reached_{name}"] = step.notna()
        out[f"steps_to_{name}"] = step
        out[f"effort_to_{name}"] = first_hit["cumulative_effort"].astype(float).reindex(out.index)


def _model_time(out: pd.DataFrame, episodes: _Episodes) -> None:
    rows, episode_id = episodes.rows, episodes.episode_id
    seconds = rows["model_seconds"].astype(float)
    called = (
        (~rows["converged"].astype(bool))
        if "converged" in rows
        else pd.Series(True, index=rows.index)
    )
    out["model_seconds_total"] = seconds.groupby(episode_id).sum(min_count=0).to_numpy()
    out["model_seconds_per_step"] = seconds.where(called).groupby(episode_id).mean().to_numpy()


def success_summary(
    episodes: pd.DataFrame,
    threshold: float = 0.8,
    by: Sequence[str] = ("model", "prompter", "refiner"),
) -> pd.DataFrame:
    """Interactions to reach Dice >= ``threshold``, per configuration, counting failures.

    Args:
        episodes: One row per episode (:func:`episode_table`).
        threshold: The Dice to reach, in [0, 1].
        by: The columns of a configuration.

    Returns:
        Per configuration: ``episodes``; ``success_rate`` (fraction that reached it);
        ``median_effort`` (median over *all* episodes with failures counted as infinitely many
        interactions: inf when at most half succeed); ``mean_effort_successes`` (mean over the
        episodes that reached it).
    """
    column = f"effort_to_dice_{_key(threshold)}"
    records = []
    for identity, group in episodes.groupby(list(by), sort=True, dropna=False):
        effort = group[column].to_numpy(dtype=np.float64)
        reached = np.isfinite(effort)
        counted = np.where(reached, effort, np.inf)
        record = dict(zip(by, identity if isinstance(identity, tuple) else (identity,)))
        record.update(
            {
                "threshold": threshold,
                "episodes": int(len(effort)),
                "success_rate": float(reached.mean()) if len(effort) else float("nan"),
                "median_effort": float(np.median(counted)) if len(effort) else float("nan"),
                "mean_effort_successes": float(effort[reached].mean())
                if reached.any()
                else float("nan"),
            }
        )
        records.append(record)
    return pd.DataFrame.from_records(records)
