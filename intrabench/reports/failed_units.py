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


#: the columns of a failures.csv that the summaries use
NEEDED = ("model", "prompter", "refiner")


def read_failures(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """Every run's failed units (columns of ``failures.csv``), empty when none failed.

    A ``failures.csv`` that is not such a list (not CSV text, not UTF-8, without the model,
    prompter and refiner columns: a damaged or foreign file) is left out with a warning naming
    it, so the tables are still written, without its counts.

    Args:
        run_dirs: The run directories whose ``failures.csv`` are read.

    Returns:
        One row per failed unit, all columns as text; the needed columns only when none failed.
    """
    frames = []
    for run_dir in run_dirs:
        path = Path(run_dir) / "failures.csv"
        if path.is_file() and path.stat().st_size:
            try:
                frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
            except (
                pd.errors.EmptyDataError,
                pd.errors.ParserError,
                UnicodeDecodeError,
                ValueError,
            ) as error:
                _left_out(path, f"not CSV text: {type(error).__name__}")
                continue
            missing = [column for column in NEEDED if column not in frame]
            if missing:
                _left_out(path, f"no {', '.join(missing)} column")
                continue
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(NEEDED))
    return pd.concat(frames, ignore_index=True)


def _left_out(path: Path, why: str) -> None:
    import sys

    print(
        f"warning: {path} is not a list of failed units ({why}): left out, so the tables "
        f"do not count its failed units; the run writes it again when it is re-run",
        file=sys.stderr,
    )


def warning_line(failures: pd.DataFrame) -> str | None:
    """One line for above the tables, or None when nothing failed.

    Args:
        failures: :func:`read_failures`'s rows.

    Returns:
        ``warning: N work unit(s) failed ...``, or None.
    """
    if failures.empty:
        return None
    return (
        f"warning: {len(failures)} work unit(s) failed and have no rows: the table rows "
        f"marked in '{COLUMN}' average fewer targets (see failures.csv)"
    )


def add_failed_column(
    table: pd.DataFrame,
    failures: pd.DataFrame,
    model_column: str,
    prompter_column: str,
    label=None,
    refiner_column: str | None = None,
) -> pd.DataFrame:
    """``table`` with a ``Failed units`` column (0 where none failed) when any unit failed.

    Rows are matched on (model, prompter label), and on the refiner too when the table has a
    ``refiner_column``.

    Args:
        table: A results table, one row per configuration.
        failures: :func:`read_failures`'s rows.
        model_column: The table's column holding the model key.
        prompter_column: The table's column holding the prompter label.
        label: ``label(prompter, refiner)`` gives the table's prompter label of a failure's
            prompter and refiner keys (the paper tables write ``prompter + refiner Refine``);
            None: the prompter key.
        refiner_column: The table's column holding the refiner key; None: not matched.

    Returns:
        ``table`` unchanged when nothing failed, else a copy with the column.
    """
    if failures.empty or table.empty:
        return table
    refiners = (
        failures["refiner"].replace("", "none")
        if "refiner" in failures
        else pd.Series("none", index=failures.index)
    )
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
