"""One connection to a model server: started as a command (another environment's Python, any
command, a container) or reached at a URL; requests with deadlines; faults as one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from intrabench.serving.protocol import PROTOCOL_VERSION
from intrabench.serving.spec import RunsIn, tcp_address
from intrabench.serving.wire import Channel, WireError


class ModelServerError(RuntimeError):
    """The model server died, hung, answered garbage or failed a request: the unit fails."""


def server_command(name: str, params: dict[str, Any], runs_in: RunsIn) -> list[str]:
    """The command that starts the server of ``name`` for ``runs_in`` (not for ``url``).

    Args:
        name: The model's registry name.
        params: The model's build parameters (JSON-able), passed as ``--params``.
        runs_in: A ``python``, ``command`` or ``container`` way of running it.

    Returns:
        The argument list: ``PYTHON -m intrabench serve-model NAME --params JSON --stdio``; a
        ``command`` as given (it reads the model from ``INTRABENCH_SERVE_MODEL`` and
        ``INTRABENCH_SERVE_PARAMS``); ``docker``/``podman run -i --rm OPTIONS IMAGE
        intrabench serve-model ...`` or ``apptainer``/``singularity exec OPTIONS IMAGE
        intrabench serve-model ...``.
    """
    serve = ["serve-model", name, "--params", json.dumps(params, sort_keys=True), "--stdio"]
    if runs_in.python is not None:
        return [runs_in.python, "-m", "intrabench", *serve]
    if runs_in.command is not None:
        return list(runs_in.command)
    container = runs_in.container
    assert container is not None
    if container.engine in ("docker", "podman"):
        return [
            container.engine,
            "run",
            "-i",
            "--rm",
            *container.options,
            container.image,
            "intrabench",
            *serve,
        ]
    return [container.engine, "exec", *container.options, container.image, "intrabench", *serve]


class ServerConnection:
    """A live session with a model server; :meth:`request` sends one request and returns its
    answer. Any fault (the process exited, a timeout, a message that is not the protocol)
    closes the connection and raises :class:`ModelServerError` naming the model and the cause,
    with the server's last line of standard error where there is one."""

    def __init__(self, name: str, params: dict[str, Any], runs_in: RunsIn) -> None:
        self.name = name
        self.runs_in = runs_in
        self.process: subprocess.Popen | None = None
        self.socket: socket.socket | None = None
        self.folder = Path(tempfile.mkdtemp(prefix="intrabench-serve-", dir=_shared_memory()))
        self.stderr_path = self.folder / "server.stderr"
        try:
            self.channel = self._open(params)
            self.hello = self.request(
                {"op": "hello", "protocol": PROTOCOL_VERSION}, timeout=runs_in.start_timeout_s
            )
        except BaseException:
            self.close()
            raise
        problem = _hello_problem(name, self.hello)
        if problem:
            self.close()
            raise ModelServerError(f"model server of '{name}' {problem}")

    def _open(self, params: dict[str, Any]) -> Channel:
        peer = f"the model server of '{self.name}'"
        if self.runs_in.url is not None:
            host, port = tcp_address(self.runs_in.url)
            try:
                self.socket = socket.create_connection(
                    (host, port), timeout=self.runs_in.start_timeout_s
                )
            except OSError as error:
                raise ModelServerError(
                    f"cannot reach the model server of '{self.name}' at "
                    f"{self.runs_in.url}: {error.strerror or error}"
                ) from None
            self.socket.setblocking(True)
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            fd = self.socket.fileno()
            return Channel(fd, fd, peer=f"{peer} at {self.runs_in.url}")
        command = server_command(self.name, params, self.runs_in)
        env = {
            **os.environ,
            **self.runs_in.env,
            "INTRABENCH_SERVE_MODEL": self.name,
            "INTRABENCH_SERVE_PARAMS": json.dumps(params, sort_keys=True),
        }
        try:
            with open(self.stderr_path, "wb") as stderr:
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=env,
                    start_new_session=True,
                )
        except OSError as error:
            raise ModelServerError(
                f"cannot start the model server of '{self.name}' "
                f"({command[0]}): {error.strerror or error}"
            ) from None
        assert self.process.stdin is not None and self.process.stdout is not None
        return Channel(self.process.stdout.fileno(), self.process.stdin.fileno(), peer=peer)

    def request(
        self,
        header: dict[str, Any],
        arrays: dict[str, np.ndarray] | None = None,
        timeout: float | None = None,
        max_payload: int | None = None,
    ) -> dict[str, Any] | tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send ``header`` (and ``arrays``) and wait for the answer.

        Args:
            header: The request (``{"op": ..., ...}``, JSON-able).
            arrays: Name -> bool, integer or float array sent with it, or None.
            timeout: Seconds the request may go without progress; None: ``runs_in``'s
                ``timeout_s``.
            max_payload: The most bytes of arrays expected back; None: an answer without
                arrays.

        Returns:
            The answer's header when ``max_payload`` is None, else ``(header, arrays)``.

        Raises:
            ModelServerError: The exchange failed (the connection is then closed, the
                message says how the server ended and its last line of standard error) or
                the server answered a failure of its own.
            CheckpointError: The server reports a checkpoint problem.
            DataError: The server reports a data error.
            UserError: The server reports a user error.
        """
        timeout = self.runs_in.timeout_s if timeout is None else timeout
        try:
            self.channel.send(header, arrays, timeout=timeout)
            answer, payload = self.channel.receive(
                timeout=timeout, max_payload=0 if max_payload is None else max_payload
            )
        except (WireError, OSError, ValueError) as error:
            cause = (
                str(error) if isinstance(error, WireError) else f"{type(error).__name__}: {error}"
            )
            self.close(kill=True)
            raise ModelServerError(
                f"{cause} during {header.get('op')}{self._exit_note()}"
            ) from None
        if answer.get("ok") is not True:
            raise answer_error(self.name, answer)
        return answer if max_payload is None else (answer, payload)

    def _exit_note(self) -> str:
        """'; the server exited with code N; its last line: ...' where known."""
        note = ""
        if self.process is not None:
            try:
                code = self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                note += (
                    f"; the server was killed by signal {-code}"
                    if code < 0
                    else f"; the server exited with code {code}"
                )
        last = _last_line(self.stderr_path)
        return note + (f"; its last line: {last}" if last else "")

    @property
    def alive(self) -> bool:
        """Whether the server process runs (or the socket is open)."""
        if self.process is not None:
            return self.process.poll() is None
        return self.socket is not None

    def close(self, kill: bool = False) -> None:
        """Say goodbye (unless ``kill``), stop the process, remove the temporary files.

        Args:
            kill: Skip the goodbye and give the process 0.5 s instead of 10 s to exit before
                its process group gets SIGKILL. Either way the folder's files are removed but
                for the server's standard error.
        """
        if not kill and self.alive and hasattr(self, "channel"):
            try:
                self.channel.send({"op": "bye"}, timeout=5)
                self.channel.receive(timeout=5, max_payload=0)
            except (WireError, OSError, ValueError):
                pass
        if self.socket is not None:
            self.socket.close()
            self.socket = None
        if self.process is not None:
            _stop(self.process, kill)
        for path in sorted(self.folder.glob("*"), reverse=True):
            if path != self.stderr_path:
                path.unlink(missing_ok=True)


def _hello_problem(name: str, hello: dict[str, Any]) -> str:
    """What is wrong with a server's hello for model ``name`` ("" when nothing)."""
    if hello.get("protocol") != PROTOCOL_VERSION:
        return (
            f"speaks model protocol {str(hello.get('protocol'))[:20]}, this IntraBench "
            f"speaks {PROTOCOL_VERSION}"
        )
    served = hello.get("model")
    if not isinstance(served, dict) or served.get("name") != name:
        shown = served.get("name") if isinstance(served, dict) else served
        return f"serves model {str(shown)[:80]!r}, not {name!r} (check its command)"
    return ""


