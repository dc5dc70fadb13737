"""``intrabench session import``: session logs checked against their cases, with the Dice of
the mask after each step against the reference (never shown during the session).

Every file is read with :func:`intrabench.people.session_log.read_session`; a file that is not
a session, names a case or target its dataset lacks, or is on another grid is refused (one line
each); a line that is not a valid event is skipped (one line each); a cut last line is counted.
Masks are boolean (z, y, x) on the case's canonical grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from intrabench.errors import DataError, UserError
from intrabench.people.session_log import MAX_BYTES, Session, read_session

STEP_COLUMNS = [
    "session_id", "rater", "dataset", "case_id", "target", "model", "step", "kind",
    "t", "latency_s", "seconds", "dice", "accepted",
]  # fmt: skip


@dataclass
class Imported:
    """What an import found: the rows (one per effective step), and what was wrong."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    sessions: int = 0
    refused: list[str] = field(default_factory=list)
    skipped_lines: list[str] = field(default_factory=list)
    cut_lines: int = 0
    seen: dict[str, str] = field(default_factory=dict)


def session_files(paths: list[str | Path]) -> list[Path]:
    """The ``.jsonl`` files given, and those in the folders given (their ``sessions/`` too).

    Args:
        paths: Session log files and folders.

    Returns:
        The files, folders' ones in name order.

    Raises:
        UserError: A folder without logs, or a path that does not exist.
    """
    files: list[Path] = []
    for given in map(Path, paths):
        if given.is_dir():
            found = sorted(given.glob("*.jsonl")) + sorted(given.glob("sessions/*.jsonl"))
            if not found:
                raise UserError(f"{given}: no session logs (*.jsonl) in it or in its sessions/")
            files += found
        elif given.is_file():
            files.append(given)
        else:
            raise UserError(f"{given}: no such file or folder")
    return files


def import_sessions(paths: list[str | Path], max_bytes: int = MAX_BYTES) -> Imported:
    """Read, check and measure every session log in ``paths``.

    A log that cannot be read or checked is refused whole (one line in ``refused``); a session
    seen before (the same session id) is kept once.

    Args:
        paths: Session log files and folders (:func:`session_files`).
        max_bytes: The largest log read, in bytes.

    Returns:
        The rows (one per effective step), the session count, and the refused logs, skipped
        lines and cut lines.
    """
    result = Imported()
    references: dict[tuple, tuple[np.ndarray, tuple[int, ...]]] = {}
    for path in session_files(paths):
        try:
            session = read_session(path, max_bytes=max_bytes)
            reference = _reference(session, references)
            rows = _rows(session, reference)
        except DataError as error:
            result.refused.append(str(error) if str(path) in str(error) else f"{path}: {error}")
            continue
        sid = session.header["session_id"]
        if sid in result.seen:
            result.refused.append(
                f"{path}: session {sid} again (first in {result.seen[sid]}); kept once"
            )
            continue
        result.seen[sid] = str(path)
        result.sessions += 1
        result.rows += rows
        result.skipped_lines += [f"{path}: {problem}" for problem in session.problems]
        result.cut_lines += session.cut_lines
    return result


def _reference(session: Session, cache: dict) -> np.ndarray:
    """The target's reference mask (z, y, x) on the session's grid, or ``DataError``."""
    from intrabench.people.sessions.setup import load_target

    header = session.header
    params = header.get("dataset_params") or {}
    if not isinstance(params, dict):
        raise DataError("the header's dataset_params is not an object")
    key = (header["dataset"], repr(sorted(params.items())), header["case_id"], header["target"])
    if key not in cache:
        try:
            case, target = load_target(*key[:1], params, header["case_id"], header["target"])
        except DataError:
            raise
        except UserError as error:
            raise DataError(str(error)) from None
        cache[key] = (np.asarray(case.label) == target.label_value, tuple(case.image.shape))
    reference, shape = cache[key]
    if tuple(session.shape) != shape:
        raise DataError(
            f"the session's grid {list(session.shape)} is not case {header['case_id']}'s "
            f"{list(shape)}"
        )
    return reference


def _rows(session: Session, reference: np.ndarray) -> list[dict[str, Any]]:
    from intrabench.evaluation.metrics import dice

    header = session.header
    seconds = _person_seconds(session)
    rows = []
    for step, (event, mask) in enumerate(
        zip(session.effective_interactions(), session.masks()), start=1
    ):
        rows.append(
            {
                "session_id": header["session_id"],
                "rater": header["rater"],
                "dataset": header["dataset"],
                "case_id": header["case_id"],
                "target": header["target"],
                "model": header["model"]["name"],
                "step": step,
                "kind": event["kind"],
                "t": event["t"],
                "latency_s": event["latency_s"],
                "seconds": seconds[id(event)],
                "dice": round(float(dice(mask, reference)), 6),
                "accepted": session.accepted,
            }
        )
    return rows


def _person_seconds(session: Session) -> dict[int, float]:
    """Each interaction event's seconds of the person's time (see
    :meth:`Session.seconds_per_interaction`), by the event's identity."""
    interactions = [e for e in session.events if e["event"] == "interaction"]
    timed = session.seconds_per_interaction()
    return {id(event): seconds for event, (_, seconds) in zip(interactions, timed)}


def write_import(result: Imported, out: Path) -> Path:
    """``OUT/session-steps.csv`` (one row per effective step).

    Args:
        result: What :func:`import_sessions` found.
        out: The output folder (created).

    Returns:
        The CSV's path.
    """
    import pandas as pd

    from intrabench.io.results import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(result.rows, columns=STEP_COLUMNS)
    path = out / "session-steps.csv"
    atomic_write_text(path, table.to_csv(index=False, float_format="%.6g"))
    return path
