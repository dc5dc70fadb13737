"""What the clinician waits for the model at each step, in one of two modes.

The mode is ``time_model.waiting`` (docs/time-aware.md):

* ``measured`` (the default): the step's ``latency_seconds`` as measured in this run. True to
  this machine at this moment, and so it moves with whatever else the machine runs (a tiny
  model's waiting went from 0.40 s to 24 s per episode on a loaded machine);
* ``table``: each model's latency from a **latency table**: per model (its label in the
  results) ``first``, the seconds of a case's first call, and ``warm``, every later call,
  optionally per interaction kind (``click``, ``box2d``, ``box3d``, ``scribble``,
  ``boundary_slice``, ``lasso``: the step's kind, as in the latency table). The same rows
  give the same time metrics on any machine and under any load.

A table is measured once (``intrabench latency RUN --save FILE``: the medians of a run's
measured latencies, with the machine they were measured on) or written by hand in the config.
A converged step waits 0 s in both modes (the model is not called).

**The cold call, charged as a lone user pays it.** A model runs a case once for every
configuration (prompter x refiner x seed) of the run, and its per-case work (the image encoder,
a 3D model's first pass) happens in whichever configuration reaches the case first: ranked by
that, LiteMedSAM's box-3d waited 48.3 s and box-per-slice 3.1 s, and the other way round when
the config listed them the other way. Every configuration's first call on a case is therefore
charged the case's cold call (:func:`cold_calls`): in ``measured`` mode the latency of the
(case, model) group's first call when it is larger than the configuration's own, in ``table``
mode the table's ``first``. ``set_case`` (``case_setup_seconds``) stays shown apart, in the
latency table's cold row. A configuration's waiting is thus the same whatever the config's order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from intrabench.errors import UserError
from intrabench.timing.human import TimeModel, step_kind
from intrabench.timing.latency_entries import checked_entries

FORMAT = "intrabench-latency-table/1"


@dataclass(frozen=True)
class LatencyTable:
    """Seconds per model: ``{"first": s, "warm": s, <kind>: s, ...}``; where they come from."""

    models: dict[str, dict[str, float]]
    machine: dict[str, Any] | None = None
    source: str = "the config"
    measured: str | None = None
    runs: list[str] = field(default_factory=list)

    def seconds(self, model: str, first: bool, kind: str) -> float:
        """The seconds the clinician waits for ``model``.

        Args:
            model: The model's label in the table.
            first: Whether this is the episode's first prediction (``first``, else ``warm``).
            kind: The interaction kind of the step; its own entry wins over ``warm``.

        Returns:
            Seconds; 0 when the model's entry has neither the kind, ``warm`` nor ``first``.
        """
        entry = self.models[model]
        if first:
            return entry.get("first", entry.get("warm", 0.0))
        return entry.get(kind, entry.get("warm", entry.get("first", 0.0)))


def measure_table(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per model of ``rows``: the median ``latency_seconds`` of the first calls (``first``),
    of the other calls (``warm``) and of the other calls per interaction kind.

    Args:
        rows: Step rows with ``latency_seconds`` and ``latency_first_call``.

    Returns:
        Model name to ``{"first": s, "warm": s, <kind>: s}`` (seconds, 6 decimals).
    """
    called = rows[~rows["converged"].astype(bool)] if "converged" in rows else rows
    called = called[called["latency_seconds"].notna()]
    called = called.assign(_kind=step_kind(called))
    table: dict[str, dict[str, float]] = {}
    for model, part in called.groupby("model", sort=True):
        first = part["latency_first_call"].astype(bool)
        entry = {}
        if first.any():
            entry["first"] = float(np.median(part.loc[first, "latency_seconds"]))
        warm = part[~first]
        if len(warm):
            entry["warm"] = float(np.median(warm["latency_seconds"]))
            for kind, calls in warm.groupby("_kind", sort=True):
                if kind != "none":
                    entry[kind] = float(np.median(calls["latency_seconds"]))
        table[str(model)] = {k: round(v, 6) for k, v in entry.items()}
    return table


