"""How long a run has left: seconds per work unit of each (model, dataset), estimated from
this run and from earlier runs on this machine.

A unit (one case x prompter x refiner x seed for a model) costs what its model and its data
make it cost: a network is slower than region growing, a 5-lesion phantom slower than a
1-lesion crop. The estimate for a (model, dataset) is, in this order:

0. **this case, measured or recorded**: cases of one dataset differ (a 5-lesion phantom
   costs 10 times a 1-lesion crop), so the record keeps each case's rate too: a case this
   model ran before on this machine costs what it cost then, scaled by the speed;
1. **measured here**: its mean seconds per unit in this run, leaving out the model's first
   group, which carries the first inference's one-off costs (lazy imports, first allocations);
   these are kept apart as the model's **warm-up** (the first group's seconds over its units at
   the steady rate) and added to the ETA while the model has not started;
2. **recorded**: the rate an earlier run on this machine measured for it
   (``unit-seconds.json`` in ``$INTRABENCH_CACHE``, default ``~/.cache/intrabench``; per
   host), scaled by this run's **speed** against the record (a busier machine, other
   threads): the geometric mean of this run's rate over the record's on the cases both
   measured (else on the datasets both measured), shrunk towards 1 as if
   :data:`SPEED_PRIOR_CASES` more cases had run at the record's speed (one case runs up to
   25% faster or slower from one run to the next on an idle machine: two cases do not make
   a trend, ten do);
3. **its first group here** (one-off costs included), or **the same model on other data
   here**: its rate on the datasets it ran, each scaled by how much dearer this dataset is
   than that one for the models that ran both (1 without any); else the model's recorded
   rates on other datasets, scaled by the speed;
4. else **not timed**: the ETA says how many models are not timed yet.

**Targets.** A unit segments every target of its case, one episode each, so it costs about
its case's number of targets times a per-target rate: a rate learnt on a 1-lesion dataset,
applied to a case of 5 organs, was 5 times short (an ETA that sat at "2m04s" for 9 minutes).
Every rate of steps 1-3 is therefore also kept per target (seconds over units x targets), and
a case's estimate is that rate times the case's targets: known once the runner has read the
case (:meth:`UnitCosts.set_targets`), or recorded by an earlier run, else the mean of its
dataset's known cases; with none known, the rate per unit as above.

**Load.** The record keeps the machine's load average while each model ran (per core), so a
dry run says what load its estimate comes from instead of calling it an idle machine's.

Building a model (its network, its weights, an exported encoder compiled) is timed apart from
its groups (:meth:`UnitCosts.add_build`): the ETA adds a model's **build** for every model with
work left that is not the one in memory (the runner holds one at a time), and its groups'
seconds per unit leave it out.

A "model" here is the model with the mix of work its units do in the run
(:func:`intrabench.execution.progress.work_keys`: ``litemedsam[1a2b3c4d]``): a unit of three
prompters without refinement costs other than one of seven robot scribbles, so a record is
used only by runs that give the model the same work. Every run with progress adds what it
measured to the record, so the first run of a model on
a machine has an ETA only for what it has timed, and later ones have one from the start.
``benchmarks/bench_eta.py`` measures the ETA's error on the demos.
"""

from __future__ import annotations

import json
import logging
import math
import platform
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (model key, dataset key)
CaseKey = tuple[str, str, str]  # (model key, dataset key, case id)
DataKey = tuple[str, str]  # (dataset key, case id)

#: the most targets a case may have in the record (a larger count is a damaged record)
MAX_RECORDED_TARGETS = 10_000_000


def record_path() -> Path:
    """``$INTRABENCH_CACHE/unit-seconds.json`` (default ``~/.cache/intrabench``).

    Returns:
        The record file's path (the file may not exist yet); one file holds every host's
        entry, keyed by host name.
    """
    from intrabench.io.cache import cache_root

    return cache_root() / "unit-seconds.json"


