"""Failed work units in the summaries: a failed unit has no rows, so the means of its
configuration silently cover fewer targets. Tables and the report say per row how many units
failed (``Failed units``), and a run with failures says so above its tables.

Failures come from each run's ``failures.csv`` (:mod:`intrabench.engine.failures`): one row
per failed unit, with the model, prompter and refiner keys the result rows use.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

COLUMN = "Failed units"


def read_failures(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Every run's failed units (columns of ``failures.csv``), empty when none failed."""
    frames = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "failures.csv"
        if path.is_file() and path.stat().st_size:
            try:
                frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            except (pd.errors.EmptyDataError, pd.errors.ParserError):
                continue
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["model", "prompter", "refiner"])
    return pd.concat(frames, ignore_index=True)


def warning_line(failures: pd.DataFrame) -> str | None:
    """One line for above the tables, or None when nothing failed."""
    if failures.empty:
        return None
    return (f"warning: {len(failures)} work unit(s) failed and have no rows: the table rows "
            f"marked in '{COLUMN}' average fewer targets (see failures.csv)")


def add_failed_column(table: pd.DataFrame, failures: pd.DataFrame, model_column: str,
                      prompter_column: str, label=None, refiner_column: str | None = None
                      ) -> pd.DataFrame:
    """``table`` with a ``Failed units`` column (0 where none failed) when any unit failed.

    ``label(prompter, refiner)`` gives the table's prompter label of a failure's prompter and
    refiner keys (the paper tables write ``prompter + refiner Refine``); by default the
    prompter key. Rows are matched on (model, that label), and on the refiner too when the
    table has a ``refiner_column``."""
    if failures.empty or table.empty:
        return table
    refiners = failures["refiner"].replace("", "none") if "refiner" in failures else \
        pd.Series("none", index=failures.index)
    labels = [label(p, r) if label else p for p, r in zip(failures["prompter"], refiners)]
    arrays = [failures["model"].tolist(), labels]
    table_keys = [table[model_column], table[prompter_column]]
    if refiner_column is not None:
        arrays.append(refiners.tolist())
        table_keys.append(table[refiner_column])
    counts: dict[tuple, int] = {}
    for key in zip(*arrays):
        counts[key] = counts.get(key, 0) + 1
    return table.assign(**{COLUMN: [counts.get(key, 0) for key in zip(*table_keys)]})
