"""Stop requests (Ctrl-C's SIGINT, ``kill``'s and SLURM's SIGTERM) that are never lost.

Python runs a signal handler in the main thread between two bytecodes, wherever they are.
When that is inside a weakref callback or a ``__del__`` (the metrics' frozen-box cache has
one), the exception the handler raises cannot propagate: Python prints it as "Exception
ignored in ..." with a traceback and carries on, and the run then finished as if no signal had
come (exit 0 after a ``kill``). Here the handler records the request before it raises; such a
swallowed request is not printed, and the run's loops call :func:`check`, which raises it again
at the next step, where it unwinds like any Ctrl-C: finished work saved, workers stopped.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

_requested: type[KeyboardInterrupt] | None = None


def request(kind: type[KeyboardInterrupt]) -> None:
    """Record a stop request of ``kind`` and raise it (called by the signal handlers).

    Args:
        kind: KeyboardInterrupt (SIGINT) or the subclass raised for SIGTERM.

    Raises:
        KeyboardInterrupt: Always, as ``kind``.
    """
    global _requested
    _requested = kind
    raise kind()


def check() -> None:
    """Raise the stop request received so far, if any: called at each step of a run's loops,
    so that a request whose first raise was swallowed still stops the run."""
    if _requested is not None:
        raise _requested()


def clear() -> None:
    """Forget the stop request (a new command in the same process, tests)."""
    global _requested
    _requested = None


def install(terminated: type[KeyboardInterrupt]) -> Callable[[], None] | None:
    """Make SIGINT raise KeyboardInterrupt and SIGTERM raise ``terminated``, both recorded;
    returns a function that puts the previous handlers back and forgets the request, or None
    outside the main thread (where handlers cannot be set). An ignored SIGINT (a job started
    with ``&`` or ``nohup``) stays ignored.

    Args:
        terminated: The KeyboardInterrupt subclass SIGTERM raises (so a ``kill`` or SLURM's
            stop can be told from a Ctrl-C).

    Returns:
        The function that restores the previous handlers (and ``sys.unraisablehook``) and
        forgets the request, or None outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    clear()
    previous_hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt) and _requested is not None:
            return  # a recorded stop request: check() raises it again at the next step
        previous_hook(info)

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda signum, frame: request(terminated))
    }
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(
            signal.SIGINT, lambda signum, frame: request(KeyboardInterrupt)
        )
    sys.unraisablehook = unraisable

    def restore() -> None:
        clear()  # handled: a later command in this process starts without it
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook

    return restore
