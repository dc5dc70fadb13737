"""Where a run is: executed work units, the current case and model, and a cost-weighted ETA.

On a terminal this is a tqdm bar; anywhere else (``nohup``, a SLURM log, a pipe) one line
every ``interval`` seconds, also while one long (case, model) group runs (a heartbeat thread
prints it), and a last one at the end, so a log shows progress too. After the last unit is
handed on, the lines say what is being finished (the last metrics, the results files).

The ETA weights the remaining work by what it costs: each model's measured seconds per work
unit (a unit is one case x prompter x refiner x seed for that model) times its remaining
units; models not measured yet count at the mean of those measured. A fast classical model and
a slow network in one run no longer give an ETA that assumes every unit costs the average.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from intrabench.engine.plan import WorkUnit


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h04m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class RunProgress:
    """Progress over ``units`` (the units this run executes), reported on ``stream``.

    The runner calls :meth:`start_group` and :meth:`finish_group` around each (case, model)
    group, :meth:`failed` per failed unit, and :meth:`close` at the end. ``terminal``: draw a
    bar (default: whether ``stream`` is a terminal); ``interval``: seconds between lines
    otherwise.
    """

    def __init__(self, units: list[WorkUnit], stream: TextIO | None = None,
                 interval: float = 30.0, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.total = len(units)
        self.remaining: Counter[str] = Counter(u.model.key for u in units)
        self.seconds: dict[str, float] = defaultdict(float)
        self.measured: Counter[str] = Counter()
        self.done = 0
        self.failures = 0
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self._last_line = -float("inf")
        self._reported = -1  # units done at the last line
        self._where = ""
        self.terminal = (terminal if terminal is not None
                         else bool(getattr(self.stream, "isatty", lambda: False)()))
        self._bar = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        if not self.terminal and self.total and heartbeat and interval > 0:
            threading.Thread(target=self._beat, name="intrabench-progress", daemon=True).start()
        if self.terminal and self.total:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, unit="unit", dynamic_ncols=True, file=self.stream,
                             bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")

    def eta(self) -> float | None:
        """Seconds left: remaining units x their model's seconds per unit (None before any
        unit was measured)."""
        rates = {model: self.seconds[model] / count for model, count in self.measured.items()
                 if count}
        if not rates:
            return None
        fallback = sum(rates.values()) / len(rates)
        return sum(count * rates.get(model, fallback) for model, count in self.remaining.items())

    def start_group(self, units: list[WorkUnit]) -> None:
        self._where = f"{units[0].case_id} | {units[0].model.key}"
        if self._bar is not None:
            self._bar.set_description(self._where)

    def finish_group(self, units: list[WorkUnit], seconds: float) -> None:
        model = units[0].model.key
        self.seconds[model] += seconds
        self.measured[model] += len(units)
        self.remaining[model] -= len(units)
        self.done += len(units)
        if self._bar is not None:
            eta = self.eta()
            self._bar.set_postfix_str("" if eta is None else f"ETA {format_seconds(eta)}",
                                      refresh=False)
            self._bar.update(len(units))
        elif self.clock() - self._last_line >= self.interval:
            self._line()

    def failed(self, count: int = 1) -> None:
        self.failures += count

    def finishing(self, what: str) -> None:
        """Every unit is handed on; ``what`` is being finished (said now, and by the lines that
        follow until :meth:`close`)."""
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
        eta = self.eta()
        share = self.done / self.total if self.total else 1.0
        parts = [f"{self.done}/{self.total} units ({share:.0%})", self._where,
                 f"{format_seconds(elapsed)} elapsed"]
        if eta is not None and self.done < self.total:
            parts.append(f"ETA {format_seconds(eta)}")
        if self.failures:
            parts.append(f"{self.failures} failed")
        print("intrabench: " + " | ".join(p for p in parts if p), file=self.stream, flush=True)

    def write(self, message: str) -> None:
        """A message that does not break the bar."""
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        self._closed.set()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.total and self._reported != self.done:
            self._line()
