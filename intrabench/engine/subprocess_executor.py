"""An executor backed by one fresh Python subprocess (``python -m intrabench.engine.subprocess_executor``).

Why not :class:`concurrent.futures.ProcessPoolExecutor`: its ``spawn`` and ``forkserver`` starts
re-import the caller's main module in the child, which re-runs any unguarded script or notebook
that drives a :class:`~intrabench.engine.runner.Runner`, and ``fork`` copies a process that may hold
CUDA contexts, OpenMP pools and other threads. A subprocess started with ``-m`` imports only
what the jobs need.

Protocol: length-prefixed pickles. ``(job_id, spool_path, payload)`` go to the child's stdin,
where the payload is the pickled ``(fn, args, kwargs)``, or empty when it was written to a
spool file (payloads over 16 KiB: a pipe holds 64 KiB, and a parent blocked on a full pipe
would wait for the child's current job); ``(job_id, ok, spool_path, payload)`` come back on
its stdout, the payload being the pickled result or exception (spooled the same way). The
child reads its stdin in a thread, runs jobs one at a time in arrival order and ignores
SIGINT, so after a Ctrl-C the parent can still let it finish (write) what was queued. ``fn`` must be importable by name (a module-level function).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, BinaryIO

_HEADER = struct.Struct("!Q")
#: jobs pickled larger than this travel through a spool file instead of the pipe
_INLINE_LIMIT = 16 * 1024


def _send(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)  # one write: one system call
    stream.flush()


def _receive_bytes(stream: BinaryIO) -> bytes:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return payload


def _receive(stream: BinaryIO) -> Any:
    return pickle.loads(_receive_bytes(stream))


class WorkerDied(RuntimeError):
    """The worker subprocess ended before answering (killed, out of memory, crashed)."""


class SubprocessExecutor(Executor):
    """Runs submitted jobs, in order, in one Python subprocess started on first use."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        """``preload``: modules the worker imports as soon as it starts (those of the jobs)."""
        self._preload = tuple(preload)
        self._process: subprocess.Popen | None = None
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()  # guards _pending, _next_id and the start
        self._send_lock = threading.Lock()  # one writer on the pipe at a time
        self._next_id = 0
        self._reader: threading.Thread | None = None
        self._spool: str | None = None

    def _spool_dir(self) -> str:
        if self._spool is None:
            self._spool = tempfile.mkdtemp(prefix="intrabench-jobs-")
        return self._spool

    def start(self) -> None:
        """Start the worker subprocess now instead of at the first job."""
        with self._lock:
            self._start()

    def _start(self) -> subprocess.Popen:
        if self._process is None:
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            self._process = subprocess.Popen(
                [sys.executable, "-m", "intrabench.engine.subprocess_executor", *self._preload],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
            self._reader = threading.Thread(target=self._read_answers, daemon=True,
                                            name="intrabench-subprocess-answers")
            self._reader.start()
        return self._process

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            process = self._start()
            job_id = self._next_id
            self._next_id += 1
            self._pending[job_id] = future
        payload = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        spooled: str | None = None
        if len(payload) > _INLINE_LIMIT:  # a pipe holds 64 KiB: a file never waits for the child
            spooled = os.path.join(self._spool_dir(), f"{job_id}.pickle")
            with open(spooled, "wb") as handle:
                handle.write(payload)
            payload = b""
        with self._send_lock:
            try:
                _send(process.stdin, (job_id, spooled, payload))  # type: ignore[arg-type]
            except (BrokenPipeError, OSError, ValueError) as error:
                with self._lock:
                    self._fail_pending(WorkerDied(_ended(process) if process.poll() is not None
                                                  or _exits_soon(process)
                                                  else f"cannot reach the worker: {error}"))
        return future

    def _read_answers(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        stdout = process.stdout
        while True:
            try:
                job_id, ok, spooled, payload = _receive(stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            with self._lock:
                future = self._pending.pop(job_id, None)
            try:
                if spooled is not None:
                    with open(spooled, "rb") as handle:
                        payload = handle.read()
                    os.unlink(spooled)
                value = pickle.loads(payload)
            except Exception as error:  # noqa: BLE001 - e.g. a class this process cannot import
                ok, value = False, error
            if future is None:
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        process.wait()
        with self._lock:
            self._fail_pending(WorkerDied(_ended(process)))

    def _fail_pending(self, error: BaseException) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            process = self._process
        if process is None:
            return
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(OSError):
                process.stdin.close()  # end of input: the child finishes its queue and exits
        if wait:
            process.wait()
            if self._reader is not None:
                self._reader.join()
        self._process = None
        if self._spool is not None and (wait or not self._pending):
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None


def _exits_soon(process: subprocess.Popen, seconds: float = 5.0) -> bool:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _ended(process: subprocess.Popen) -> str:
    """Why the worker is gone, for :class:`WorkerDied` (its exit status must be known)."""
    code = process.returncode
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return f"the background worker process {how} before finishing its jobs"


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    # a thread keeps reading the pipe while jobs run, so the parent never blocks on a full pipe
    jobs: queue.Queue = queue.Queue()

    def read_jobs() -> None:  # bytes only: unpickling here would wait for the GIL
        while True:
            try:
                jobs.put(_receive_bytes(stdin))
            except (EOFError, OSError):
                jobs.put(None)
                return

    threading.Thread(target=read_jobs, daemon=True).start()
    spool: list[str] = []

    def spool_dir() -> str:
        if not spool:
            spool.append(tempfile.mkdtemp(prefix="intrabench-answers-"))
        return spool[0]

    while True:
        payload = jobs.get()
        if payload is None:
            if spool:  # every answer file was read before its job counted as done
                shutil.rmtree(spool[0], ignore_errors=True)
            return
        job_id, spooled, payload = pickle.loads(payload)
        if spooled is not None:
            with open(spooled, "rb") as handle:
                payload = handle.read()
            os.unlink(spooled)
        fn, args, kwargs = pickle.loads(payload)
        try:
            ok, value = True, fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the caller
            ok, value = False, error
        try:
            answer = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            ok, answer = False, pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))
        spooled = None
        if len(answer) > _INLINE_LIMIT:  # large results (cases) through a file, as jobs
            spooled = os.path.join(spool_dir(), f"answer-{job_id}.pickle")
            with open(spooled, "wb") as handle:
                handle.write(answer)
            answer = b""
        _send(stdout, (job_id, ok, spooled, answer))


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for module in sys.argv[1:]:  # the jobs' modules, imported while the parent gets ready
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 - a job that needs it will fail and say why
            print(f"intrabench worker: cannot preload {module}: {error}", file=sys.stderr)
    # answers use the real stdout; anything the jobs print goes to stderr instead
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, answers)
