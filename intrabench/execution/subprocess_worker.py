"""An executor backed by one fresh Python subprocess (``python -m intrabench.execution.subprocess_worker``).

Why not :class:`concurrent.futures.ProcessPoolExecutor`: its ``spawn`` and ``forkserver`` starts
re-import the caller's main module in the child, which re-runs any unguarded script or notebook
that drives a :class:`~intrabench.execution.runner.Runner`, and ``fork`` copies a process that may hold
CUDA contexts, OpenMP pools and other threads. A subprocess started with ``-m`` imports only
what the jobs need.

Protocol: length-prefixed pickles. ``(job_id, parcel)`` go to the child's stdin, where the
:class:`~intrabench.execution.parcels.Parcel` holds the pickled ``(fn, args, kwargs)``;
``(job_id, ok, parcel)`` come back on its stdout, the parcel holding the result or exception.
A parcel is inline when small; otherwise it is a spool file (in ``/dev/shm`` where possible)
whose large arrays the receiver maps instead of copying (see :mod:`intrabench.execution.parcels`).
The child reads its stdin in a thread, runs jobs one at a time in arrival order and ignores
SIGINT, so after a Ctrl-C the parent can still let it finish (write) what was queued. ``fn`` must be importable by name (a module-level function).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, BinaryIO

try:  # Unix: to widen the pipes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from intrabench.execution.parcels import discard, pack, remove_directory, spool_directory, unpack

_HEADER = struct.Struct("!Q")
#: the environment variable that gives the child its parent's spool directory
_SPOOL_VARIABLE = "INTRABENCH_SPOOL_DIR"
#: the environment variable that gives the child its niceness (added to the parent's)
_NICENESS_VARIABLE = "INTRABENCH_WORKER_NICENESS"
#: jobs and answers pickled larger than this travel through a spool file instead of the pipe
_INLINE_LIMIT = 16 * 1024
#: bytes a job or answer pipe holds (Linux; elsewhere the system's default)
_PIPE_BYTES = 1 << 20


def _send(stream: BinaryIO, message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)  # one write: one system call
    stream.flush()


def _widen(pipe: BinaryIO | None) -> None:
    """Let ``pipe`` hold :data:`_PIPE_BYTES`: with the default 64 KiB, a few queued jobs of
    up to :data:`_INLINE_LIMIT` fill it, and the model loop's next hand-off waits until the
    worker has finished a job and read the next (stalls of milliseconds)."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if pipe is None or resize is None:
        return
    with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: keep the default
        fcntl.fcntl(pipe.fileno(), resize, _PIPE_BYTES)


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


#: executors whose spool may still exist: removed at exit (children die with their stdin)
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _remove_spools() -> None:
    for executor in list(_LIVE):
        remove_directory(executor._spool)


class WorkerDied(RuntimeError):
    """The worker subprocess ended before answering (killed, out of memory, crashed)."""


