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

#: Columns that identify one episode (all steps of one target under one configuration).
EPISODE_KEYS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed"]

#: Dice thresholds for interactions-to-threshold.
THRESHOLDS = (0.8, 0.9)

#: CVPR 2025 rule: NSD counts as 0 when Dice <= this.
CVPR_NSD_DICE_FLOOR = 0.2


def auc(values: Sequence[float]) -> float:
    """CVPR 2025 AUC of one episode's per-step values ``[v_0, v_1, ..., v_K]``.

    Trapezoid over the refinement steps v_1..v_K only (unit spacing): range [0, K - 1].
    NaN when K = 0; 0.0 when K = 1 (a single point has no area).
    """
    clicks = np.asarray(values, dtype=np.float64)[1:]
    if clicks.size == 0:
        return float("nan")
    return float(np.sum((clicks[1:] + clicks[:-1]) / 2.0))


def auc_normalized(values: Sequence[float]) -> float:
    """:func:`auc` divided by its maximum K - 1, in [0, 1]; v_1 when K = 1; NaN when K = 0."""
    clicks = np.asarray(values, dtype=np.float64)[1:]
    if clicks.size == 0:
        return float("nan")
    if clicks.size == 1:
        return float(clicks[0])
    return auc(values) / (clicks.size - 1)


def first_reaching(values: Sequence[float], threshold: float) -> int | None:
    """Index of the first value >= ``threshold``, or None if none reaches it."""
    hits = np.flatnonzero(np.asarray(values, dtype=np.float64) >= threshold)
    return int(hits[0]) if hits.size else None


def cvpr_nsd(dice: np.ndarray | pd.Series, nsd: np.ndarray | pd.Series) -> np.ndarray:
    """NSD with the CVPR 2025 rule applied: 0 where Dice <= 0.2."""
    dice = np.asarray(dice, dtype=np.float64)
    return np.where(dice <= CVPR_NSD_DICE_FLOOR, 0.0, np.asarray(nsd, dtype=np.float64))


def _key(threshold: float) -> str:
    return f"{threshold:g}"


def summarize_episode(steps: pd.DataFrame) -> dict[str, float | int | bool | str]:
    """Summary of one episode from its rows (any order; sorted by ``step`` here)."""
    steps = steps.sort_values("step")
    dice = steps["dice"].to_numpy(dtype=np.float64)
    effort = steps["cumulative_effort"].to_numpy(dtype=np.float64)
    first = steps.iloc[0]
    last = steps.iloc[-1]
    out: dict[str, float | int | bool | str] = {
        "target_class": first.get("target_class", ""),
        "effort_label": first.get("effort_label", ""),
        "n_steps": int(len(steps) - 1),
        "dice_initial": float(dice[0]),
        "dice_final": float(dice[-1]),
        "dice_auc": auc(dice),
        "dice_auc_norm": auc_normalized(dice),
        "initial_effort": float(effort[0]),
        "cumulative_effort": float(effort[-1]),
    }
    for metric in ("iou", "nsd", "hd95"):
        if metric in steps:
            out[f"{metric}_initial"] = float(steps[metric].iloc[0])
            out[f"{metric}_final"] = float(last[metric])
    if "nsd" in steps:
        nsd = cvpr_nsd(dice, steps["nsd"].to_numpy())
        out["nsd_auc"] = auc(nsd)
        out["nsd_auc_norm"] = auc_normalized(nsd)
    for threshold in THRESHOLDS:
        index = first_reaching(dice, threshold)
        out[f"reached_dice_{_key(threshold)}"] = index is not None
        out[f"steps_to_dice_{_key(threshold)}"] = float("nan") if index is None else float(index)
        out[f"effort_to_dice_{_key(threshold)}"] = (
            float("nan") if index is None else float(effort[index])
        )
    if "model_seconds" in steps:
        seconds = steps["model_seconds"].to_numpy(dtype=np.float64)
        called = (
            ~steps["converged"].to_numpy(dtype=bool)
            if "converged" in steps
            else np.ones(len(steps), bool)
        )
        out["model_seconds_total"] = float(np.nansum(seconds))
        out["model_seconds_per_step"] = (
            float(np.nanmean(seconds[called])) if called.any() else float("nan")
        )
    return out


