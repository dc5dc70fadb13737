"""Failures isolated per work unit: what failed, where, and why, in one line each.

A model or simulated user that raises on one episode fails that episode's work unit only: the
unit gets no unit file (a later run retries it), its other episodes are dropped, and the run
goes on with the rest. Each failed unit is one row of ``RUN_DIR/failures.csv`` (dataset, case,
model, prompter, refiner, seed, target, cause, traceback_file), written at the end of every run,
also an interrupted one. The cause names the innermost frame of the code that failed outside
the installed libraries (a plugin's own file and line, not torch's), and the full traceback is
kept in ``RUN_DIR/failures/`` (and in the log, ``intrabench -v run``).
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from intrabench.errors import one_line_cause

if TYPE_CHECKING:
    from intrabench.engine.plan import WorkUnit

log = logging.getLogger(__name__)

COLUMNS = (
    "dataset",
    "case",
    "model",
    "prompter",
    "refiner",
    "seed",
    "target",
    "cause",
    "traceback_file",
)


@dataclass(frozen=True)
class UnitFailure:
    """One unit (or one of its episodes) that failed, as the run reports and records it.

    Attributes:
        dataset: The unit's dataset key.
        case: The case id.
        model: The model's key.
        prompter: The prompter's key.
        refiner: The refiner's key (``none`` without one).
        seed: The unit's seed.
        target: The target whose episode failed first ("" when the whole unit failed).
        cause: ``ExceptionType: message (file:line)``, one line.
        traceback_file: Where the full traceback was written, relative to the run folder.
        details: The full traceback (written to ``traceback_file``; not a column).
    """

    dataset: str
    case: str
    model: str
    prompter: str
    refiner: str
    seed: int
    #: the target whose episode failed first ("" when the whole unit failed, e.g. set-up)
    target: str
    #: ``ExceptionType: message (file:line)``, one line
    cause: str
    #: where the full traceback was written, relative to the run folder ("" when none)
    traceback_file: str = ""
    #: the full traceback (written to ``traceback_file``; not a column)
    details: str = ""

    @classmethod
    def of(cls, unit: WorkUnit, error: BaseException | str, target: str = "") -> UnitFailure:
        """The failure of ``unit`` by ``error`` (or an already one-line cause).

        An exception is logged at debug level with its traceback, which is also kept in
        ``details``.

        Args:
            unit: The work unit that failed.
            error: The exception raised, or a cause already in one line (no traceback then).
            target: The target whose episode failed ("" when the whole unit failed, e.g. its
                set-up).

        Returns:
            The failure, ``cause`` in one line (:func:`~intrabench.errors.one_line_cause`).
        """
        cause = error if isinstance(error, str) else one_line_cause(error)
        details = (
            "".join(traceback.format_exception(type(error), error, error.__traceback__))
            if isinstance(error, BaseException)
            else ""
        )
        failure = cls(
            dataset=unit.dataset.key,
            case=unit.case_id,
            model=unit.model.key,
            prompter=unit.prompter_key,
            refiner=unit.refiner_key,
            seed=unit.seed,
            target=target,
            cause=cause,
            details=details,
        )
        if isinstance(error, BaseException):
            log.debug(
                "unit failed: %s", failure, exc_info=(type(error), error, error.__traceback__)
            )
        return failure

    def describe(self) -> str:
        """One line: ``dataset/case/target | model | prompter | refiner | seed N: cause``.

        Returns:
            That line (the target left out when the whole unit failed).
        """
        where = "/".join(p for p in (self.dataset, self.case, self.target) if p)
        return (
            f"{where} | {self.model} | {self.prompter} | {self.refiner} | seed {self.seed}: "
            f"{self.cause}"
        )


def write_failures(run_dir: Path, failures: list[UnitFailure]) -> Path:
    """``RUN_DIR/failures.csv`` (header only when nothing failed: a rerun that succeeds
    replaces an earlier run's list).

    Each failure with a traceback also gets ``RUN_DIR/failures/NNNN-model-case-target.txt``
    (its one line, then the traceback), named in its ``traceback_file`` column; the folder of
    an earlier run is removed first.

    Args:
        run_dir: The run folder.
        failures: The run's failed units, in the order they are listed.

    Returns:
        The path of ``failures.csv``, columns :data:`COLUMNS`.
    """
    import shutil

    import pandas as pd

    from intrabench.io.results import write_frame

    folder = Path(run_dir) / "failures"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun's list replaces the earlier one
    records = []
    for index, failure in enumerate(failures, start=1):
        record = asdict(failure)
        if failure.details:
            name = (
                f"{index:04d}-"
                + "-".join(
                    "".join(c if c.isalnum() or c in "._-" else "_" for c in part)[:40]
                    for part in (failure.model, failure.case, failure.target)
                    if part
                )
                + ".txt"
            )
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(f"{failure.describe()}\n\n{failure.details}")
            record["traceback_file"] = f"failures/{name}"
        records.append(record)
    path = Path(run_dir) / "failures.csv"
    write_frame(path, pd.DataFrame(records, columns=list(COLUMNS)))
    return path
