"""Aggregation of result rows, as the paper does (Maier-Hein et al., "Metrics reloaded").

target -> case (mean over the case's targets of one class) -> dataset class (mean over cases)
-> dataset (mean over classes). A pure function of the rows: re-aggregating never re-runs.
"""

from __future__ import annotations

import pandas as pd

#: Columns that identify one configuration (a table row before the dataset columns).
CONFIG_COLUMNS = ["model", "prompter", "refiner", "seed", "step"]


def per_case(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Mean of ``metric`` over the targets of each (configuration, dataset, case, class)."""
    keys = CONFIG_COLUMNS + ["dataset", "case", "target_class"]
    return rows.groupby(keys, sort=True, dropna=False)[metric].mean().reset_index()


def per_dataset(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Dataset score per configuration: mean over classes of (mean over cases of case means).

    Seeds are averaged last (each seed is a full repetition of the benchmark).
    """
    cases = per_case(rows, metric)
    classes = (cases.groupby(CONFIG_COLUMNS + ["dataset", "target_class"], dropna=False)[metric]
               .mean().reset_index())
    datasets = classes.groupby(CONFIG_COLUMNS + ["dataset"], dropna=False)[metric].mean().reset_index()
    keys = [c for c in CONFIG_COLUMNS if c != "seed"] + ["dataset"]
    return datasets.groupby(keys, dropna=False)[metric].mean().reset_index()


def effort_per_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean cumulative effort per target, and the paper-style label, per configuration."""
    keys = [c for c in CONFIG_COLUMNS if c != "seed"]
    grouped = rows.groupby(keys, dropna=False)
    return pd.DataFrame({
        "mean_effort": grouped["cumulative_effort"].mean(),
        "effort_label": grouped["effort_label"].first(),
    }).reset_index()


def summary_table(rows: pd.DataFrame, metric: str = "dice", steps: str = "final",
                  scale: float = 100.0) -> pd.DataFrame:
    """One row per (model, prompter, refiner, step), one column per dataset, plus Average.

    ``steps``: "final" keeps step 0 and each episode's last step; "all" keeps every step.
    """
    if rows.empty:
        return pd.DataFrame()
    if steps == "final":
        last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
        rows = rows[(rows["step"] == 0) | (rows["step"] == last)]
    scores = per_dataset(rows, metric)
    wide = scores.pivot_table(index=["model", "prompter", "refiner", "step"], columns="dataset",
                              values=metric, sort=True) * scale
    wide["Average"] = wide.mean(axis=1)
    effort = effort_per_configuration(rows).set_index(["model", "prompter", "refiner", "step"])
    wide.insert(0, "effort", effort["effort_label"].reindex(wide.index))
    wide.insert(1, "mean interactions", effort["mean_effort"].reindex(wide.index).round(1))
    wide.columns.name = None
    return wide.reset_index()


def to_markdown(table: pd.DataFrame, digits: int = 2) -> str:
    """A GitHub Markdown table (no extra dependency)."""
    if table.empty:
        return "(no results)"
    header = [str(c) for c in table.columns]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(table[c]) else "---" for c in table.columns) + "|"]
    for _, row in table.iterrows():
        cells = []
        for value in row:
            if isinstance(value, float):
                cells.append("" if value != value else f"{value:.{digits}f}")
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
