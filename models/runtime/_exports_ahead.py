"""Compile a model's recorded exports in the background while torch is imported.

On the CPU, a model whose encoder and decoder run from recorded exports (OpenVINO, ONNX
Runtime) would spend its start in series: ``import torch``, reading the checkpoint for its
digests, then compiling the two exports (the figures are in docs/performance.md). Compiling
needs none of torch, and OpenVINO's and ONNX Runtime's compilers
release the GIL, so ``prepare()`` starts it in a thread first
(:func:`._encoder_backends.open_ahead`, which hands the work to :func:`start`) and the import
runs beside it; :meth:`._encoder_backends.EncoderExports.checked_run` then takes it (:func:`take`).

This is a head start and nothing else: the model resolves its backend exactly as without it
(record verified, file hashed, checked against torch when the record has no check), and takes
the compiled model from here only when it is of that very file (same SHA-256), for the same
backend and the same thread count; otherwise it compiles the file itself, and what was
compiled ahead is dropped.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

_Key = tuple[str, str, int, tuple[str, ...]]
_AHEAD: dict[_Key, Future] = {}
_LOCK = threading.Lock()


def _key(backend: str, path: Path, threads: int, input_names: tuple[str, ...]) -> _Key:
    return (backend, str(Path(path)), int(threads), tuple(input_names))


def start(
    backend: str,
    path: Path,
    threads: int,
    input_names: tuple[str, ...],
    work: Callable[[], tuple[str, Any]],
) -> None:
    """Run ``work`` (returning the file's SHA-256 and the opened backend: see
    :func:`._encoder_backends.open_ahead`) in a daemon thread, once per key."""
    key = _key(backend, path, threads, input_names)
    future: Future = Future()
    with _LOCK:
        if key in _AHEAD:
            return
        _AHEAD[key] = future

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as error:  # noqa: BLE001 - handed to whoever takes it
            future.set_exception(error)

    threading.Thread(target=run, name="intrabench-open-ahead", daemon=True).start()


def take(
    backend: str, path: Path, threads: int, input_names: tuple[str, ...], onnx_sha256: str
) -> Callable[..., Any] | None:
    """What was started ahead for this key, when it opened the file whose SHA-256 is
    ``onnx_sha256`` (waiting for it to finish); else None (nothing started, another file, or
    it failed: the caller opens it now, where an error is raised)."""
    with _LOCK:
        future = _AHEAD.pop(_key(backend, path, threads, input_names), None)
    if future is None:
        return None
    try:
        sha, run = future.result()
    except Exception:  # noqa: BLE001 - opened again by the caller, where its error is raised
        return None
    return run if sha == onnx_sha256 else None


def pending() -> int:
    """How many compilations started ahead were not taken yet (tests, diagnostics)."""
    with _LOCK:
        return len(_AHEAD)


def torch_threads_guess() -> int | None:
    """The thread count torch will report, guessed without importing it: ``OMP_NUM_THREADS``
    (then ``MKL_NUM_THREADS``) when set to a positive number, as torch reads them; else the
    physical cores where the OS tells them (torch's default); else None. Only a guess: an
    export compiled ahead for another count is not used."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        import psutil
    except ImportError:
        return None
    cores: Any = psutil.cpu_count(logical=False)
    return int(cores) if cores else None
