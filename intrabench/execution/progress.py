"""Where a run is: executed work units, the current case and model, and a cost-weighted ETA.

On a terminal this is a tqdm bar; anywhere else (``nohup``, a SLURM log, a pipe) one line
every ``interval`` seconds, also while one long (case, model) group runs (a heartbeat thread
prints it), and a last one at the end, so a log shows progress too. After the last unit is
handed on, the lines say what is being finished (the last metrics, the results files).

The ETA weights the remaining work by what it costs: each (model, dataset, case)'s seconds per
work unit (a unit is one case x prompter x refiner x seed for that model) times its remaining
units, the rates measured in this run or recorded by earlier runs on this machine
(:mod:`intrabench.execution.eta`), plus the build of every model with work left that is not in
memory; less the time the running group has already taken. A model with no rate yet is not
guessed at: the line says ``ETA 40s + 2 models not timed yet``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from intrabench.engine.plan import WorkUnit
    from intrabench.execution.eta import UnitCosts


def work_keys(units: list[WorkUnit]) -> dict[str, str]:
    """Per model, the name its costs are kept under: ``model[digest]``, the digest of the
    work each of its units does (prompter, refiner, steps, click strategy). A unit of the
    demo's prompters costs other than one of seven robot scribbles: a record is used only by
    runs that give the model the same mix of work.

    Args:
        units: The work units of the run (or of the part whose costs are kept).

    Returns:
        For each model key among ``units``, its work key ``"<model>[<8 hex digits>]"``: the
        first 8 hex digits of the SHA-256 of its units' sorted (prompter, refiner, steps,
        click group) kinds.
    """
    import hashlib
    import json
    from collections import defaultdict

    work: dict[str, set] = defaultdict(set)
    for unit in units:
        work[unit.model.key].add(
            (unit.prompter.key, unit.refiner_key, int(unit.steps), unit.click_group or "")
        )
    return {
        model: f"{model}[{hashlib.sha256(json.dumps(sorted(kinds)).encode()).hexdigest()[:8]}]"
        for model, kinds in work.items()
    }


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h04m``; beyond 999 hours ``>999h``, not a number ``?``.

    Args:
        seconds: A duration in seconds; rounded to whole seconds, negative ones shown as 0.

    Returns:
        The duration in at most two units: seconds under a minute, minutes and zero-padded
        seconds under an hour, else hours and zero-padded minutes.
    """
    if not math.isfinite(seconds) or seconds >= 999 * 3600:
        return ">999h" if seconds == seconds else "?"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class RunProgress:
    """Progress over ``units`` (the units this run executes), reported on ``stream``.

    The runner calls :meth:`start_group` and :meth:`finish_group` around each (case, model)
    group, :meth:`failed` per failed unit, and :meth:`close` at the end.

    Args:
        units: The work units this run executes (those already done on a resume left out).
        stream: Where the bar or the lines go; None: ``sys.stderr``.
        interval: Seconds between lines off a terminal (a heartbeat thread prints them also
            while a group runs); 0: a line after each group only.
        terminal: Draw a tqdm bar; None: whether ``stream`` is a terminal.
        clock: The clock in seconds (``time.monotonic``; tests give a fake one).
        heartbeat: Start the heartbeat thread off a terminal.
        costs: The seconds per unit to estimate with; None: this machine's record
            (:func:`~intrabench.execution.eta.read_record`).
        remember: Add the rates measured in this run to the machine's record at
            :meth:`close`; None: when the record was read here (``costs`` is None).
    """

    def __init__(
        self,
        units: list[WorkUnit],
        stream: TextIO | None = None,
        interval: float = 30.0,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
        costs: UnitCosts | None = None,
        remember: bool | None = None,
    ) -> None:
        from intrabench.execution.eta import UnitCosts, read_record

        self.stream = stream or sys.stderr
        self.total = len(units)
        self._work = work_keys(units)
        self.remaining: Counter[tuple[str, str, str]] = Counter(map(self._key, units))
        #: seconds per unit per (model, dataset); ``remember``: add them to the machine's
        #: record at :meth:`close` (default: when the record was read, i.e. no ``costs``)
        self.costs = costs if costs is not None else UnitCosts(read_record())
        self.remember = costs is None if remember is None else remember
        #: the running group: its units per (model, dataset, case), and when it started
        self._running: tuple[Counter[tuple[str, str, str]], float] | None = None
        #: the model in memory (its work key): the runner holds one at a time
        self._loaded: str | None = None
        self.done = 0
        self.failures = 0
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._last_line = -float("inf")
        self._reported = -1  # units done at the last line
        self._where = ""
        self.terminal = (
            terminal
            if terminal is not None
            else bool(getattr(self.stream, "isatty", lambda: False)())
        )
        self._bar = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        #: (seconds since the start, units done, ETA or None) at every line and bar update,
        #: for benchmarks/bench_eta.py, which checks the ETA against the real end; None
        #: while some model is not timed (the ETA then covers part of the work only)
        self.history: list[tuple[float, int, float | None]] = []
        if not self.terminal and self.total and heartbeat and interval > 0:
            threading.Thread(target=self._beat, name="intrabench-progress", daemon=True).start()
        if self.terminal and self.total:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total,
                unit="unit",
                dynamic_ncols=True,
                file=self.stream,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

    def eta(self) -> float | None:
        """Seconds left for the work whose cost is known (None while nothing is): remaining
        units x their (model, dataset, case)'s seconds per unit, plus the build of each model
        with work left that is not in memory, and the first-inference warm-up of models not
        started, the running group's share less the time it has run (:meth:`untimed` names
        the models left out).

        Returns:
            The estimate in seconds of the timed work left, or None while no model with
            work left has a rate (measured or recorded).
        """
        return self._estimate()[0]

    def untimed(self) -> list[str]:
        """The models with work left and no rate yet (measured or recorded).

        Returns:
            Their model keys (without the work digest), sorted; empty when the ETA covers
            all the work left.
        """
        return self._estimate()[1]

    def _estimate(self) -> tuple[float | None, list[str]]:
        """:meth:`eta` and :meth:`untimed` in one pass over the remaining work."""
        seconds, timed = 0.0, False
        running_keys, running_share = (self._running[0] if self._running else Counter()), 0.0
        counted = set()  # models whose one-off costs to come are in ``seconds``
        untimed = set()
        for (model, dataset, case), count in self.remaining.items():
            if count <= 0:
                continue
            rate = self.costs.rate(model, dataset, case)
            if rate is None:
                untimed.add(model.rsplit("[", 1)[0])
                continue
            timed = True
            share = count * rate
            if model not in counted:
                counted.add(model)
                one_off = 0.0 if model == self._loaded else self.costs.build(model)
                if not self.costs.started(model):
                    one_off += self.costs.warm_up(model)
                share += one_off
                if any(key[0] == model for key in running_keys):
                    running_share += one_off
            running_share += min(running_keys[(model, dataset, case)], count) * rate
            seconds += share
        if self._running is not None:
            seconds -= min(running_share, max(0.0, self.clock() - self._running[1]))
        return (seconds if timed else None), sorted(untimed)

    def _key(self, unit: WorkUnit) -> tuple[str, str, str]:
        return self._work[unit.model.key], unit.dataset.key, unit.case_id

    def start_group(self, units: list[WorkUnit]) -> None:
        """The group of ``units`` starts (its model is built first where it is not in memory:
        :meth:`model_built` says when).

        Args:
            units: The group's work units: one (dataset, case, model), at least one unit.
        """
        self._where = f"{units[0].case_id} | {units[0].model.key}"
        with self._lock:  # the heartbeat thread reads it for its lines
            self._running = (Counter(map(self._key, units)), self.clock())
        if self._bar is not None:
            self._bar.set_description(self._where)

    def case_targets(self, unit: WorkUnit, targets: int) -> None:
        """The case of ``unit`` (read for its group) has ``targets`` targets: each unit of it
        runs one episode per target, and the ETA scales its seconds per target by them.

        Args:
            unit: A unit of the case (its dataset key and case id name the case).
            targets: The number of targets the case has (``len(case.targets)``); below 1
                it is ignored.
        """
        with self._lock:
            self.costs.set_targets(unit.dataset.key, unit.case_id, targets)

    def model_built(self, units: list[WorkUnit], seconds: float) -> None:
        """The model of ``units`` was built (network, weights, exported encoder) in
        ``seconds``; it is the one in memory now. The running group's clock starts again:
        its seconds per unit leave the build out.

        Args:
            units: The group whose model was built (the first unit names the model).
            seconds: How long the build took, wall-clock seconds.
        """
        model = self._key(units[0])[0]
        with self._lock:
            self.costs.add_build(model, seconds)
            self._loaded = model
            if self._running is not None:
                self._running = (self._running[0], self.clock())

    def finish_group(self, units: list[WorkUnit], seconds: float) -> None:
        """The group of ``units`` ended after ``seconds`` (its model's build left out).

        Args:
            units: The group's work units, as given to :meth:`start_group`; each counts as
                done (failed ones too: :meth:`failed` counts those).
            seconds: The group's wall-clock seconds, without its model's build.
        """
        key = self._key(units[0])
        with self._lock:  # the heartbeat thread reads these for its lines
            self.costs.add(key[0], key[1], len(units), seconds, case=key[2])
            for unit in units:  # a group is one case's; counted unit by unit all the same
                self.remaining[self._key(unit)] -= 1
            self._running = None
            self._loaded = key[0]
            self.done += len(units)
        if self._bar is not None:
            self._bar.set_postfix_str(self._eta_text(self.clock() - self.started), refresh=False)
            self._bar.update(len(units))
        elif self.clock() - self._last_line >= self.interval:
            self._line()

    def _eta_text(self, elapsed: float) -> str:
        """``ETA 1m05s``, ``ETA 40s + 2 models not timed yet``, ``no ETA yet: 2 models not
        timed yet`` (nothing timed to count on), or "" (none known yet); the
        ETA goes to :attr:`history` at ``elapsed`` (None when it leaves a model out)."""
        eta, untimed = self._estimate()
        self.history.append((elapsed, self.done, None if untimed else eta))
        if self.done >= self.total:
            return ""
        text = "" if eta is None else f"ETA {format_seconds(eta)}"
        if untimed:
            models = f"{len(untimed)} model{'s' if len(untimed) > 1 else ''} not timed yet"
            # what is timed may be nothing yet (0 s): an ETA of 0 s is no estimate, say so
            text = (
                f"{text} + {models}" if eta is not None and eta >= 1.0 else f"no ETA yet: {models}"
            )
        return text

    def failed(self, count: int = 1) -> None:
        """Count ``count`` failed units.

        Args:
            count: How many units failed (shown as ``N failed`` on the lines).
        """
        self.failures += count

    def finishing(self, what: str) -> None:
        """Every unit is handed on; ``what`` is being finished (said now, and by the lines that
        follow until :meth:`close`).

        Args:
            what: What is being finished, shown in place of the case and model (e.g. the
                last metrics, the results files).
        """
        self._where = what
        if self._bar is not None:
            self._bar.set_description(what)
            self._bar.refresh()
        else:
            self._line()

    def _beat(self) -> None:
        """Off a terminal: a line every ``interval`` seconds even while no group finishes."""
        while not self._closed.wait(max(0.05, min(1.0, self.interval / 4))):
            # a full interval after the start or the last line (the first finished group
            # still prints at once, with the first ETA)
            if self.clock() - max(self._last_line, self.started) >= self.interval:
                self._line()

    def _line(self) -> None:
        with self._lock:
            self._write_line()

    def _write_line(self) -> None:
        self._last_line = self.clock()
        self._reported = self.done
        elapsed = self._last_line - self.started
        share = self.done / self.total if self.total else 1.0
        parts = [
            f"{self.done}/{self.total} units ({share:.0%})",
            self._where,
            f"{format_seconds(elapsed)} elapsed",
            self._eta_text(elapsed),
        ]
        if self.failures:
            parts.append(f"{self.failures} failed")
        print("intrabench: " + " | ".join(p for p in parts if p), file=self.stream, flush=True)

    def write(self, message: str) -> None:
        """A message that does not break the bar.

        Args:
            message: One line of text, printed on the progress stream (above the bar on a
                terminal).
        """
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the progress line and, when ``remember``, record the measured unit times for the
        next ETA.
        """
        self._closed.set()
        if self.remember:
            from intrabench.execution.eta import write_record

            measured = self.costs.measured()
            if measured.rates:
                write_record(measured)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.total and self._reported != self.done:
            self._line()