class SubprocessExecutor(Executor):
    """Runs submitted jobs, in order, in one Python subprocess started on first use."""

    def __init__(
        self, preload: tuple[str, ...] = (), niceness: int = 0, restarts: bool = False
    ) -> None:
        """``preload``: modules the worker imports as soon as it starts (those of the jobs).
        ``niceness``: added to the worker's scheduling niceness (Unix ``nice``): a worker whose
        jobs can wait yields the CPU to the processes that feed the model. ``restarts``: a job
        submitted after the worker died (its jobs failed with :class:`WorkerDied`) starts a
        fresh worker, instead of failing too (for jobs that stand alone: reading a case)."""
        if niceness < 0:
            raise ValueError("niceness must be >= 0 (raising priority needs privileges)")
        self._preload = tuple(preload)
        self._niceness = int(niceness)
        self._restarts = bool(restarts)
        self._process: subprocess.Popen | None = None
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()  # guards _pending, _next_id and the start
        self._send_lock = threading.Lock()  # one writer on the pipe at a time
        self._next_id = 0
        self._reader: threading.Thread | None = None
        #: spool files of jobs and of answers (the child's too): removed when the child ends
        self._spool: str | None = None

    def start(self) -> None:
        """Start the worker subprocess now instead of at the first job."""
        with self._lock:
            self._start()

    def _start(self) -> subprocess.Popen:
        if (
            self._restarts
            and self._process is not None
            and self._spool is None
            and self._process.poll() is not None
        ):
            self._process = None  # it died and its answers are all read: start a fresh one
        if self._process is None:
            self._spool = spool_directory()
            _LIVE.add(self)
            environment = dict(os.environ)
            environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            environment[_SPOOL_VARIABLE] = self._spool
            environment[_NICENESS_VARIABLE] = str(self._niceness)
            # one BLAS thread: workers are sized to the cores already, and OpenBLAS's threads
            # (numpy's and scipy's libraries each start one per core) spin when they start,
            # CPU time the model loop needs (docs/performance.md)
            environment.setdefault("OPENBLAS_NUM_THREADS", "1")
            self._process = subprocess.Popen(
                [sys.executable, "-m", "intrabench.execution.subprocess_worker", *self._preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=environment,
            )
            for pipe in (self._process.stdin, self._process.stdout):
                _widen(pipe)
            self._reader = threading.Thread(
                target=self._read_answers, daemon=True, name="intrabench-subprocess-answers"
            )
            self._reader.start()
        return self._process

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn(*args, **kwargs)`` in the worker process; a future of its result (the worker
        is started on the first job).

        Args:
            fn: A picklable function (importable by its module path in the worker).
            *args: Its positional arguments, pickled (large arrays through a spool file).
            **kwargs: Its keyword arguments, pickled the same way.

        Returns:
            The future of ``fn``'s result; it holds :class:`WorkerDied` when the worker has
            ended or the job cannot be handed to it.
        """
        future: Future = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            process = self._start()
            job_id = self._next_id
            self._next_id += 1
            self._pending[job_id] = future
            spool = self._spool
        try:
            if spool is None:
                raise OSError("the worker has ended")
            parcel = pack((fn, args, kwargs), spool, f"job-{job_id}", _INLINE_LIMIT)
        except OSError as error:  # the spool is gone: the child has ended
            with self._lock:
                self._pending.pop(job_id, None)
            future.set_exception(
                WorkerDied(
                    _ended(process)
                    if process.poll() is not None or _exits_soon(process)
                    else f"cannot hand the job to the worker: {error}"
                )
            )
            return future
        with self._send_lock:
            try:
                _send(process.stdin, (job_id, parcel))  # type: ignore[arg-type]
            except (BrokenPipeError, OSError, ValueError) as error:
                if parcel.path is not None:  # the child will never read it
                    discard(parcel.path)
                with self._lock:
                    self._fail_pending(
                        WorkerDied(
                            _ended(process)
                            if process.poll() is not None or _exits_soon(process)
                            else f"cannot reach the worker: {error}"
                        )
                    )
        return future

    def _read_answers(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        stdout = process.stdout
        while True:
            try:
                job_id, ok, parcel = _receive(stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            with self._lock:
                future = self._pending.pop(job_id, None)
            try:
                value = unpack(parcel)
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
            # every answer was read and no job file will be read any more
            remove_directory(self._spool)
            self._spool = None

    def _fail_pending(self, error: BaseException) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the worker's input and stop it.

        Args:
            wait: Whether to wait for the worker process to end.
            cancel_futures: Accepted for :class:`concurrent.futures.Executor`'s signature.
        """
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
        self._process = None  # the answer thread removes the spool once the child has ended


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
    threading.Thread(target=_exit_with_the_parent, daemon=True).start()
    spool = os.environ.get(_SPOOL_VARIABLE) or spool_directory()  # the parent removes it

    while True:
        payload = jobs.get()
        if payload is None:
            return
        job_id, parcel = pickle.loads(payload)
        name = f"answer-{job_id}"
        try:
            fn, args, kwargs = unpack(parcel)
        except OSError as error:  # its spool file is gone
            _send(stdout, (job_id, False, _failure(spool, name, f"cannot read the job: {error}")))
            continue
        try:
            ok, value = True, fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the caller
            ok, value = False, error
        del fn, args, kwargs  # the job's mapped arrays are released before the next job
        try:  # large results (cases) through a file, as jobs
            answer = pack(value, spool, name, _INLINE_LIMIT)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            ok, answer = (
                False,
                pack(RuntimeError(f"{type(error).__name__}: {error}"), spool, name, _INLINE_LIMIT),
            )
        except OSError as error:
            ok, answer = False, _failure(spool, name, f"cannot write the answer: {error}")
        del value
        try:
            _send(stdout, (job_id, ok, answer))
        except (BrokenPipeError, OSError):  # the parent is gone (killed): leave quietly
            return


def _failure(spool: str, name: str, text: str) -> Any:
    """The answer (an inline parcel) for a job whose spool file could not be read or written:
    ``text`` as its error. When the parent has removed the spool, it stopped reading answers
    (its exit after Ctrl-C or SIGTERM, a ``timeout``): the worker then leaves quietly instead of
    with a traceback, at once (returning would wait at the interpreter's shutdown for the thread
    that blocks on reading the jobs pipe: a fatal error, SIGABRT)."""
    if not os.path.isdir(spool):
        sys.stderr.flush()
        os._exit(0)
    return pack(RuntimeError(text), spool, name, _INLINE_LIMIT)


def _exit_with_the_parent(every: float = 0.5) -> None:
    """End this worker within ``every`` seconds of its parent's death (``kill -9``: no one
    closes the pipe while a long job runs, and the orphan would work on for nothing). A parent
    that lives on and closes the pipe (a finished or interrupted run) is not death: the worker
    then finishes what was queued."""
    parent = os.getppid()
    while True:
        time.sleep(every)
        if os.getppid() != parent:  # reparented: the parent is gone
            os._exit(0)


def _lower_priority() -> None:
    """Apply the niceness the parent asked for (where the platform has ``nice``)."""
    niceness = int(os.environ.pop(_NICENESS_VARIABLE, "0") or 0)
    if niceness > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(niceness)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (kill, SLURM) ends a worker at once and without a traceback; the parent keeps
    # only finished units, so nothing half done is lost
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
    _lower_priority()  # before the imports: they are the start's heaviest work
    for module in sys.argv[1:]:  # the jobs' modules, imported while the parent gets ready
        try:
            importlib.import_module(module)
        except Exception as error:  # noqa: BLE001 - a job that needs it will fail and say why
            print(f"intrabench worker: cannot preload {module}: {error}", file=sys.stderr)
    # what the imports built lives as long as the worker: the collector need not scan it again
    gc.freeze()
    # answers use the real stdout; anything the jobs print goes to stderr instead
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, answers)
