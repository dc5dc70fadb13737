"""The results store: one tidy row per (run, dataset, case, target, model, prompter, refiner,
seed, step), written atomically per work unit.

Layout of a run directory::

    RUN_DIR/
      config.yaml        the resolved configuration
      run.json           software versions, machine, timestamps
      units/<key>.parquet  rows of one finished work unit (written with a rename, so a file
                         either is complete or does not exist)
      skipped.csv        model x prompter pairs that cannot run together, with the reason
      results.parquet / results.csv   all rows of the plan, consolidated at the end

Re-running the same command finds the finished unit files and skips that work.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from intrabench.errors import UserError
from intrabench.io.run_paths import inside_run

log = logging.getLogger(__name__)

#: Columns that identify a row; everything else is a measurement.
KEY_COLUMNS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]

#: Measured resources that differ between two runs of the same config (everything else in a
#: row is a function of the config and seed): timings, the cold-call flag (which episode's
#: forward pass came first depends on the scheduling), peak memory.
RESOURCE_COLUMNS = ("latency_first_call", "peak_gpu_mb", "peak_host_mb")


def measured_columns(rows) -> list[str]:
    """The columns of ``rows`` that are measured resources (``*_seconds`` and
    :data:`RESOURCE_COLUMNS`), to drop before comparing two runs' rows.

    Args:
        rows: A results table (a DataFrame of result rows).

    Returns:
        Those column names, in ``rows``' column order.
    """
    return [c for c in rows.columns if c.endswith("_seconds") or c in RESOURCE_COLUMNS]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file renamed over it, so that a reader sees
    the old file or the new one, never a part.

    Args:
        path: The file to write; its folder is created when missing.
        data: The whole content, flushed and synced to disk before the rename.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_write_bytes`).

    Args:
        path: The file to write; its folder is created when missing.
        text: The whole content.
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def write_frame(path: Path, frame: pd.DataFrame, metadata: dict[str, str] | None = None) -> None:
    """Write a DataFrame as Parquet (or CSV by suffix) atomically.

    Args:
        path: The file; a ``.csv`` suffix writes CSV, any other Parquet.
        frame: The rows to write.
        metadata: Extra key-value pairs stored in the Parquet schema (ignored for CSV).
    """
    if path.suffix == ".csv":
        atomic_write_text(path, frame.to_csv(index=False))
        return
    import io

    buffer = io.BytesIO()
    if metadata:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        merged = {
            **(table.schema.metadata or {}),
            **{k.encode(): v.encode() for k, v in metadata.items()},
        }
        pq.write_table(table.replace_schema_metadata(merged), buffer)
    else:
        frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


def run_metadata(run_dir: str | Path) -> dict[str, str]:
    """The run's ``config.yaml`` and ``run.json`` (software versions, machine) as text, keyed
    ``intrabench.config`` and ``intrabench.run``; embedded in ``results.parquet``.

    Args:
        run_dir: The run directory.

    Returns:
        The two files' texts by key; a file that is absent has no entry.
    """
    run_dir = Path(run_dir)
    found = {}
    for key, name in (("intrabench.config", "config.yaml"), ("intrabench.run", "run.json")):
        if (run_dir / name).exists():
            found[key] = (run_dir / name).read_text()
    return found


def ensure_writable(directory: Path) -> None:
    """Create ``directory`` if needed and check that a file can be written in it.

    Args:
        directory: The output folder (created with its parents).

    Raises:
        UserError: The directory cannot be created or written to.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise UserError(f"output directory {directory} is not writable: {error.strerror}") from None


def software_versions() -> dict[str, str]:
    """The installed versions of IntraBench and the packages its results depend on, by package name.

    Returns:
        Package name -> version string, ``"not installed"`` for the optional ones that are not.
    """
    packages = [
        "intrabench",
        "numpy",
        "scipy",
        "torch",
        "monai",
        "SimpleITK",
        "nibabel",
        "connected-components-3d",
        "scikit-image",
        "segment-anything",
        "sam2",
        "pandas",
    ]
    found = {}
    for name in packages:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def code_revision() -> dict[str, Any]:
    """The git commit of the IntraBench code that runs (and whether its tree had uncommitted
    changes), or {} when it is not a git checkout (an installed wheel).

    Returns:
        ``{"git_commit": <40 hex digits>, "git_dirty": bool}``, or ``{}``.
    """
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        lines = found.stdout.split()
        if found.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != root:
            return {}  # not a checkout of this code (e.g. installed into a venv inside a repo)
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": lines[1], "git_dirty": bool(status.stdout.strip())}