#: the longest a work unit, a warm-up or a build may plausibly take (a week), and the shortest
#: (a microsecond: 5e-324 made the speeds overflow); a record's value outside is ignored
MAX_RECORDED_SECONDS = 7 * 24 * 3600.0
MIN_RECORDED_SECONDS = 1e-6


def _seconds(value: object) -> float | None:
    """A recorded number of seconds when it is plausible, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    plausible = MIN_RECORDED_SECONDS <= number <= MAX_RECORDED_SECONDS  # False for NaN too
    return number if plausible else None


def read_record(path: Path | None = None) -> Record:
    """This host's record (empty when there is none, or it is unreadable). A record is input:
    values that are not plausible seconds (NaN, Infinity, 1e308, 5e-324, negative, text,
    lists) and entries of the wrong shape are left out, with one line in the log; a 0 (what
    the record holds for a warm-up or build too short to measure) is left out silently; an
    unreadable file (bad JSON, nesting too deep) is no record.

    Args:
        path: The record file; None: :func:`record_path`.

    Returns:
        The entry of this host (``platform.node()``) as a :class:`Record`, seconds as
        floats; an empty one where the file or the host's entry is missing or unreadable.
    """
    record = Record()
    path = path or record_path()
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return record
    except (OSError, ValueError, RecursionError) as error:
        log.warning(
            "the ETA's record %s is unreadable (%s); it is ignored and rewritten",
            path,
            type(error).__name__,
        )
        return record
    host = stored.get(platform.node()) if isinstance(stored, dict) else None
    ignored = 0

    def mapping(value: object) -> dict:
        nonlocal ignored
        if isinstance(value, dict):
            return value
        ignored += value is not None
        return {}

    def keep(target: dict, key: object, value: object) -> None:
        nonlocal ignored
        seconds = _seconds(value)
        if seconds is not None:
            target[key] = seconds
        elif not (isinstance(value, (int, float)) and value == 0):  # 0: none measured
            ignored += 1

    host = mapping(host)
    for dataset, cases in mapping(host.get(TARGETS_KEY)).items():
        for case, count in mapping(cases).items():
            if (
                not isinstance(count, bool)
                and isinstance(count, int)
                and 1 <= count <= MAX_RECORDED_TARGETS
            ):
                record.targets[(str(dataset), str(case))] = count
            else:
                ignored += 1
    for model, entry in host.items():
        if model == TARGETS_KEY:
            continue
        entry = mapping(entry)
        for dataset, rate in mapping(entry.get("seconds_per_unit")).items():
            keep(record.rates, (model, dataset), rate)
        for dataset, rate in mapping(entry.get("seconds_per_target")).items():
            keep(record.target_rates, (model, dataset), rate)
        load = entry.get("load_per_core")
        if not isinstance(load, bool) and isinstance(load, (int, float)) and 0 <= load <= 1e4:
            record.loads[model] = float(load)
        elif load is not None:
            ignored += 1
        for dataset, cases in mapping(entry.get("cases")).items():
            for case, rate in mapping(cases).items():
                keep(record.case_rates, (model, dataset, case), rate)
        for field_name, target in (
            ("warm_up_seconds", record.warm_up),
            ("build_seconds", record.builds),
        ):
            if field_name in entry:
                keep(target, model, entry[field_name])
    if ignored:
        log.warning(
            "the ETA's record %s holds %d value(s) that are not plausible seconds or "
            "entries of the wrong shape; they are ignored",
            path,
            ignored,
        )
    return record


def write_record(measured: Record, path: Path | None = None) -> None:
    """Adds ``measured`` to this host's record (what was measured now replaces the older).

    The file is rewritten atomically, other hosts' entries kept (an unreadable file starts
    afresh); entries of the wrong shape are replaced. A file that cannot be written (a read-only home) is left as it is.

    Args:
        measured: What this run measured (:meth:`UnitCosts.measured`); rates are stored
            rounded to microseconds, warm-ups and builds to milliseconds.
        path: The record file; None: :func:`record_path`.
    """
    from intrabench.io.results import atomic_write_text

    path = path or record_path()
    try:
        stored = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(stored, dict):
            stored = {}
    except (OSError, ValueError, RecursionError):
        stored = {}
    if not isinstance(stored.get(platform.node()), dict):
        stored[platform.node()] = {}
    host = stored[platform.node()]
    if not isinstance(host.get(TARGETS_KEY), dict):
        host[TARGETS_KEY] = {}
    for (dataset, case), count in measured.targets.items():
        if not isinstance(host[TARGETS_KEY].get(dataset), dict):
            host[TARGETS_KEY][dataset] = {}
        host[TARGETS_KEY][dataset][case] = int(count)
    for model in (
        {k[0] for k in measured.rates}
        | {k[0] for k in measured.case_rates}
        | set(measured.warm_up)
        | set(measured.builds)
        | set(measured.loads)
    ):
        if not isinstance(host.get(model), dict):
            host[model] = {}
        for name in ("seconds_per_unit", "seconds_per_target", "cases"):
            if name in host[model] and not isinstance(host[model][name], dict):
                host[model][name] = {}
    for (model, dataset), rate in measured.rates.items():
        host.setdefault(model, {}).setdefault("seconds_per_unit", {})[dataset] = round(rate, 6)
    for (model, dataset), rate in measured.target_rates.items():
        host.setdefault(model, {}).setdefault("seconds_per_target", {})[dataset] = round(rate, 6)
    for model, load in measured.loads.items():
        host.setdefault(model, {})["load_per_core"] = round(load, 3)
    for (model, dataset, case), rate in measured.case_rates.items():
        cases = host.setdefault(model, {}).setdefault("cases", {})
        if not isinstance(cases.get(dataset), dict):
            cases[dataset] = {}
        cases[dataset][case] = round(rate, 6)
    for model, seconds in measured.warm_up.items():
        host.setdefault(model, {})["warm_up_seconds"] = round(seconds, 3)
    for model, seconds in measured.builds.items():
        host.setdefault(model, {})["build_seconds"] = round(seconds, 3)
    try:
        atomic_write_text(path, json.dumps(stored, indent=1, sort_keys=True))
    except OSError as error:  # a read-only home: the ETA just has no record next time
        log.debug("could not write %s: %s", path, error)


#: the host-level entry of the record that holds each case's number of targets (no model key
#: has this form: model keys end in a ``[digest]``)
TARGETS_KEY = "targets per case"


@dataclass
class Record:
    """Seconds per unit per (model, dataset) and per (model, dataset, case), each model's
    one-off seconds of its first inference (its first group's seconds over its steady rate),
    and the seconds to build it (network, weights, exported encoder) in a new process; the
    seconds per unit and target per (model, dataset), each case's number of targets, and each
    model's load average per core while it ran."""

    rates: dict[Key, float] = field(default_factory=dict)
    warm_up: dict[str, float] = field(default_factory=dict)
    case_rates: dict[CaseKey, float] = field(default_factory=dict)
    builds: dict[str, float] = field(default_factory=dict)
    target_rates: dict[Key, float] = field(default_factory=dict)
    targets: dict[DataKey, int] = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)