def episode_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per episode (see the module docstring for every column). Vectorised: the same
    values as :func:`summarize_episode` applied to each episode."""
    if rows.empty:
        return pd.DataFrame(columns=EPISODE_KEYS)
    keys = [k for k in EPISODE_KEYS if k in rows]
    rows = rows.sort_values(keys + ["step"], kind="stable").reset_index(drop=True)
    groups = rows.groupby(keys, sort=False, dropna=False)
    first, last = groups.head(1).set_index(keys), groups.tail(1).set_index(keys)
    out = pd.DataFrame(index=first.index)
    for column in ("target_class", "effort_label"):
        if column in rows:
            out[column] = first[column]
    n_steps = groups["step"].count() - 1
    out["n_steps"] = n_steps.astype(int)
    out["dice_initial"] = first["dice"].astype(float)
    out["dice_final"] = last["dice"].astype(float)
    episode_id = groups.ngroup()
    is_click = (rows["step"] >= 1) & (groups["step"].cumcount() >= 1)
    later = is_click & (groups["step"].cumcount() >= 2)

    def curve_areas(values: pd.Series) -> tuple[pd.Series, pd.Series]:
        previous = values.groupby(episode_id).shift(1)
        pieces = ((values + previous) / 2.0).where(later, 0.0)
        area = pieces.groupby(episode_id).sum().to_numpy()
        clicks = is_click.groupby(episode_id).sum().to_numpy()
        first_click = values.where(is_click).groupby(episode_id).first().to_numpy()
        area = np.where(clicks == 0, np.nan, area)
        normalised = np.where(
            clicks <= 1,
            np.where(clicks == 1, first_click, np.nan),
            area / np.maximum(clicks - 1, 1),
        )
        return pd.Series(area, index=out.index), pd.Series(normalised, index=out.index)

    dice = rows["dice"].astype(float)
    out["dice_auc"], out["dice_auc_norm"] = curve_areas(dice)
    out["initial_effort"] = first["cumulative_effort"].astype(float)
    out["cumulative_effort"] = last["cumulative_effort"].astype(float)
    for metric in ("iou", "nsd", "hd95"):
        if metric in rows:
            out[f"{metric}_initial"] = first[metric].astype(float)
            out[f"{metric}_final"] = last[metric].astype(float)
    if "nsd" in rows:
        out["nsd_auc"], out["nsd_auc_norm"] = curve_areas(pd.Series(cvpr_nsd(dice, rows["nsd"])))
    for threshold in THRESHOLDS:
        hits = rows[dice >= threshold]
        first_hit = hits.groupby(keys, sort=False, dropna=False).head(1).set_index(keys)
        step = first_hit["step"].astype(float).reindex(out.index)
        out[f"reached_dice_{_key(threshold)}"] = step.notna()
        out[f"steps_to_dice_{_key(threshold)}"] = step
        out[f"effort_to_dice_{_key(threshold)}"] = (
            first_hit["cumulative_effort"].astype(float).reindex(out.index)
        )
    if "model_seconds" in rows:
        seconds = rows["model_seconds"].astype(float)
        called = (
            (~rows["converged"].astype(bool))
            if "converged" in rows
            else pd.Series(True, index=rows.index)
        )
        out["model_seconds_total"] = seconds.groupby(episode_id).sum(min_count=0).to_numpy()
        out["model_seconds_per_step"] = seconds.where(called).groupby(episode_id).mean().to_numpy()
    return out.reset_index()


def success_summary(
    episodes: pd.DataFrame,
    threshold: float = 0.8,
    by: Sequence[str] = ("model", "prompter", "refiner"),
) -> pd.DataFrame:
    """Interactions to reach Dice >= ``threshold``, per configuration, counting failures.

    Columns: ``episodes``; ``success_rate`` (fraction that reached it); ``median_effort`` (median
    over *all* episodes with failures counted as infinitely many interactions: inf when at most
    half succeed); ``mean_effort_successes`` (mean over the episodes that reached it).
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