def write_run_metadata(run_dir: Path, config_yaml: str, extra: dict[str, Any]) -> None:
    """Write a run's ``config.yaml`` and its metadata (start time, versions, machine).

    Args:
        run_dir: The run directory.
        config_yaml: The run's configuration as YAML text.
        extra: More metadata entries, written as they are. ``extra["metrics"]``: the metric
            columns this run records (:func:`check_metric_set` first).

    Raises:
        UserError: Before anything is written, when the unit files already in ``run_dir``
            were computed with another metric set.
    """
    from intrabench.io.machine import describe_machine

    if "metrics" in extra:
        check_metric_set(run_dir, extra["metrics"])

    atomic_write_text(inside_run(run_dir, run_dir / "config.yaml"), config_yaml)
    metadata = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": describe_machine(),
        "versions": software_versions(),
        "code": code_revision(),
        **extra,
    }
    atomic_write_text(inside_run(run_dir, run_dir / "run.json"), json.dumps(metadata, indent=2))


def recorded_metric_set(run_dir: Path, current: Sequence[str]) -> list[str] | None:
    """The metric columns the unit files of a run directory were computed with.

    Args:
        run_dir: The run directory.
        current: The metric columns this IntraBench records.

    Returns:
        ``run.json``'s ``metrics``; for a run made before they were recorded, the ``current``
        names that one unit file's columns hold; None when the folder holds no unit file
        (nothing to mix with).
    """
    import pyarrow.parquet as pq

    units = Path(run_dir) / "units"
    first = next(iter(sorted(units.glob("*.parquet"))), None) if units.is_dir() else None
    if first is None:
        return None
    try:
        recorded = json.loads((Path(run_dir) / "run.json").read_text()).get("metrics")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, list) and all(isinstance(name, str) for name in recorded):
        return recorded
    try:
        columns = set(pq.read_schema(first).names)
    except Exception:  # damaged: the run sets it aside and computes it again
        return None
    return [name for name in current if name in columns]


def check_metric_set(run_dir: Path, metrics: Sequence[str]) -> None:
    """Refuse to resume a run whose finished units hold another metric set.

    Resuming would mix rows with and without a metric: the rows of the old units would come
    back with nulls in its column, without a word.

    Args:
        run_dir: The run directory.
        metrics: The metric columns this run records, in order.

    Raises:
        UserError: One line naming the difference (``+added -removed``).
    """
    recorded = recorded_metric_set(run_dir, metrics)
    if recorded is None or list(recorded) == list(metrics):
        return
    added = [f"+{name}" for name in metrics if name not in recorded]
    removed = [f"-{name}" for name in recorded if name not in metrics]
    difference = " ".join(added + removed) or f"in the order {', '.join(metrics)}"
    raise UserError(
        f"{run_dir} holds work units computed with the metrics {', '.join(recorded)}; this "
        f"IntraBench records another set ({difference}): resuming would mix rows with and "
        f"without them; use another --out, or move {Path(run_dir) / 'units'} aside to compute "
        "every unit again"
    )


