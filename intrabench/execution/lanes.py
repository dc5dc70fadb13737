"""A bounded background lane for the CPU work that does not feed the next model call.

The episode loop is sequential: a prompt needs the previous prediction, a prediction needs the
prompt. Everything computed *from* a finished episode (metrics, result rows, prediction files,
unit files) is not, so the runner hands it to a lane and goes on with the next forward pass.

Modes:

* ``"process"``: one worker subprocess (see :mod:`intrabench.execution.subprocess_worker`), so the
  model loop keeps the GIL to itself: a thread would not do here, as SciPy's distance
  transforms and Python-level row building hold the GIL and measurably slowed the demo's
  models (see docs/performance.md). Jobs must be module-level functions with picklable
  arguments.
* ``"thread"``: one worker thread, for light jobs that mostly wait (reading files).
* ``"inline"``: every job runs at once in the caller (same results, no overlap): used to
  measure the serial cost, and inside the workers of CPU-only Dask clusters, whose cores Dask
  already fills.

Order is kept: one worker runs jobs first in, first out. Memory is bounded: :meth:`Lane.submit`
blocks while ``max_pending`` jobs are queued or running. A job's exception is raised in the
submitting thread at the next :meth:`Lane.submit` or :meth:`Lane.drain`, never lost. The
worker process ignores Ctrl-C, so an interrupted run still finishes (writes) what it queued.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from intrabench.execution.subprocess_worker import SubprocessExecutor

T = TypeVar("T")
LaneMode = Literal["process", "thread", "inline"]


class Lane:
    """One background worker (process or thread) with at most ``max_pending`` unfinished jobs.

    ``preload``: modules a worker process imports as soon as it starts. With
    ``raise_failures=False`` failed jobs are only reported through their futures (for callers
    that check every result themselves). ``niceness``: a worker process's added Unix
    niceness, for work that can wait while the model loop needs the CPU. ``restarts``: a
    worker process that died is replaced at the next job (see
    :class:`~intrabench.execution.subprocess_worker.SubprocessExecutor`).
    """

    def __init__(
        self,
        mode: LaneMode = "process",
        max_pending: int = 4,
        name: str = "intrabench-lane",
        preload: tuple[str, ...] = (),
        raise_failures: bool = True,
        niceness: int = 0,
        restarts: bool = False,
    ) -> None:
        if mode not in ("process", "thread", "inline"):
            raise ValueError(f"unknown lane mode '{mode}' (process, thread, inline)")
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.mode = mode
        self._name = name
        self._preload = preload
        self._raise = raise_failures
        self._niceness = niceness
        self._restarts = restarts
        self._slots = threading.BoundedSemaphore(max_pending)
        self._unfinished = 0  # jobs submitted and not finished (whatever raise_failures says)
        self._counting = threading.Lock()
        self._executor: Executor | None = None
        self._futures: list[Future] = []
        self._started: Future | None = None

    def start(self) -> None:
        """Start the worker now (a subprocess takes about a second to import its modules),
        so that it is ready when the first job comes."""
        if self.mode != "inline" and self._started is None:
            # jobs run in order, after the preloaded imports: this one is done once they are
            self._started = self._start().submit(int)

    def ready(self) -> bool:
        """Whether a job submitted now would start without waiting for the worker's start-up
        (always true inline; false before :meth:`start`). A worker that died while starting
        counts as ready: the next job reports why it is gone.

        Returns:
            True when a job would start at once.
        """
        if self.mode == "inline":
            return True
        return self._started is not None and self._started.done()

    def _start(self) -> Executor:
        if self._executor is None:
            if self.mode == "process":
                self._executor = SubprocessExecutor(
                    self._preload, self._niceness, restarts=self._restarts
                )
            else:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        return self._executor

    def submit(self, fn: Callable[..., T], *args: Any) -> Future:
        """Queue ``fn(*args)``; blocks while the lane is full. Returns its future.

        Inline, the job runs here, now. An earlier job's failure is raised first (unless the
        lane was made with ``raise_failures=False``).

        Args:
            fn: The job; picklable for a process lane.
            *args: Its arguments (pickled for a process lane).

        Returns:
            The job's future.
        """
        self._raise_failures()
        if self.mode == "inline":
            future: Future = Future()
            try:
                future.set_result(fn(*args))
            except Exception as error:
                if self._raise:
                    raise
                future.set_exception(error)
            return future
        executor = self._start()
        self._slots.acquire()
        with self._counting:
            self._unfinished += 1
        try:
            future = executor.submit(fn, *args)
        except BaseException:
            self._finished()
            raise
        future.add_done_callback(lambda _: self._finished())
        if self._raise:
            self._futures.append(future)
        return future

    def _finished(self) -> None:
        with self._counting:
            self._unfinished -= 1
        self._slots.release()

    def load(self) -> int:
        """Jobs submitted and not finished yet."""
        return self._unfinished

    def drain(self) -> None:
        """Wait for every queued job; raise the first failure."""
        try:
            for future in self._futures:
                future.result()
        finally:
            self._futures = [f for f in self._futures if not f.done()]

    def close(self) -> None:
        """Finish the queued jobs (even after Ctrl-C: they hold finished work), then stop the
        worker. Failures are not raised here; call :meth:`drain` first for those."""
        for future in self._futures:
            future.exception()  # waits; the outcome was or will be reported by drain()
        if self._executor is not None:
            # the queue is empty: no need to wait for the worker's interpreter to exit
            self._executor.shutdown(wait=False)
            self._executor = None
        self._futures.clear()
        self._started = None

    def _raise_failures(self) -> None:
        for future in self._futures:
            if future.done() and future.exception() is not None:
                self._futures.remove(future)
                raise future.exception()  # type: ignore[misc]
        self._futures = [f for f in self._futures if not f.done()]


class LanePool:
    """``size`` lanes of one kind (one when inline); each job goes to the least loaded.

    For jobs whose order does not matter (each finished unit is written on its own); a job
    that must follow all others (consolidation) is submitted after :meth:`drain` to
    :attr:`first`. Failures are raised like a :class:`Lane`'s.
    """

    def __init__(
        self,
        size: int,
        mode: LaneMode = "process",
        max_pending: int = 4,
        name: str = "intrabench-lane",
        preload: tuple[str, ...] = (),
        niceness: int = 0,
        raise_failures: bool = True,
        restarts: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError("a lane pool needs at least one lane")
        count = 1 if mode == "inline" else size
        self.lanes = [
            Lane(
                mode,
                max_pending,
                name,
                preload,
                raise_failures=raise_failures,
                niceness=niceness,
                restarts=restarts,
            )
            for _ in range(count)
        ]
        self.mode = mode

    @property
    def first(self) -> Lane:
        """The first lane, for jobs that must follow all others (after :meth:`drain`)."""
        return self.lanes[0]

    def __len__(self) -> int:
        return len(self.lanes)

    def start(self) -> None:
        """Start every lane's worker now, so that it is ready for the first job."""
        for lane in self.lanes:
            lane.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future:
        """Queue ``fn(*args)`` on the least loaded lane (the first of equals); its future.

        Args:
            fn: The job, as :meth:`Lane.submit` takes it.
            *args: Its arguments.

        Returns:
            The job's future.
        """
        lane = min(self.lanes, key=Lane.load)  # the first of the least loaded: stable
        return lane.submit(fn, *args)

    def drain(self) -> None:
        """Wait for every lane's queued jobs; raise the first failure."""
        for lane in self.lanes:
            lane.drain()

    def close(self) -> None:
        """Finish every lane's queued jobs and stop the workers (failures are not raised here)."""
        for lane in self.lanes:
            lane.close()
