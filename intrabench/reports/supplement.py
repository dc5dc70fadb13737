"""Tables for a paper's supplement: per class and per target.

``per-class``: per configuration (model, prompter, refiner), dataset and class, the final
score x100 (the mean over cases of each case's mean over its targets of that class, seeds
averaged last, as every table), the number of cases and targets, and a percentile-bootstrap
95% interval over the cases: "n too small (at least 5)" with fewer cases
(:data:`~intrabench.evaluation.paired.MIN_CASES_INTERVAL`).
``per-target``: one row per episode (run, dataset, case, target, class, configuration, seed):
the effort, and the initial and final value of each metric declared for it (the ``supplement``
feature of :mod:`intrabench.evaluation.metric_registry`: Dice and NSD x100).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from intrabench.evaluation.paired import MIN_CASES_INTERVAL, final_step_rows

if TYPE_CHECKING:
    from intrabench.evaluation.metric_registry import Metric

CONFIG = ["model", "prompter", "refiner"]


def per_class_table(
    rows: pd.DataFrame,
    metric: str = "dice",
    scale: float = 100.0,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Final ``metric`` x ``scale`` per configuration, dataset and class with ``n cases``,
    ``n targets``, ``ci_low`` and ``ci_high`` (NaN with fewer than 5 cases).

    Args:
        rows: Result rows (one per step); each episode's final step is used.
        metric: The metric column to aggregate.
        scale: Factor applied to the score and the bounds (100: Dice x100).
        n_boot: Bootstrap resamples of the cases for the interval.
        seed: The bootstrap's seed.

    Returns:
        One row per (model, prompter, refiner, dataset, class): those keys, ``<metric>
        x<scale>``, ``ci_low``, ``ci_high``, ``n cases``, ``n targets``; empty without rows.
    """
    from intrabench.evaluation.aggregate import (
        bootstrap_ci,
        count_targets,
        dataset_score,
        seed_case_class_matrices,
    )

    rows = final_step_rows(rows, CONFIG)
    records = []
    for identity, group in rows.groupby([*CONFIG, "dataset", "target_class"], sort=True):
        matrix = seed_case_class_matrices(group, metric)  # (seeds, cases, 1)
        n_cases = int(np.isfinite(np.nanmean(matrix, axis=0)).sum()) if matrix.size else 0
        low, high = (
            bootstrap_ci(matrix, n_boot=n_boot, seed=seed)
            if n_cases >= MIN_CASES_INTERVAL
            else (float("nan"), float("nan"))
        )
        records.append(
            {
                **dict(zip([*CONFIG, "dataset", "class"], identity)),
                f"{metric} x{scale:g}": dataset_score(matrix) * scale,
                "ci_low": low * scale,
                "ci_high": high * scale,
                "n cases": n_cases,
                "n targets": count_targets(group),
            }
        )
    return pd.DataFrame.from_records(records)


def per_target_table(rows: pd.DataFrame, scale: float = 100.0) -> pd.DataFrame:
    """One row per episode: its identity, effort, initial and final Dice and NSD x ``scale``.

    Args:
        rows: Result rows (one per step).
        scale: The factor a fraction metric is shown at (100: Dice x100); a metric with a unit
            is shown at its own scale (:attr:`~intrabench.evaluation.metric_registry.Metric.
            scale`, HD95 in mm).

    Returns:
        Per episode: run, dataset, case, target, class, model, prompter, refiner, seed (those
        the rows have), ``effort``, ``interactions``, then per metric of
        :func:`~intrabench.evaluation.metric_registry.metrics_shown_per_target` its
        ``<name> initial x100`` and ``<name> final x100`` (``<name> final (mm)``).
    """
    from intrabench.evaluation.episode_metrics import episode_table
    from intrabench.evaluation.metric_registry import metrics_shown_per_target

    episodes = episode_table(rows)
    keys = [
        c
        for c in ("run", "dataset", "case", "target", "target_class", *CONFIG, "seed")
        if c in episodes
    ]
    table = episodes[keys + ["effort_label", "cumulative_effort"]].copy()
    for metric in metrics_shown_per_target():
        factor, suffix = _shown_at(metric, scale)
        for summary in ("initial", "final"):
            column = f"{metric.name}_{summary}"
            if column in episodes:
                table[f"{metric.name} {summary} {suffix}"] = episodes[column] * factor
    return table.rename(
        columns={
            "target_class": "class",
            "effort_label": "effort",
            "cumulative_effort": "interactions",
        }
    )