def answer_error(name: str, answer: dict[str, Any]) -> Exception:
    """The exception for an ``ok: false`` answer: the error kinds the engine treats apart
    (a checkpoint stops the model; data and user errors as in process), else a unit failure.

    Args:
        name: The model's name, put in the message.
        answer: The answer's header: ``error`` (the message, cut to 500 characters) and
            ``kind`` (``"checkpoint"``, ``"data"``, ``"user"`` or another).

    Returns:
        A ``CheckpointError``, ``DataError`` or ``UserError`` for those kinds, else a
        :class:`ModelServerError` (returned, not raised).
    """
    from intrabench.errors import DataError, UserError
    from intrabench.io.checkpoints import CheckpointError

    message = f"model server of '{name}': {str(answer.get('error', 'no error given'))[:500]}"
    kind = answer.get("kind")
    if kind == "checkpoint":
        return CheckpointError(message)
    if kind == "data":
        return DataError(message)
    if kind == "user":
        return UserError(message)
    return ModelServerError(message)


def _stop(process: subprocess.Popen, kill: bool) -> None:
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        process.wait(timeout=0.5 if kill else 10)
        return
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _last_line(path: Path, limit: int = 300) -> str:
    try:
        with open(path, "rb") as stream:
            stream.seek(max(0, stream.seek(0, 2) - 8192))
            lines = [line.strip() for line in stream.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:limit] if lines else ""


def _shared_memory() -> str | None:
    """/dev/shm where it exists and is writable (a file there is memory), else the default."""
    shm = "/dev/shm"
    return shm if sys.platform.startswith("linux") and os.access(shm, os.W_OK) else None