#: the speed against the record counts as this many cases measured at the record's speed
SPEED_PRIOR_CASES = 2


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else 1.0


def _load_per_core() -> float | None:
    """The machine's 1-minute load average per core now (None where the OS has none)."""
    import os

    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return None


@dataclass
class _Snapshot:
    """What :meth:`UnitCosts.rate` derives from the measurements, computed once per change:
    the rates per unit (``steady``, ``everything``) and per unit and target (``*_targets``)."""

    steady: dict[Key, float]
    everything: dict[Key, float]
    steady_cases: dict[CaseKey, float]
    speed: float
    warm_up: dict[str, float]
    steady_targets: dict[Key, float]
    everything_targets: dict[Key, float]


def _per_unit(totals: dict, index: int = 1) -> dict:
    """``{key: seconds / count}`` of ``{key: [seconds, units, target units]}`` (``index`` 1:
    per unit, 2: per unit and target), for the keys with a count."""
    return {
        key: values[0 if index == 1 else 3] / values[index]
        for key, values in totals.items()
        if values[index]
    }


class UnitCosts:
    """Seconds per unit per (model, dataset[, case]): :meth:`add` each finished group (after
    :meth:`set_targets` of its case, when known), ask :meth:`rate` (the module docstring's
    order) and :meth:`warm_up`.

    Args:
        record: What earlier runs on this machine measured (:func:`read_record`); None: an
            empty record (only this run's measurements count).
    """

    def __init__(self, record: Record | None = None) -> None:
        self.record = record or Record()
        # per key: [seconds, units, target units, seconds of the groups with known targets]
        # of every group, and of the groups after the model's first
        self._all: dict[Key, list[float]] = defaultdict(lambda: [0.0, 0, 0, 0.0])
        self._later: dict[Key, list[float]] = defaultdict(lambda: [0.0, 0, 0, 0.0])
        self._later_cases: dict[CaseKey, list[float]] = defaultdict(lambda: [0.0, 0])
        self._first: dict[str, tuple[str, int, float, int | None]] = {}  # model -> dataset,
        # units, seconds, targets of its first group
        #: per model, the seconds of its builds in this run (the first: in a fresh process)
        self._builds: dict[str, list[float]] = defaultdict(list)
        #: targets of the cases read in this run
        self._targets: dict[DataKey, int] = {}
        #: per model, the load average per core at the end of each of its groups
        self._loads: dict[str, list[float]] = defaultdict(list)
        self._snapshot: _Snapshot | None = None

    def set_targets(self, dataset: str, case: str, targets: int) -> None:
        """The case ``case`` of ``dataset`` has ``targets`` targets (one episode each per
        unit): its units' estimate scales with them.

        Args:
            dataset: The dataset key.
            case: The case id within ``dataset``.
            targets: The case's number of targets; a count below 1 is ignored.
        """
        if targets >= 1 and self._targets.get((dataset, case)) != targets:
            self._targets[(dataset, case)] = int(targets)
            self._snapshot = None

    def targets(self, dataset: str, case: str | None) -> float | None:
        """The targets of ``case``: read in this run, else recorded; else the mean of the
        known cases of ``dataset``; None when none is known.

        Args:
            dataset: The dataset key.
            case: The case id within ``dataset``; None: the dataset's mean is asked for.

        Returns:
            The number of targets (a float: a mean may be fractional), or None.
        """
        if case is not None:
            for known in (self._targets, self.record.targets):
                if (dataset, case) in known:
                    return float(known[(dataset, case)])
        counts = {
            **{k: v for k, v in self.record.targets.items() if k[0] == dataset},
            **{k: v for k, v in self._targets.items() if k[0] == dataset},
        }
        return sum(counts.values()) / len(counts) if counts else None

    def add_build(self, model: str, seconds: float) -> None:
        """``model`` was built (network, weights, exported encoder) in ``seconds``.

        Args:
            model: The model's work key (:func:`~intrabench.execution.progress.work_keys`).
            seconds: The build's wall-clock seconds; the run's first build of a model goes to
                the record (a build in a fresh process), the last one is the next estimate.
        """
        self._builds[model].append(float(seconds))

    def build(self, model: str) -> float:
        """Seconds to build ``model`` again: its last build in this run, else the record's
        (a build in a fresh process, imports included), else 0.

        Args:
            model: The model's work key.

        Returns:
            The estimated build time in seconds (0.0 where none is known).
        """
        if self._builds.get(model):
            return self._builds[model][-1]
        return self.record.builds.get(model, 0.0)

    def add(
        self, model: str, dataset: str, units: int, seconds: float, case: str | None = None
    ) -> None:
        """A finished group of ``units`` of ``model`` on ``dataset`` (its ``case``) that took
        ``seconds`` (a model's first group may include time spent before it, building it).

        A model's first group is left out of its steady rates (its one-off costs make its
        warm-up); the rates per unit and target count only the groups whose case's targets
        were set (:meth:`set_targets`) before.

        Args:
            model: The model's work key.
            dataset: The dataset key.
            units: How many work units the group ran.
            seconds: The group's wall-clock seconds.
            case: The group's case id; None: the group counts for the (model, dataset) rates
                only, not for a case's rate or the rates per target.
        """
        key = (model, dataset)
        targets = self._targets.get((dataset, case)) if case is not None else None
        totals = [self._all[key]] + ([self._later[key]] if model in self._first else [])
        for total in totals:
            total[0] += seconds
            total[1] += units
            if targets is not None:
                total[2] += units * targets
                total[3] += seconds
        if model in self._first:
            if case is not None:
                self._later_cases[(model, dataset, case)][0] += seconds
                self._later_cases[(model, dataset, case)][1] += units
        else:
            self._first[model] = (dataset, units, seconds, targets)
        if (load := _load_per_core()) is not None:
            self._loads[model].append(load)
        self._snapshot = None

    def started(self, model: str) -> bool:
        """Whether a unit of ``model`` has started (its build is then behind it).

        Args:
            model: The model's work key.

        Returns:
            True once a group of ``model`` was added (:meth:`add`) in this run.
        """
        return model in self._first

    def steady(self) -> dict[Key, float]:
        """Rates measured here without a model's first group (known once another ran).

        Returns:
            Seconds per unit by (model work key, dataset key), for the pairs with a group
            after their model's first.
        """
        return _per_unit(self._later)

    def measured(self) -> Record:
        """What this run measured, as the record keeps it: steady rates, else (a model that
        ran one group on a dataset) the rate with its first group, per unit and per unit and
        target; the cases' steady rates (not the first group's case: its one-off costs are
        in it); the warm-ups known; the cases' targets; the models' mean load per core.

        Returns:
            A new :class:`Record` of this run's measurements only (the record read at the
            start is not in it); builds are each model's first in this run.
        """
        steady, steady_targets = self.steady(), _per_unit(self._later, 2)
        rates = {**_per_unit(self._all), **steady}
        target_rates = {**_per_unit(self._all, 2), **steady_targets}
        cases = {
            key: seconds / units for key, (seconds, units) in self._later_cases.items() if units
        }
        # a model's warm-up: its first group's seconds over its units at the steady rate
        # (per target where its targets and a per-target rate are known)
        warm_up = {}
        for model, (dataset, units, seconds, targets) in self._first.items():
            if targets is not None and (model, dataset) in steady_targets:
                warm_up[model] = max(
                    0.0, seconds - units * targets * steady_targets[(model, dataset)]
                )
            elif (model, dataset) in steady:
                warm_up[model] = max(0.0, seconds - units * steady[(model, dataset)])
        builds = {model: seconds[0] for model, seconds in self._builds.items() if seconds}
        loads = {
            model: sum(values) / len(values) for model, values in self._loads.items() if values
        }
        return Record(rates, warm_up, cases, builds, target_rates, dict(self._targets), loads)

    def warm_up(self, model: str) -> float:
        """One-off seconds of ``model`` before it runs at its rate: measured, else recorded.

        Args:
            model: The model's work key.

        Returns:
            Its first group's seconds beyond its steady rate (at least 0.0) where measured,
            else the record's, else 0.0.
        """
        measured = self._derived().warm_up
        return measured[model] if model in measured else self.record.warm_up.get(model, 0.0)

    def _derived(self) -> _Snapshot:
        if self._snapshot is None:
            measured = self.measured()
            steady = self.steady()
            ratios = [
                rate / self.record.case_rates[key]
                for key, rate in measured.case_rates.items()
                if key in self.record.case_rates
            ]
            if not ratios:
                ratios = [
                    rate / self.record.rates[key]
                    for key, rate in steady.items()
                    if key in self.record.rates
                ]
            # shrunk towards 1 while few cases are compared: one case runs 20% faster or
            # slower from one run to the next on an idle machine, a busy machine throughout
            speed = _geometric_mean(ratios) ** (len(ratios) / (len(ratios) + SPEED_PRIOR_CASES))
            self._snapshot = _Snapshot(
                steady,
                measured.rates,
                measured.case_rates,
                speed,
                measured.warm_up,
                _per_unit(self._later, 2),
                measured.target_rates,
            )
        return self._snapshot

    def rate(self, model: str, dataset: str, case: str | None = None) -> float | None:
        """Seconds per unit of ``model`` on ``dataset`` (on ``case`` when given), or None:
        the module docstring's order; in steps 1-3 the rate per target times the case's
        targets where both are known.

        Args:
            model: The model's work key.
            dataset: The dataset key.
            case: The case id within ``dataset``; None: the (model, dataset) rate, scaled by
                the dataset's mean targets where known.

        Returns:
            The estimated seconds per work unit (recorded rates scaled by this run's speed
            against the record), or None where the model is not timed yet.
        """
        known = self._derived()
        if case is not None:
            if (model, dataset, case) in known.steady_cases:
                return known.steady_cases[(model, dataset, case)]
            if (model, dataset, case) in self.record.case_rates:
                return self.record.case_rates[(model, dataset, case)] * known.speed
        targets = self.targets(dataset, case)
        key = (model, dataset)
        for per_unit, per_target, speed in (
            (known.steady, known.steady_targets, 1.0),
            (self.record.rates, self.record.target_rates, known.speed),
            (known.everything, known.everything_targets, 1.0),
        ):  # first group: one-off
            if targets is not None and key in per_target:  # costs included
                return per_target[key] * targets * speed
            if key in per_unit:
                return per_unit[key] * speed
        if targets is not None:
            own = {d: r for (m, d), r in known.everything_targets.items() if m == model}
            if own:
                return (
                    targets
                    * sum(
                        r * self._dataset_factor(known.everything_targets, dataset, d)
                        for d, r in own.items()
                    )
                    / len(own)
                )
        own = {d: r for (m, d), r in known.everything.items() if m == model}
        if own:
            return sum(
                r * self._dataset_factor(known.everything, dataset, d) for d, r in own.items()
            ) / len(own)
        recorded = [r for (m, _d), r in self.record.target_rates.items() if m == model]
        if targets is not None and recorded:
            return targets * sum(recorded) / len(recorded) * known.speed
        recorded = [r for (m, _d), r in self.record.rates.items() if m == model]
        if recorded:
            return sum(recorded) / len(recorded) * known.speed
        return None

    def recorded_load(self, models: list[str]) -> float | None:
        """The highest load average per core the record holds for ``models`` (the load its
        rates were measured at), None when it holds none.

        Args:
            models: Model work keys, e.g. those of a planned run.

        Returns:
            The 1-minute load average over the core count, the highest of ``models``', or
            None.
        """
        loads = [self.record.loads[m] for m in models if m in self.record.loads]
        return max(loads) if loads else None

    @staticmethod
    def _dataset_factor(measured: dict[Key, float], dataset: str, other: str) -> float:
        """How much dearer a unit of ``dataset`` is than one of ``other``, for the models
        measured on both (geometric mean; 1 without any)."""
        return _geometric_mean(
            [
                measured[(m, dataset)] / rate
                for (m, d), rate in measured.items()
                if d == other and (m, dataset) in measured and rate > 0
            ]
        )
