"""Who may write to a run directory, and what it may already hold.

A run directory (``--out``) belongs to one run: its ``config.yaml``, ``run.json``, unit files,
results and predictions. Before a run writes anything there:

* :func:`check_output_directory` refuses a folder that holds files IntraBench did not write
  (``--out .`` in a project folder would overwrite the user's own ``config.yaml``,
  ``run.json`` and ``results.csv``);
* :func:`check_same_run` refuses to continue a previous run under another ``name`` (its rows
  would carry two run names), and a run whose config differs from the one recorded there
  unless the user asks to extend it (``intrabench run --extend``): its ``config.yaml`` would
  otherwise be silently replaced;
* :class:`RunLock` refuses a second run writing to the same folder at the same time (an
  exclusive ``flock`` on ``RUN_DIR/.lock``, released when the run ends or its process dies).

Settings that change a unit's rows are part of the unit's key (see
:class:`intrabench.execution.runner.WorkUnit`), so a changed setting computes new units instead of
reusing stale ones.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from intrabench.errors import UserError
from intrabench.wording import listed

#: What a run directory may hold (IntraBench's own files and folders).
RUN_FILES = frozenset(
    {
        "config.yaml",
        "run.json",
        "skipped.csv",
        "results.parquet",
        "results.csv",
        "units",
        "predictions",
        "report",
        "reviews",
        "review-site",
        "attributes",
        ".lock",
        ".write-test",
        "failures.csv",
        "failures",
        "problems.csv",
        "tables",
    }
)


def run_record(run_dir: str | Path) -> dict[str, Any] | None:
    """``run_dir/run.json`` (versions, machine, planned units) as a dict.

    Args:
        run_dir: The run directory.

    Returns:
        The record; ``{}`` when there is none, None when it is damaged (not JSON, or not an
        object: a copy cut short).
    """
    path = Path(run_dir) / "run.json"
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _is_intrabench_run(run_dir: Path, record: dict[str, Any] | None = None) -> bool:
    """Whether ``run_dir/run.json`` (or its ``record``, already read) was written by
    IntraBench (a previous run's folder)."""
    versions = ((run_record(run_dir) if record is None else record) or {}).get("versions")
    return isinstance(versions, dict) and "intrabench" in versions


def check_output_directory(run_dir: Path) -> None:
    """Refuse a ``run_dir`` that holds files that are not a run's (nothing is touched).

    A missing folder, an empty one and a previous IntraBench run's folder pass.

    Args:
        run_dir: The ``--out`` folder of the run about to start.

    Raises:
        UserError: ``run_dir`` is a file, holds files IntraBench did not write, or is a run's
            folder whose ``run.json`` is damaged.
    """
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise UserError(f"output directory {run_dir} is a file; give a folder")
    entries = sorted(p.name for p in run_dir.iterdir())
    foreign = [
        name
        for name in entries
        if name not in RUN_FILES and not (name.startswith(".") and name.endswith(".partial"))
    ]  # cut writes
    ours = [name for name in entries if name in RUN_FILES and not name.startswith(".")]
    record = run_record(run_dir)
    if not foreign and "run.json" in ours and record is None:
        raise UserError(
            f"output directory {run_dir} is a run's folder whose run.json is damaged "
            "(not JSON), so whose run it holds cannot be told; restore run.json, or "
            "give another folder with --out"
        )
    if foreign or (ours and not _is_intrabench_run(run_dir, record or {})):
        shown = listed([repr(n) for n in (foreign or ours)], limit=5)
        raise UserError(
            f"output directory {run_dir} holds files this run did not write "
            f"({shown}); give a new or "
            "empty folder, or a previous run's folder, with --out"
        )


def check_same_run(run_dir: Path, config: Any, extend: bool = False) -> None:
    """Check that ``run_dir`` may hold this run (a new folder, or the same run resumed).

    Args:
        run_dir: The run folder.
        config: The run's configuration.
        extend: Whether the run may extend a previous one with another config (same name).

    Raises:
        UserError: The folder holds a previous run under another ``name``, or (unless
            ``extend``) one whose recorded config differs from ``config``'s (the differences
            named).
    """
    try:
        previous = recorded_config_data(run_dir)
    except UserError:  # not readable as a config: nothing to compare with
        return
    if not isinstance(previous, dict) or not _is_intrabench_run(run_dir):
        return
    old = previous.get("name")
    if old is not None and old != config.name:
        raise UserError(
            f"output directory {run_dir} holds the run '{old}'; this config is named "
            f"'{config.name}' (its rows would mix two run names): use another --out "
            f"or the name '{old}'"
        )
    changes = config_changes(previous, config.model_dump(mode="json"))
    if changes and not extend:
        raise UserError(
            f"{run_dir} holds run '{config.name}' with another config ("
            f"{'; '.join(changes)}): pass --extend to add this config's work to it "
            "(kept rows stay), or use another --out"
        )


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One short phrase per top-level config key that differs: components added (+key) or
    removed (-key), other values as ``key: old -> new``.

    Args:
        old: The recorded config, as the YAML document of the run's ``config.yaml``.
        new: This run's config, as ``model_dump(mode="json")`` gives it.

    Returns:
        The phrases, in ``new``'s key order then the keys only ``old`` has; empty when equal.
    """
    changes = []
    for name in [*new, *(k for k in old if k not in new)]:
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if _is_spec_list(before) and _is_spec_list(after):
            keys_before = [_spec_key(item) for item in before]
            keys_after = [_spec_key(item) for item in after]
            moved = [f"+{k}" for k in keys_after if k not in keys_before] + [
                f"-{k}" for k in keys_before if k not in keys_after
            ]
            changes.append(f"{name}: {' '.join(moved) or 'parameters changed'}")
        else:
            changes.append(f"{name}: {_short(before)} -> {_short(after)}")
    return changes


def _is_spec_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value)


def _spec_key(item: dict[str, Any]) -> str:
    from intrabench.io.run_paths import component_key

    return component_key(item["name"], item.get("params") or {}, item.get("label"))


def _short(value: Any, width: int = 40) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= width else text[: width - 3] + "..."


class RunLock:
    """An exclusive lock on a run directory for the lifetime of one run.

    ``acquire`` raises UserError when another process holds it. The lock is an ``flock`` on
    ``RUN_DIR/.lock``: the kernel drops it when the holder's process ends, so a killed run
    never leaves a stale lock. Where ``fcntl`` is missing (Windows) no lock is taken.

    The file names its holder while the run lasts and is emptied when the run releases it
    (also after Ctrl-C or SIGTERM). A holder still named when the next run takes the lock is
    a run that ended without closing: killed by the system (out of memory), by ``kill -9``,
    or a machine that stopped. :attr:`unclosed` says which; the runner tells the user.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ".lock"
        self._handle = None
        #: the holder a previous run left named in the lock file (it never released it)
        self.unclosed: str | None = None

    def acquire(self) -> None:
        """Take the lock and name this process in the lock file (nothing where ``fcntl`` is
        missing).

        Raises:
            UserError: Another process holds the lock.
        """
        if self._handle is not None:
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not on Linux/macOS
            return
        handle = open(self.path, "a+", encoding="utf-8", errors="replace")  # noqa: SIM115
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read(500).strip() or "another process"
            handle.close()
            raise UserError(
                f"output directory {self.path.parent} is in use by another "
                f"IntraBench run ({holder}); wait for it to end, or use another "
                "--out"
            ) from None
        handle.seek(0)
        left = handle.read(500).strip()
        self.unclosed = left if left.startswith("pid ") else None
        handle.seek(0)
        handle.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, started {started}")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Empty the lock file (the run closed) and drop the lock; a lock not held is left alone."""
        if self._handle is not None:
            try:  # emptied: the run closed (see the class docstring)
                self._handle.seek(0)
                self._handle.truncate()
                self._handle.flush()
            except OSError:
                pass
            self._handle.close()  # closing drops the flock
            self._handle = None


def recorded_config_data(run_dir: str | Path) -> Any:
    """The YAML document of ``run_dir/config.yaml``, read with the config loader's guards (at
    most 1 MB, 100,000 values: an alias bomb or a huge list there is refused at once instead of
    costing minutes and gigabytes).

    Args:
        run_dir: The run directory.

    Returns:
        The parsed document (normally a dict of the config's keys).

    Raises:
        UserError: In one line, when the file is missing, unreadable or refused.
    """
    from intrabench.safe_yaml import read_yaml_file

    try:
        return read_yaml_file(Path(run_dir) / "config.yaml", "run's config.yaml")
    except UserError as error:
        raise UserError(f"{run_dir}: its config.yaml cannot be read ({error})") from None
    except OSError as error:
        raise UserError(f"{run_dir}: its config.yaml cannot be read ({error.strerror})") from None


def run_machine(run_dir: str | Path) -> dict | None:
    """The machine the run in ``run_dir`` ran on (``run.json``'s ``machine``).

    Args:
        run_dir: The run directory.

    Returns:
        The description :func:`~intrabench.io.machine.describe_machine` wrote, or None when
        ``run.json`` does not hold one.
    """
    machine = (run_record(run_dir) or {}).get("machine")
    return machine if isinstance(machine, dict) else None
