"""Failures isolated per work unit: what failed, where, and why, in one line each.

A model or simulated user that raises on one episode fails that episode's work unit only: the
unit gets no unit file (a later run retries it), its other episodes are dropped, and the run
goes on with the rest. Each failed unit is one row of ``RUN_DIR/failures.csv`` (dataset, case,
model, prompter, refiner, seed, target, cause), written at the end of every run, also an
interrupted one; the full traceback goes to the log (``intrabench -v run``).
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from intrabench.engine.plan import WorkUnit

log = logging.getLogger(__name__)

COLUMNS = ("dataset", "case", "model", "prompter", "refiner", "seed", "target", "cause")


@dataclass(frozen=True)
class UnitFailure:
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

    @classmethod
    def of(cls, unit: WorkUnit, error: BaseException | str, target: str = "") -> UnitFailure:
        """The failure of ``unit`` by ``error`` (or an already one-line cause)."""
        cause = error if isinstance(error, str) else one_line_cause(error)
        failure = cls(dataset=unit.dataset.key, case=unit.case_id, model=unit.model.key,
                      prompter=unit.prompter_key, refiner=unit.refiner_key, seed=unit.seed,
                      target=target, cause=cause)
        if isinstance(error, BaseException):
            log.debug("unit failed: %s", failure,
                      exc_info=(type(error), error, error.__traceback__))
        return failure

    def describe(self) -> str:
        where = "/".join(p for p in (self.dataset, self.case, self.target) if p)
        return (f"{where} | {self.model} | {self.prompter} | {self.refiner} | seed {self.seed}: "
                f"{self.cause}")


def one_line_cause(error: BaseException) -> str:
    """``Type: first line of the message (file:line of the innermost frame)``; the frame is
    unknown for errors that crossed a process boundary (their traceback stays there)."""
    message = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {message[0]}" if message else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if frames:
        frame = frames[-1]
        text += f" ({_short_path(frame.filename)}:{frame.lineno})"
    return text


def _short_path(filename: str) -> str:
    parts = Path(filename).parts
    for anchor in ("intrabench", "models", "prompters", "datasets", "site-packages"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index + (anchor == "site-packages"):])
    return Path(filename).name


def write_failures(run_dir: Path, failures: list[UnitFailure]) -> Path:
    """``RUN_DIR/failures.csv`` (header only when nothing failed: a rerun that succeeds
    replaces an earlier run's list)."""
    import pandas as pd

    from intrabench.io.results import write_frame

    path = Path(run_dir) / "failures.csv"
    write_frame(path, pd.DataFrame([asdict(f) for f in failures], columns=list(COLUMNS)))
    return path