def save_table(
    models: dict[str, dict[str, float]], path: Path, machine: dict[str, Any] | None, runs: list[str]
) -> LatencyTable:
    """Writes ``models`` (:func:`measure_table` of the ``runs``' rows) with the machine they
    ran on to ``path`` (JSON).

    Args:
        models: Model name to latency kind to seconds.
        path: The JSON file to write (replaced atomically).
        machine: The machine's description (CPU, GPU), or None when unknown.
        runs: The run folders the latencies were measured in.

    Returns:
        The table as written, with the time it was measured (UTC).
    """
    from intrabench.io.results import atomic_write_text

    table = LatencyTable(
        models, machine, str(path), datetime.now(timezone.utc).isoformat(timespec="seconds"), runs
    )
    atomic_write_text(
        Path(path),
        json.dumps(
            {
                "format": FORMAT,
                "measured": table.measured,
                "machine": machine,
                "runs": runs,
                "models": table.models,
            },
            indent=1,
        )
        + "\n",
    )
    return table


def load_table(spec: str | dict[str, dict[str, float]]) -> LatencyTable:
    """The table of ``time_model.latency_table``: a file of :func:`save_table`, or inline;
    every value checked (:func:`checked_entries`).

    Args:
        spec: A path to a JSON file of :func:`save_table`, or the inline mapping.

    Returns:
        The checked table.

    Raises:
        UserError: The file is missing or is not a latency table, or a value is refused.
    """
    if isinstance(spec, dict):
        return LatencyTable(checked_entries(spec, "time_model.latency_table"))
    path = Path(spec)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "models" not in data:
            raise KeyError("models")
        models = checked_entries(data["models"], f"time_model.latency_table: {path}")
    except FileNotFoundError:
        raise UserError(
            f"time_model.latency_table: {path} not found (write one with "
            "'intrabench latency RUN --save FILE')"
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise UserError(
            f"time_model.latency_table: {path} is not a latency table "
            f"({type(error).__name__}: {error})"
        ) from None
    return LatencyTable(
        models, data.get("machine"), str(path), data.get("measured"), list(data.get("runs", []))
    )


def waiting_seconds(rows: pd.DataFrame, model: TimeModel) -> pd.Series:
    """Seconds the clinician waits at each row's step (module docstring).

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model; its ``waiting`` ("measured" or "table") says where the
            seconds come from.

    Returns:
        Float seconds per row, on ``rows``' index (0 for converged steps).

    Raises:
        UserError: The latency table has no entry for a model of the rows.
    """
    measured = (
        rows["latency_seconds"].astype(float).fillna(0.0)
        if "latency_seconds" in rows
        else pd.Series(0.0, index=rows.index)
    )
    if rows.empty:
        return measured
    first = configuration_first_calls(rows)
    if model.waiting == "measured":
        return measured.where(~first, np.maximum(measured, cold_calls(rows, measured)))
    table = load_table(model.latency_table)
    missing = sorted(set(rows["model"].astype(str)) - set(table.models))
    if missing:
        raise UserError(
            f"time_model.latency_table ({table.source}) has no latency for "
            f"{', '.join(missing)}; it has {', '.join(sorted(table.models)) or 'none'}"
        )
    kinds = step_kind(rows)
    seconds = [table.seconds(m, f, k) for m, f, k in zip(rows["model"].astype(str), first, kinds)]
    waited = pd.Series(seconds, index=rows.index, dtype=float)
    if "converged" in rows:
        waited[rows["converged"].astype(bool)] = 0.0
    return waited


CASE_GROUP = ["run", "dataset", "case", "model"]
CONFIGURATION = ["prompter", "refiner", "seed"]


def _present(rows: pd.DataFrame, columns: list[str]) -> list[str]:
    return [c for c in columns if c in rows]


def _called(rows: pd.DataFrame) -> pd.Series:
    """True where the model was called (not converged, a latency recorded)."""
    called = rows["latency_seconds"].notna() if "latency_seconds" in rows else rows["step"].eq(0)
    if "converged" in rows:
        called &= ~rows["converged"].astype(bool)
    return called


def configuration_first_calls(rows: pd.DataFrame) -> pd.Series:
    """True on each configuration's (prompter x refiner x seed) first model call on each
    (run, dataset, case, model): its first called row in the rows' order (episodes in the
    case's target order, steps in order); without a latency column, its first step-0 row.

    Args:
        rows: Step rows, in the order they were run.

    Returns:
        Bool per row, on ``rows``' index.
    """
    called = _called(rows).to_numpy()
    keys = _present(rows, CASE_GROUP + CONFIGURATION)
    first = np.zeros(len(rows), dtype=bool)
    if called.any():
        positions = np.flatnonzero(called)
        groups = (
            rows.iloc[positions].groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
            if keys
            else np.zeros(len(positions), dtype=int)
        )
        _, firsts = np.unique(groups, return_index=True)  # the first position of each group
        first[positions[firsts]] = True
    return pd.Series(first, index=rows.index)


def cold_calls(rows: pd.DataFrame, measured: pd.Series) -> pd.Series:
    """Per row: the measured latency of its (run, dataset, case, model) group's cold call
    (``latency_first_call``; without that column the group's largest first-call latency).

    Args:
        rows: Step rows.
        measured: Each row's measured latency in seconds (0 where none), on ``rows``' index.

    Returns:
        Seconds per row, on ``rows``' index.
    """
    keys = _present(rows, CASE_GROUP)
    if "latency_first_call" in rows:
        cold = measured.where(rows["latency_first_call"].astype(bool) & _called(rows), 0.0)
    else:
        cold = measured.where(configuration_first_calls(rows), 0.0)
    if not keys:
        return pd.Series(float(cold.max()), index=rows.index)
    groups = rows.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    largest = pd.Series(cold.to_numpy()).groupby(groups).transform("max").to_numpy()
    return pd.Series(largest, index=rows.index)


def waiting_description(model: TimeModel, machine: dict[str, Any] | None) -> str:
    """One sentence for the time table: which mode gave the waiting, measured where.

    Args:
        model: The time model.
        machine: The run's machine description, or None when unknown.

    Returns:
        The sentence, starting "waiting: ".
    """
    from intrabench.io.machine import machine_text

    if model.waiting == "measured":
        return (
            f"waiting: measured in this run on {machine_text(machine)} (it moves with the "
            "machine's load; 'time_model: {waiting: table}' gives reproducible numbers)"
        )
    table = load_table(model.latency_table)
    if table.machine is None and table.source == "the config":
        return "waiting: from the latency table given in the config (the same on any machine)"
    when = f", {table.measured[:10]}" if table.measured else ""
    return (
        f"waiting: from the latency table {table.source} (measured on "
        f"{machine_text(table.machine)}{when}; the same on any machine)"
    )


def check_latency_table(model: TimeModel, models: list[str], where: str) -> None:
    """Check a run's latency table before the run, not when its tables are made.

    Args:
        model: The run's time model.
        models: The run's model labels.
        where: Where the time model comes from, named in the message.

    Raises:
        UserError: (one line, naming ``where``'s ``time_model.latency_table``) unless
            ``model`` waits as measured, or its latency table (a file: read now) has a latency
            for each of ``models``; a missing file, a file that is no latency table
            (``/etc/passwd``) and an inline table for other models are refused, so that no
            run spends its hours before its tables fail.
    """
    if model.waiting != "table":
        return
    try:
        table = load_table(model.latency_table)
    except UserError as error:
        raise UserError(f"{where}: {error}") from None
    missing = sorted(set(models) - set(table.models))
    if missing:
        raise UserError(
            f"{where}: time_model.latency_table ({table.source}) has no latency "
            f"for the model(s) {', '.join(missing)}; it has "
            f"{', '.join(sorted(table.models)) or 'none'} (models go by their label)"
        )