def _shown_at(metric: Metric, scale: float) -> tuple[float, str]:
    """A per-target column's factor and header suffix: ``x100`` for a fraction, ``(mm)``."""
    if not metric.unit:
        return scale, f"x{scale:g}"
    return metric.scale, f"x{metric.scale:g}" if metric.scale != 1 else f"({metric.unit})"


def _per_target_caption(scale: float) -> str:
    """``effort, initial and final Dice and NSD x100``: what the per-target table holds."""
    from intrabench.evaluation.metric_registry import metrics_shown_per_target

    labels = [m.label for m in metrics_shown_per_target()]
    named = " and ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 1 else labels)
    fractions = all(not m.unit for m in metrics_shown_per_target())
    return f"effort, initial and final {named}" + (f" x{scale:g}" if fractions else "")


def write_supplement(
    rows: pd.DataFrame,
    out: Path,
    metric: str = "dice",
    scale: float = 100.0,
    n_boot: int = 1000,
    note: str = "",
) -> list[Path]:
    """``per-class.{md,tex,csv}`` and ``per-target.{tex,csv}`` under ``out``; ``note`` (an
    incomplete run) heads the titles and is a column of the CSVs.

    Args:
        rows: Result rows (one per step) of one or several runs.
        out: The folder to write to (created if missing).
        metric: The metric of the per-class table.
        scale: Factor applied to fraction metrics (100: Dice x100).
        n_boot: Bootstrap resamples of the per-class intervals.
        note: Text that heads every title and fills a ``note`` column of the CSVs (e.g. that
            the run is incomplete); empty: none.

    Returns:
        The paths written: the per-class Markdown, LaTeX and CSV, then the per-target LaTeX
        and CSV (a table without rows is not written).
    """
    from intrabench.display_text import spreadsheet_safe
    from intrabench.reports.comparisons import too_few
    from intrabench.reports.tables import to_latex, write_table

    out.mkdir(parents=True, exist_ok=True)
    prefix = f"{note} " if note else ""
    classes = per_class_table(rows, metric, scale, n_boot)
    written = []
    if not classes.empty:
        display = classes.drop(columns=["ci_low", "ci_high"])
        display.insert(
            display.columns.get_loc("n cases"),
            "95% CI",
            [
                too_few(MIN_CASES_INTERVAL) if lo != lo else f"[{lo:.2f}, {hi:.2f}]"
                for lo, hi in zip(classes["ci_low"], classes["ci_high"])
            ],
        )
        paths = write_table(
            display,
            out,
            "per-class",
            f"{prefix}Final {metric} x{scale:g} per "
            "class (mean over cases; 95% CI: bootstrap over cases)",
        )
        spreadsheet_safe(classes.assign(note=note) if note else classes, escape=True).to_csv(
            paths[2], index=False, float_format="%.6g"
        )
        written += paths
    targets = per_target_table(rows, scale)
    if not targets.empty:
        (out / "per-target.tex").write_text(
            to_latex(
                targets,
                caption=f"{prefix}Per target: {_per_target_caption(scale)}",
                label="tab:per-target",
            )
        )
        spreadsheet_safe(targets.assign(note=note) if note else targets, escape=True).to_csv(
            out / "per-target.csv", index=False, float_format="%.6g"
        )
        written += [out / "per-target.tex", out / "per-target.csv"]
    return written
