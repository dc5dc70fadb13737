"""Framed messages between a model server and its client: a JSON header and raw arrays.

One message on the stream is::

    b"IBM1"  u32 header length  u64 payload length  (little endian)
    header   UTF-8 JSON object; its "arrays" entry lists the payload's arrays
    payload  the arrays' bytes, one after the other, C order

Every array entry is ``{"name", "dtype", "shape", "offset", "nbytes"}``; dtypes are plain
numeric numpy dtypes (bool, integers, floats), never objects, so a message is read without
unpickling anything. Reads and writes go through file descriptors (a pipe's two ends, or one
socket) with a deadline each, so a server that hangs, trickles or closes is an error with a
cause, never a wait without end.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

import numpy as np

MAGIC = b"IBM1"
_PREFIX = struct.Struct("<4sIQ")
#: the largest header a reader accepts (a prompt with thousands of scribble voxels is ~1 MB)
MAX_HEADER_BYTES = 64 * 2**20
#: the largest payload a reader accepts by default (a 1024 x 1024 x 1024 float32 image is 4 GiB)
MAX_PAYLOAD_BYTES = 16 * 2**30
_DTYPE_KINDS = frozenset("biuf")
_CHUNK = 1 << 20


class WireError(RuntimeError):
    """The other side sent something that is not a message of this protocol, closed the
    stream, or did not answer in time."""


class Channel:
    """A message stream over a reading and a writing file descriptor (the same one for a
    socket). ``timeout``: seconds a read or a write may wait without progress (None: forever)."""

    def __init__(self, read_fd: int, write_fd: int, peer: str = "the model server") -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.peer = peer

    # -- sending ------------------------------------------------------------------------
    def send(
        self,
        header: dict[str, Any],
        arrays: dict[str, np.ndarray] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Write one message: ``header`` (JSON-able) with ``arrays`` as its payload.

        Args:
            header: The message's JSON object (no NaN or infinity); its ``"arrays"`` entry is
                written by this method.
            arrays: Name -> bool, integer or float array of any shape, sent in C order; None:
                no payload.
            timeout: Seconds each write may wait without progress before the peer is given up;
                None: no limit.

        Raises:
            TypeError: An array's dtype is not bool, integer or float.
            WireError: The peer closed the connection or took more than ``timeout``.
        """
        entries, buffers, offset = [], [], 0
        for name, array in (arrays or {}).items():
            array = np.ascontiguousarray(array)
            if array.dtype.kind not in _DTYPE_KINDS:
                raise TypeError(
                    f"array '{name}' has dtype {array.dtype}; only bool, integer "
                    "and float arrays travel"
                )
            entries.append(
                {
                    "name": name,
                    "dtype": array.dtype.str,
                    "shape": list(array.shape),
                    "offset": offset,
                    "nbytes": int(array.nbytes),
                }
            )
            buffers.append(memoryview(array).cast("B"))
            offset += int(array.nbytes)
        text = json.dumps(
            {**header, "arrays": entries}, separators=(",", ":"), allow_nan=False
        ).encode()
        deadline = _deadline(timeout)
        self._write(_PREFIX.pack(MAGIC, len(text), offset) + text, deadline, timeout)
        for buffer in buffers:
            self._write(buffer, deadline, timeout)

    def _write(
        self, data: bytes | memoryview, deadline: float | None, timeout: float | None
    ) -> None:
        view = memoryview(data)
        while len(view):
            self._wait(write=True, deadline=deadline, timeout=timeout, doing="reading our request")
            try:
                written = os.write(self.write_fd, view[:_CHUNK])
            except (BrokenPipeError, ConnectionError) as error:
                raise WireError(f"{self.peer} closed the connection ({error.strerror})") from None
            view = view[written:]
            deadline = _deadline(timeout)  # a deadline without progress, not for the whole

    # -- receiving ----------------------------------------------------------------------
    def receive(
        self, timeout: float | None = None, max_payload: int = MAX_PAYLOAD_BYTES
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Read one message: its header and its arrays (each a view of one payload buffer).

        Args:
            timeout: Seconds each read may wait without progress (the first byte included);
                None: no limit.
            max_payload: The largest payload accepted, in bytes; a larger one announced is
                refused before it is read.

        Returns:
            ``(header, arrays)``: the JSON object (with its ``"arrays"`` entry) and name ->
            array, each a view of the one payload buffer, of the shape and dtype the sender
            wrote.

        Raises:
            WireError: The stream is not a message of this protocol (magic, sizes, JSON,
                array entries), the peer closed it, or it took more than ``timeout``.
        """
        prefix = self._read_exactly(_PREFIX.size, timeout, first=True)
        magic, header_size, payload_size = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            shown = bytes(prefix[:16])
            raise WireError(
                f"{self.peer} answered {shown!r}..., not a message of the IntraBench "
                "model protocol (is the command or URL an IntraBench model server?)"
            )
        if header_size > MAX_HEADER_BYTES:
            raise WireError(
                f"{self.peer} announced a {header_size:,}-byte header (at most "
                f"{MAX_HEADER_BYTES:,})"
            )
        if payload_size > max_payload:
            raise WireError(
                f"{self.peer} announced a {payload_size:,}-byte payload (at most "
                f"{max_payload:,} expected)"
            )
        try:
            header = json.loads(bytes(self._read_exactly(header_size, timeout)))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise WireError(f"{self.peer} sent a header that is not JSON ({error})") from None
        if not isinstance(header, dict):
            raise WireError(f"{self.peer} sent a header that is not a JSON object")
        payload = self._read_exactly(payload_size, timeout)
        return header, _arrays_of(header.get("arrays", []), payload, self.peer)

    def _read_exactly(self, size: int, timeout: float | None, first: bool = False) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        deadline = _deadline(timeout)
        while got < size:
            self._wait(
                write=False,
                deadline=deadline,
                timeout=timeout,
                doing="answering" if first and got == 0 else "sending its answer",
            )
            count = os.readv(self.read_fd, [view[got:]])
            if count == 0:
                raise WireError(
                    f"{self.peer} closed the connection"
                    + (f" after {got} of {size} bytes" if got else "")
                )
            got += count
            deadline = _deadline(timeout)
        return buffer

    def _wait(self, write: bool, deadline: float | None, timeout: float | None, doing: str) -> None:
        fd = self.write_fd if write else self.read_fd
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise WireError(
                    f"{self.peer} stopped {doing}: nothing for {timeout:g} s "
                    "(the timeout_s of runs_in)"
                )
            ready = (
                select.select([], [fd], [], left) if write else select.select([fd], [], [], left)
            )
            if ready[1 if write else 0]:
                return


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + float(timeout)


def _arrays_of(entries: Any, payload: bytearray, peer: str) -> dict[str, np.ndarray]:
    """The arrays a header lists, as views of ``payload``; every entry checked against it."""
    if not isinstance(entries, list):
        raise WireError(f"{peer} sent 'arrays' that is not a list")
    arrays: dict[str, np.ndarray] = {}
    for entry in entries:
        try:
            name, dtype = str(entry["name"]), np.dtype(str(entry["dtype"]))
            shape = tuple(int(v) for v in entry["shape"])
            offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        except (KeyError, TypeError, ValueError) as error:
            raise WireError(f"{peer} sent an array entry that cannot be read ({error})") from None
        if dtype.kind not in _DTYPE_KINDS or dtype.hasobject:
            raise WireError(f"{peer} sent array '{name}' of dtype {dtype}")
        if (
            any(v < 0 for v in shape)
            or nbytes != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            or offset < 0
            or offset + nbytes > len(payload)
        ):
            raise WireError(
                f"{peer} sent array '{name}' whose shape {shape} and size do not fit the payload"
            )
        arrays[name] = np.frombuffer(
            payload, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset
        ).reshape(shape)
    return arrays
