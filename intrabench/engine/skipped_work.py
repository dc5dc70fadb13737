"""Work a run skipped for a problem with its case or its model, kept in the run folder.

A (dataset, case, model) group whose case cannot be read (a NaN voxel, a label on another
grid, no targets) or whose model cannot be built (a missing checkpoint) is skipped with a
one-line problem, and the run goes on with the rest. The problems are printed at the end of
the run; kept nowhere else, a user who comes back to the folder would see only that fewer
units finished than were planned. ``RUN_DIR/problems.csv`` keeps them, one row per skipped group
(dataset, case, model, units, problem), rewritten at the end of every run (header only when
nothing was skipped), so that :func:`intrabench.io.results.incompleteness_warning` can say
why units are missing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "problems.csv"
COLUMNS = ("dataset", "case", "model", "units", "problem")


@dataclass(frozen=True)
class SkippedWork:
    """One (dataset, case, model) group skipped for ``problem``: ``units`` work units."""

    dataset: str
    case: str
    model: str
    units: int
    problem: str


def write_skipped_work(run_dir: Path, skipped: list[SkippedWork]) -> Path:
    """``RUN_DIR/problems.csv`` (header only when nothing was skipped: a rerun that reads
    every case replaces an earlier run's list).

    Args:
        run_dir: The run folder.
        skipped: The groups the run skipped, one record each, in the order they are listed.

    Returns:
        The path of ``problems.csv``, columns :data:`COLUMNS`.
    """
    import pandas as pd

    from intrabench.io.results import write_frame

    path = Path(run_dir) / FILE_NAME
    write_frame(path, pd.DataFrame([asdict(s) for s in skipped], columns=list(COLUMNS)))
    return path
