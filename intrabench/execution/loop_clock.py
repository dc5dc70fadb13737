"""Where the model loop's time goes: seconds per named phase, for the idle GPU's "why".

The model loop is the one process that calls the network. Whatever it does besides forward
passes (building a target's mask, packing a prediction for a user worker, cropping a finished
episode for the metrics, waiting for a simulated user's answer or for a case being read) is
time the accelerator waits. :class:`LoopClock` adds up the loop's wall time by phase, so a run
on a card says which of these holds it back instead of leaving "between forward passes" as one
number.

Phases nest: a phase entered inside another takes its time out of the outer one (each second is
counted once, in the innermost phase open at that moment), so the phases add up to at most the
loop's wall time; what no phase covers is :attr:`LoopClock.untracked`. Seconds are
``time.perf_counter`` wall time of the calling thread's work; the clock is for one thread (the
model loop) and is not locked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: the phases the engine names, in the order a report lists them (others are listed after)
PHASES = (
    "forward passes",
    "waiting for simulated users",
    "simulated user here",
    "sending to user workers",
    "starting episodes",
    "handing episodes to the metrics",
    "model set_case",
    "building models",
    "waiting for cases",
    "waiting for results workers",
)


class LoopClock:
    """Seconds and entries per phase of one thread's work (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.seconds: dict[str, float] = {}
        self.entries: dict[str, int] = {}
        self._open: list[str] = []
        self._since = 0.0
        self._started: float | None = None
        self._stopped: float | None = None

    def start(self) -> None:
        """The loop begins: :attr:`wall` counts from here (the first phase starts it too)."""
        if self._started is None:
            self._started = self._clock()
        self._stopped = None

    def stop(self) -> None:
        """The loop ends: :attr:`wall` counts up to here."""
        self._stopped = self._clock()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the time inside the ``with`` block as ``name`` (less any inner phases').

        Args:
            name: The phase, one of :data:`PHASES` or another name (listed after them).

        Returns:
            A context manager; entering it counts one entry of ``name``.
        """
        now = self._clock()
        if self._started is None:
            self._started = now
        self._charge(now)
        self._open.append(name)
        self.entries[name] = self.entries.get(name, 0) + 1
        try:
            yield
        finally:
            self._charge(self._clock())
            self._open.pop()

    def _charge(self, now: float) -> None:
        if self._open:
            name = self._open[-1]
            self.seconds[name] = self.seconds.get(name, 0.0) + (now - self._since)
        self._since = now

    @property
    def wall(self) -> float:
        """Seconds from :meth:`start` (or the first phase) to :meth:`stop` (or now)."""
        if self._started is None:
            return 0.0
        end = self._stopped if self._stopped is not None else self._clock()
        return end - self._started

    @property
    def untracked(self) -> float:
        """Seconds of :attr:`wall` in no phase (the loop's own bookkeeping)."""
        return max(0.0, self.wall - sum(self.seconds.values()))

    def summary(self) -> dict[str, dict[str, float]]:
        """``{phase: {"seconds": s, "entries": n}}`` in :data:`PHASES` order, then the others,
        then ``"untracked"`` (no entries); JSON-ready.

        Returns:
            Phase name to its seconds (wall, rounded to the microsecond) and entries.
        """
        order = [name for name in PHASES if name in self.seconds]
        order += sorted(name for name in self.seconds if name not in PHASES)
        table = {
            name: {"seconds": round(self.seconds[name], 6), "entries": self.entries.get(name, 0)}
            for name in order
        }
        table["untracked"] = {"seconds": round(self.untracked, 6), "entries": 0}
        return table

    def lines(self) -> list[str]:
        """The summary as aligned text lines: phase, seconds, share of the wall time, entries.

        Returns:
            ``model loop: <wall> s``, then one line per phase of :meth:`summary`.
        """
        wall = self.wall
        out = [f"model loop: {wall:.2f} s"]
        for name, row in self.summary().items():
            share = row["seconds"] / wall if wall > 0 else 0.0
            count = f"{row['entries']:7d} x" if row["entries"] else ""
            out.append(f"  {name:34s} {row['seconds']:9.2f} s {share:7.1%} {count}")
        return out