class ResultsStore:
    """Unit files of one run directory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.units_dir = self.run_dir / "units"

    def unit_path(self, unit_key: str) -> Path:
        """The Parquet file of one unit's rows: ``units/<unit_key>.parquet``.

        Args:
            unit_key: The work unit's key (derived from its identity, see the engine's plan).

        Returns:
            The path, whether or not the file exists.
        """
        return self.units_dir / f"{unit_key}.parquet"

    def is_done(self, unit_key: str) -> bool:
        """Whether a unit's rows have been written (resume skips it).

        Args:
            unit_key: The work unit's key.

        Returns:
            True when its unit file exists (written atomically, so whole).
        """
        return self.unit_path(unit_key).exists()

    def set_aside_damaged(self, unit_keys: Iterable[str]) -> list[str]:
        """Move every damaged unit file of ``unit_keys`` aside, so that the unit is computed again.

        A file that is not a whole Parquet file (a disk that filled up, a copy cut short) is renamed
        to ``<key>.parquet.damaged``, with a warning. Reads only each file's footer.

        Args:
            unit_keys: The units to check; a key without a file is passed over.

        Returns:
            The keys whose files were set aside, in the order given.
        """
        import pyarrow.parquet as pq

        damaged = []
        for key in unit_keys:
            path = self.unit_path(key)
            if not path.exists():
                continue
            try:
                pq.read_metadata(path)
            except Exception as error:  # pyarrow raises several kinds on a damaged file
                aside = path.with_name(path.name + ".damaged")
                path.replace(aside)
                log.warning(
                    "unit file %s is damaged (%s); moved to %s and computed again",
                    path.name,
                    str(error).splitlines()[0],
                    aside.name,
                )
                damaged.append(key)
        return damaged

    def unit_count(self) -> int:
        """Unit files present (finished units).

        Returns:
            The number of ``units/*.parquet`` files (0 when there is no ``units`` folder).
        """
        return len(list(self.units_dir.glob("*.parquet"))) if self.units_dir.is_dir() else 0

    def write_unit(self, unit_key: str, rows: list[dict[str, Any]], keep: bool = False) -> None:
        """Write one unit's rows atomically (with pyarrow directly: faster than through pandas).

        Args:
            unit_key: The work unit's key; the file is :meth:`unit_path` of it.
            rows: The unit's result rows, one dict per row (the key columns and the measurements).
            keep: Also keep the rows in this process, where a later :meth:`consolidate` takes them
                instead of reading the file back (the runner's results worker does this).
        """
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        path = inside_run(self.run_dir, self.unit_path(unit_key))
        atomic_write_bytes(path, buffer.getvalue())
        if keep:
            _KEPT[path] = pq.read_table(io.BytesIO(buffer.getvalue()))  # exactly as on disk

    def read_units(self, unit_keys: list[str] | None = None) -> pd.DataFrame:
        """The rows of the given units (default: every unit written), sorted by the key columns.

        Units of different prompters have different prompt columns: the missing ones are nulls.

        Args:
            unit_keys: The units to read; a key without a file is skipped. None: every unit file.

        Returns:
            One DataFrame sorted by :data:`KEY_COLUMNS`; only the key columns when no unit is found.
        """
        paths = (
            [self.unit_path(k) for k in unit_keys]
            if unit_keys is not None
            else sorted(self.units_dir.glob("*.parquet"))
        )
        import pyarrow as pa

        # one Arrow concatenation and one conversion (not a DataFrame per unit): units of
        # different prompters have different prompt columns, filled with nulls
        tables = [
            table
            for table in (_KEPT.pop(p, None) or _read_if_present(p) for p in paths)
            if table is not None
        ]
        if not tables:
            return pd.DataFrame(columns=KEY_COLUMNS)
        frame = pa.concat_tables(tables, promote_options="permissive").to_pandas()
        return frame.sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)

    def consolidate(self, unit_keys: list[str] | None = None) -> pd.DataFrame:
        """``results.parquet`` (every value exact) and ``results.csv`` (for spreadsheets: text
        that would run as a formula quoted, see :func:`~intrabench.display_text.spreadsheet_safe`)
        of the units' rows.

        Args:
            unit_keys: The units of the plan; None: every unit file in ``units/``.

        Returns:
            The rows written, as :meth:`read_units` gives them.
        """
        from intrabench.display_text import spreadsheet_safe

        frame = self.read_units(unit_keys)
        write_frame(
            inside_run(self.run_dir, self.run_dir / "results.parquet"),
            frame,
            metadata=run_metadata(self.run_dir),
        )
        write_frame(inside_run(self.run_dir, self.run_dir / "results.csv"), spreadsheet_safe(frame))
        return frame


#: unit rows written by this process with ``keep=True``, by unit file, until consolidated
_KEPT: dict[Path, Any] = {}


def _read_if_present(path: Path) -> Any:
    """The unit file's rows, or None when it is absent or damaged (a warning says which; the
    run's next start sets it aside and computes the unit again)."""
    import pyarrow.parquet as pq

    if not path.exists():
        return None
    try:
        return pq.read_table(path)
    except Exception as error:  # pyarrow raises several kinds on a damaged file
        log.warning(
            "unit file %s is damaged (%s); its rows are left out: re-run the same "
            "command to compute it again",
            path.name,
            str(error).splitlines()[0],
        )
        return None


def consolidate_run(run_dir: Path, unit_keys: list[str]) -> int:
    """Write ``results.parquet`` and ``results.csv`` of ``run_dir`` from the units' rows (a job
    for the runner's results worker, which holds the rows it wrote).

    Args:
        run_dir: The run directory.
        unit_keys: The units of the run's plan.

    Returns:
        The number of rows written.
    """
    return len(ResultsStore(run_dir).consolidate(unit_keys))


def planned_unit_keys(run_dir: str | Path) -> list[str] | None:
    """The keys of the units the run in ``run_dir`` planned (``run.json``'s ``unit_keys``).

    Args:
        run_dir: The run directory.

    Returns:
        The keys in plan order, or None when ``run.json`` does not list them (a run made before
        they were recorded, a damaged ``run.json``).
    """
    try:
        keys = json.loads((Path(run_dir) / "run.json").read_text())["unit_keys"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return None
    return keys


def completeness(run_dir: str | Path) -> tuple[int, int] | None:
    """(finished units, planned units) of a run directory.

    Fewer finished than planned: the run was interrupted (or is still running) and tables of it
    cover only part of the benchmark. Only unit files of the run's plan count as finished (where
    ``run.json`` lists them).

    Args:
        run_dir: The run directory.

    Returns:
        ``(finished, planned)`` unit counts, or None when ``run.json`` does not say how many were
        planned.
    """
    run_dir = Path(run_dir)
    try:
        planned = int(json.loads((run_dir / "run.json").read_text())["units"])
    except (OSError, ValueError, KeyError, TypeError, OverflowError):  # units: Infinity
        return None
    keys = planned_unit_keys(run_dir)
    store = ResultsStore(run_dir)
    if keys is None:
        return store.unit_count(), planned
    return sum(store.is_done(key) for key in keys), planned


def incompleteness_warning(run_dir: str | Path) -> str | None:
    """One line saying a run is incomplete and why, or None when it is complete (or unknown).

    The units that did not finish are told apart: skipped for a problem with their case or
    model (``problems.csv``), failed (``failures.csv``), and the rest, not run yet (an
    interrupted run, or one still running).

    Args:
        run_dir: The run directory.

    Returns:
        The warning line (``warning: ... is incomplete: ...``), or None.
    """
    counts = completeness(run_dir)
    if counts is None or counts[0] >= counts[1]:
        return None
    finished, planned = counts
    missing = planned - finished
    skipped = min(
        sum(
            int(row["units"])
            for row in _csv_rows(  # engine.skipped_work's list
                Path(run_dir) / "problems.csv", ("dataset", "case", "model", "units")
            )
        ),
        missing,
    )
    failed = min(
        len(_csv_rows(Path(run_dir) / "failures.csv", ("dataset", "case", "model", "cause"))),
        missing - skipped,
    )
    not_run = missing - skipped - failed
    reasons = []
    if skipped:
        reasons.append(
            f"{skipped} skipped for a problem with their case or model (see "
            f"{Path(run_dir) / 'problems.csv'})"
        )
    if failed:
        reasons.append(f"{failed} failed (see {Path(run_dir) / 'failures.csv'})")
    if not_run:
        reasons.append(f"{not_run} not run yet (interrupted, or still running)")
    advice = (
        "fix what they name, then re-run the same command"
        if not not_run
        else "re-run the same command to finish it"
    )
    return (
        f"warning: {run_dir} is incomplete: {finished} of {planned} work units finished; "
        f"{'; '.join(reasons)}. What follows covers only the finished ones; {advice}."
    )


def _csv_rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a run's CSV list (``failures.csv``: one per failed unit; ``problems.csv``:
    one per skipped group, with a whole ``units`` count >= 0); none when it is absent,
    unreadable or not that list (a run of an older version, a damaged copy)."""
    import csv

    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
        if not set(columns) <= set(reader.fieldnames or ()):
            return []
        if "units" in columns and not all(row["units"] and row["units"].isdigit() for row in rows):
            return []
        return rows
    except (OSError, ValueError, TypeError, csv.Error):
        return []


def has_rows(run_dir: str | Path) -> bool:
    """Whether a run holds any result row (``results.parquet``'s footer, else the unit files).

    Args:
        run_dir: The run directory.

    Returns:
        True when at least one row exists.

    Raises:
        UserError: The run directory is missing, or holds neither results nor unit files.
    """
    import pyarrow.parquet as pq

    path = Path(run_dir) / "results.parquet"
    if path.is_file():
        try:
            return pq.read_metadata(path).num_rows > 0
        except Exception:  # damaged: load_results reads the unit files and says so
            pass
    return len(load_results(run_dir)) > 0


def load_results(run_dir: str | Path) -> pd.DataFrame:
    """All rows of a run directory (consolidated file if present, else the unit files).

    A damaged ``results.parquet`` is passed over with a warning; unit files that are not of the
    run's plan are left out, with a warning.

    Args:
        run_dir: The run directory (the ``--out`` of ``intrabench run``).

    Returns:
        One row per (run, dataset, case, target, model, prompter, refiner, seed, step).

    Raises:
        UserError: ``run_dir`` is a file or missing, or holds no results yet.
    """
    run_dir = Path(run_dir)
    if run_dir.is_file():
        raise UserError(f"{run_dir} is a file; give the run's folder (the --out of intrabench run)")
    if not run_dir.is_dir():
        raise UserError(f"run directory not found: {run_dir}")
    consolidated = run_dir / "results.parquet"
    if consolidated.exists():
        try:
            return pd.read_parquet(consolidated)
        except Exception as error:  # pyarrow raises several kinds on a damaged file
            log.warning(
                "%s is damaged (%s); reading the unit files instead (re-run the same "
                "command to write it again)",
                consolidated,
                str(error).splitlines()[0],
            )
    frame = _planned_units(run_dir)
    if frame.empty:
        raise UserError(f"{run_dir} holds no results yet (no units/*.parquet)")
    return frame


def _planned_units(run_dir: Path) -> pd.DataFrame:
    """The rows of the unit files of the run's plan (all unit files when ``run.json`` does not
    list it); unit files of another run or config (copied in, or left by a config that
    ``--extend`` replaced) are left out, with a warning saying how many."""
    store = ResultsStore(run_dir)
    keys = planned_unit_keys(run_dir)
    if keys is None:
        return store.read_units()
    planned = set(keys)
    foreign = (
        [p for p in store.units_dir.glob("*.parquet") if p.stem not in planned]
        if store.units_dir.is_dir()
        else []
    )
    if foreign:
        log.warning(
            "%s: %d unit file(s) in units/ are not of this run's plan (another run's, "
            "or a config it no longer has); their rows are left out",
            run_dir,
            len(foreign),
        )
    return store.read_units(keys)


def result_columns(run_dir: Path) -> list[str]:
    """Column names of a run's results: from ``results.parquet``'s footer alone, else (a run
    not consolidated yet) from its unit files.

    Args:
        run_dir: The run directory.

    Returns:
        The column names, in the file's order.

    Raises:
        UserError: The run directory is missing or holds no results.
    """
    import pyarrow.parquet as pq

    path = Path(run_dir) / "results.parquet"
    if path.is_file():
        try:
            return list(pq.read_schema(path).names)
        except Exception:  # damaged: load_results reads the unit files and says so
            pass
    return list(load_results(run_dir).columns)
