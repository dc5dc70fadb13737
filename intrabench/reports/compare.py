"""Two runs side by side: paired per-case differences and bootstrap CIs.

Pairing: the final step of each episode; a configuration (model, prompter, refiner) of run A is
paired with the same configuration of run B. When the two runs share no configuration but each
has exactly one (e.g. model X in run A vs model Y in run B), those two are paired. Cases are
paired by (dataset, case); only cases present in both runs count. A case's value is the mean over
its targets of a class (as in :mod:`intrabench.evaluation.aggregate`); the difference B - A is taken per
case and class, and the dataset difference is the mean over classes of the mean over cases.
Its 95% CI resamples cases (paired: the same draw for A and B), seeded and deterministic.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import bootstrap_replicates, case_class_matrix

CONFIG = ["model", "prompter", "refiner"]


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Each episode's last step."""
    last = rows.groupby(["dataset", "case", "target", *CONFIG, "seed"])["step"].transform("max")
    return rows[rows["step"] == last]


def _pairs(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple[tuple, tuple]]:
    configs_a = list(a.groupby(CONFIG).groups)
    configs_b = list(b.groupby(CONFIG).groups)
    shared = [c for c in configs_a if c in set(configs_b)]
    if shared:
        return [(c, c) for c in shared]
    if len(configs_a) == 1 and len(configs_b) == 1:
        return [(configs_a[0], configs_b[0])]
    return []


def _select(frame: pd.DataFrame, config: tuple) -> pd.DataFrame:
    chosen = np.ones(len(frame), bool)
    for column, value in zip(CONFIG, config):
        chosen &= (frame[column] == value).to_numpy()
    return frame[chosen]


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=axis)


def compare_runs(rows_a: pd.DataFrame, rows_b: pd.DataFrame, metric: str = "dice",
                 n_boot: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, per_case). ``summary``: one row per paired configuration and dataset plus an
    ``(all datasets)`` row (mean over datasets): score A, score B, difference B - A with its
    bootstrap CI, number of paired cases. ``per_case``: A, B and B - A per paired case (mean
    over the case's classes)."""
    a, b = final_rows(rows_a), final_rows(rows_b)
    summary, per_case = [], []
    alpha = (1.0 - confidence) / 2.0
    for config_a, config_b in _pairs(a, b):
        part_a, part_b = _select(a, config_a), _select(b, config_b)
        name_a, name_b = " / ".join(map(str, config_a)), " / ".join(map(str, config_b))
        label = ({"configuration": name_a} if config_a == config_b
                 else {"configuration A": name_a, "configuration B": name_b})
        replicates, scores = [], []
        for dataset in sorted(set(part_a["dataset"]) & set(part_b["dataset"])):
            matrix_a = case_class_matrix(part_a[part_a["dataset"] == dataset], metric)
            matrix_b = case_class_matrix(part_b[part_b["dataset"] == dataset], metric)
            cases = matrix_a.index.intersection(matrix_b.index)
            classes = matrix_a.columns.union(matrix_b.columns)
            if len(cases) == 0:
                continue
            values_a = matrix_a.reindex(index=cases, columns=classes).to_numpy(dtype=np.float64)
            values_b = matrix_b.reindex(index=cases, columns=classes).to_numpy(dtype=np.float64)
            difference = values_b - values_a
            score_a = float(np.nanmean(_nanmean(values_a, 0)))
            score_b = float(np.nanmean(_nanmean(values_b, 0)))
            draws = bootstrap_replicates(difference, n_boot=n_boot, seed=seed)
            low, high = np.nanquantile(draws, [alpha, 1 - alpha])
            delta = float(np.nanmean(_nanmean(difference, 0)))
            summary.append({**label, "dataset": dataset, "A": score_a, "B": score_b,
                            "B - A": delta, "ci_low": float(low), "ci_high": float(high),
                            "cases": len(cases),
                            "B better in": int(np.sum(_nanmean(difference, 1) > 0))})
            replicates.append(draws)
            scores.append((score_a, score_b, delta))
            case_a, case_b = _nanmean(values_a, 1), _nanmean(values_b, 1)
            for case, va, vb in zip(cases, case_a, case_b):
                per_case.append({**label, "dataset": dataset, "case": case, "A": va, "B": vb,
                                 "B - A": vb - va})
        if len(replicates) > 1:
            overall = np.mean(np.vstack(replicates), axis=0)
            low, high = np.nanquantile(overall, [alpha, 1 - alpha])
            means = np.mean(np.array(scores), axis=0)
            summary.append({**label, "dataset": "(all datasets)", "A": means[0], "B": means[1],
                            "B - A": means[2], "ci_low": float(low), "ci_high": float(high),
                            "cases": int(sum(r["cases"] for r in summary[-len(replicates):])),
                            "B better in": int(sum(r["B better in"] for r in summary[-len(replicates):]))})
    return pd.DataFrame(summary), pd.DataFrame(per_case)
