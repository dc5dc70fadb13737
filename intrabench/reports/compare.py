"""Two runs side by side: paired per-case differences and bootstrap CIs.

Pairing: the final step of each episode; a configuration (model, prompter, refiner) of run A is
paired with the same configuration of run B. When the two runs share no configuration but each
has exactly one (e.g. model X in run A vs model Y in run B), those two are paired. Cases are
paired by (dataset, case); only cases present in both runs count. A case's value is the mean over
its targets of a class, per seed (as in :mod:`intrabench.evaluation.aggregate`); the difference
B - A is taken per seed, case and class, and the dataset difference is, per seed, the mean over
classes of the mean over cases, then the mean over seeds: the order of every aggregate, so A and
B are the tables' numbers even with missing (NaN) values.
Its 95% CI resamples cases (paired: the same draw for A and B), seeded and deterministic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import (
    bootstrap_replicates,
    case_scores,
    dataset_score,
    seed_case_class_matrices,
)

CONFIG = ["model", "prompter", "refiner"]


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Each episode's last step.

    Args:
        rows: Result rows of one run.

    Returns:
        The rows whose step is their episode's (dataset, case, target, configuration, seed)
        largest.
    """
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


def compare_runs(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    metric: str = "dice",
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, per_case) of two runs' final-step scores, paired by configuration and case.

    Args:
        rows_a: Result rows of run A.
        rows_b: Result rows of run B.
        metric: The metric column compared (``"dice"``, on its 0-1 scale).
        n_boot: Bootstrap resamples of the paired cases for each difference's interval.
        confidence: The interval's two-sided confidence level (0-1).
        seed: Seeds the bootstrap.

    Returns:
        ``summary``: one row per paired configuration and dataset plus an ``(all datasets)``
        row (mean over datasets): score A, score B, difference B - A with its bootstrap CI,
        number of paired cases. ``per_case``: A, B and B - A per paired case (mean over the
        case's classes).
    """
    a, b = final_rows(rows_a), final_rows(rows_b)
    summary, per_case = [], []
    alpha = (1.0 - confidence) / 2.0
    for config_a, config_b in _pairs(a, b):
        part_a, part_b = _select(a, config_a), _select(b, config_b)
        name_a, name_b = " / ".join(map(str, config_a)), " / ".join(map(str, config_b))
        label = (
            {"configuration": name_a}
            if config_a == config_b
            else {"configuration A": name_a, "configuration B": name_b}
        )
        replicates, scores = [], []
        for dataset in sorted(set(part_a["dataset"]) & set(part_b["dataset"])):
            rows_a_here = part_a[part_a["dataset"] == dataset]
            rows_b_here = part_b[part_b["dataset"] == dataset]
            cases = sorted(set(rows_a_here["case"]) & set(rows_b_here["case"]), key=str)
            if not cases:
                continue
            classes = sorted(
                set(rows_a_here["target_class"]) | set(rows_b_here["target_class"]), key=str
            )
            seeds = sorted(set(rows_a_here["seed"]) | set(rows_b_here["seed"]), key=str)
            # (seeds, cases, classes) on shared axes: per seed, case, class the mean over the
            # targets; every number below follows aggregate's order (seeds averaged last)
            values_a = seed_case_class_matrices(rows_a_here, metric, cases, classes, seeds)
            values_b = seed_case_class_matrices(rows_b_here, metric, cases, classes, seeds)
            difference = values_b - values_a
            score_a, score_b = dataset_score(values_a), dataset_score(values_b)
            draws = bootstrap_replicates(difference, n_boot=n_boot, seed=seed)
            low, high = np.nanquantile(draws, [alpha, 1 - alpha])
            delta = dataset_score(difference)
            case_a, case_b = case_scores(values_a), case_scores(values_b)
            case_delta = case_scores(difference)
            summary.append(
                {
                    **label,
                    "dataset": dataset,
                    "A": score_a,
                    "B": score_b,
                    "B - A": delta,
                    "ci_low": float(low),
                    "ci_high": float(high),
                    "cases": len(cases),
                    "B better in": int(np.sum(case_delta > 0)),
                }
            )
            replicates.append(draws)
            scores.append((score_a, score_b, delta))
            for case, va, vb, dv in zip(cases, case_a, case_b, case_delta):
                per_case.append(
                    {**label, "dataset": dataset, "case": case, "A": va, "B": vb, "B - A": dv}
                )
        if len(replicates) > 1:
            overall = np.mean(np.vstack(replicates), axis=0)
            low, high = np.nanquantile(overall, [alpha, 1 - alpha])
            means = np.mean(np.array(scores), axis=0)
            summary.append(
                {
                    **label,
                    "dataset": "(all datasets)",
                    "A": means[0],
                    "B": means[1],
                    "B - A": means[2],
                    "ci_low": float(low),
                    "ci_high": float(high),
                    "cases": int(sum(r["cases"] for r in summary[-len(replicates) :])),
                    "B better in": int(sum(r["B better in"] for r in summary[-len(replicates) :])),
                }
            )
    return pd.DataFrame(summary), pd.DataFrame(per_case)
