"""Pickled messages between processes whose large arrays are not copied through pipes.

A case read by the reader worker is two CT-sized arrays (a 512 x 512 x 300 volume is 300 MB in
float32). Pickled into bytes, written to a file, read back into bytes and unpickled, each array
was copied four times, two of them in the model loop's own process. A parcel pickles with
protocol 5 and keeps large contiguous buffers (numpy arrays) out of the pickle stream: they are
written once, page-aligned, into one spool file after the stream. The receiver maps that file
(copy-on-write, so its arrays are writable and private) and unlinks it at once; the arrays it
unpickles point into the mapping, so receiving a case costs page mappings, not copies.

The spool file goes to ``/dev/shm`` when it exists and has 1 GiB free (memory, never disk),
otherwise to the temporary directory; a parcel that finds ``/dev/shm`` full (a container's is
often small) goes to the temporary directory. A parcel without large buffers and a stream of at most
``inline_limit`` bytes travels inline (a pipe holds little; a sender blocked on a full pipe
would wait for the receiver's current job).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

#: buffers of at least this many bytes leave the pickle stream (smaller ones stay inline)
OUT_OF_BAND_MIN = 64 * 1024
_PAGE = mmap.ALLOCATIONGRANULARITY


@dataclass(frozen=True)
class Parcel:
    """One pickled value: ``inline`` bytes, or a spool file at ``path`` that holds the pickle
    stream (``stream_bytes`` long, at offset 0) and then the out-of-band buffers at the
    (offset, bytes) pairs of ``buffers``."""

    inline: bytes = b""
    path: str | None = None
    stream_bytes: int = 0
    buffers: tuple[tuple[int, int], ...] = field(default_factory=tuple)


SPOOL_PREFIX = "intrabench-spool-"


def spool_directory() -> str:
    """A new private directory for spool files, named after this process: in ``/dev/shm``
    when it is a writable folder with at least 1 GiB free, else in the temporary directory.
    Directories left by processes that no longer run (killed before cleaning up) are removed
    first, so that a crash never keeps memory in ``/dev/shm`` for long.

    Returns:
        The absolute path of the new directory (mode 0700), named
        ``intrabench-spool-<pid>-n<PID namespace>-s<start time>-<random>``; the caller
        removes it with :func:`remove_directory`.
    """
    shm = "/dev/shm"
    parent = None
    try:
        stats = os.statvfs(shm)
        if os.access(shm, os.W_OK) and stats.f_bavail * stats.f_frsize >= 1 << 30:
            parent = shm
    except OSError:
        pass
    for folder in {shm, tempfile.gettempdir()}:
        remove_orphans(folder)
    parent = parent or tempfile.gettempdir()
    namespace, started = _identity(os.getpid()) or ("", "")
    return tempfile.mkdtemp(
        prefix=f"{SPOOL_PREFIX}{os.getpid()}-n{namespace}-s{started}-", dir=parent
    )


def _identity(pid: int) -> tuple[str, str] | None:
    """(PID namespace inode, start time in clock ticks since boot) of process ``pid`` from
    ``/proc`` (Linux), or None where it cannot be read: together with the PID they tell a
    spool's owner from a later process that got the same PID, and a process of another PID
    namespace (a container sharing ``/dev/shm``) from an ended one."""
    try:
        namespace = os.readlink(f"/proc/{pid}/ns/pid")
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return "".join(c for c in namespace if c.isdigit()), fields[19]
    except (OSError, IndexError):
        return None


def remove_orphans(parent: str, min_age_seconds: float = 3600.0) -> list[str]:
    """Remove this user's spool directories in ``parent`` whose process has ended; returns
    their paths. A directory named with its owner's PID namespace and start time (see
    :func:`spool_directory`) whose namespace is this process's goes at once when its process
    has ended (or its PID now belongs to a later process): a kill -9'd run's spool is freed at
    the next start. Others (another namespace, whose processes look ended from here, or the
    older names without these) go once nothing has written to them for ``min_age_seconds``.

    Args:
        parent: The folder to clean (``/dev/shm`` or the temporary directory); one that
            cannot be listed is left alone.
        min_age_seconds: How long, in seconds since its last change, a spool directory that
            cannot be told ended from its name must be left before it is removed (and then
            only if no process has its PID). Default: one hour.

    Returns:
        The paths of the directories removed, in listing order (empty where none).
    """
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    own = _identity(os.getpid())
    for name in names:
        if not name.startswith(SPOOL_PREFIX):
            continue
        parts = name[len(SPOOL_PREFIX) :].split("-")
        pid_text = parts[0]
        path = os.path.join(parent, name)
        try:
            stats = os.stat(path)
            if not pid_text.isdigit() or stats.st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid = int(pid_text)
        named = (
            len(parts) >= 3
            and parts[1].startswith("n")
            and parts[2].startswith("s")
            and own is not None
            and parts[1][1:] == own[0]
        )
        if named:
            current = _identity(pid)
            gone = current is None or current[1] != parts[2][1:]
        else:
            gone = time.time() - stats.st_mtime >= min_age_seconds and not _running(pid)
        if gone:
            remove_directory(path)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def pack(value: Any, directory: str, name: str, inline_limit: int) -> Parcel:
    """Pickle ``value`` as a :class:`Parcel`, writing a spool file ``directory/name`` when it
    has large buffers or its stream is over ``inline_limit`` bytes.

    Args:
        value: Any picklable value; its contiguous buffers of at least
            :data:`OUT_OF_BAND_MIN` bytes (numpy arrays) are written out of band,
            page-aligned, not copied into the pickle stream.
        directory: The spool directory (:func:`spool_directory`); where its file system is
            full, the file goes to :func:`overflow_directory` instead.
        name: The spool file's name in ``directory``, unique among the parcels in flight.
        inline_limit: The longest pickle stream, in bytes, that travels inline when the
            value has no large buffers.

    Returns:
        The parcel: inline bytes, or a spool file's path and layout. The receiver calls
        :func:`unpack` once, which removes the file.
    """
    large: list[pickle.PickleBuffer] = []

    def keep_out(buffer: pickle.PickleBuffer) -> bool:
        with buffer.raw() as raw:
            if raw.nbytes >= OUT_OF_BAND_MIN:
                large.append(buffer)
                return False  # out of band
        return True

    stream = pickle.dumps(value, protocol=5, buffer_callback=keep_out)
    if not large and len(stream) <= inline_limit:
        return Parcel(inline=stream)
    try:
        return _write(stream, large, os.path.join(directory, name))
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
    # /dev/shm is full (a container's is often small): the temporary directory, on disk
    fallback = overflow_directory(directory)
    os.makedirs(fallback, mode=0o700, exist_ok=True)
    return _write(stream, large, os.path.join(fallback, name))


def overflow_directory(directory: str) -> str:
    """Where parcels of ``directory`` go when its file system is full: the directory of the
    same name in the temporary directory (removed with it by :func:`remove_directory`).

    Args:
        directory: A spool directory (:func:`spool_directory`).

    Returns:
        The overflow directory's path (not created here; the same path as ``directory``
        where that is already in the temporary directory).
    """
    return os.path.join(tempfile.gettempdir(), os.path.basename(directory))


def _write(stream: bytes, large: list[pickle.PickleBuffer], path: str) -> Parcel:
    layout: list[tuple[int, int]] = []
    try:
        with open(path, "wb") as handle:
            handle.write(stream)
            offset = len(stream)
            for buffer in large:
                with buffer.raw() as raw:
                    start = -(-offset // _PAGE) * _PAGE
                    handle.seek(start)
                    handle.write(raw)
                    layout.append((start, raw.nbytes))
                    offset = start + raw.nbytes
    except BaseException:
        discard(path)
        raise
    return Parcel(path=path, stream_bytes=len(stream), buffers=tuple(layout))


def unpack(parcel: Parcel) -> Any:
    """The value of ``parcel``; its spool file is removed (its buffers stay mapped for as long
    as the arrays that use them live).

    Args:
        parcel: A parcel from :func:`pack`, unpacked at most once (its spool file is gone
            afterwards).

    Returns:
        The value that was packed. Its large arrays point into a private copy-on-write
        mapping of the spool file: writable, and not seen by the sender.
    """
    if parcel.path is None:
        return pickle.loads(parcel.inline)
    try:
        with open(parcel.path, "rb") as handle:
            if not parcel.buffers:
                return pickle.loads(handle.read())
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    finally:
        discard(parcel.path)
    view = memoryview(mapping)
    try:
        buffers = [view[start : start + size] for start, size in parcel.buffers]
        return pickle.loads(view[: parcel.stream_bytes], buffers=buffers)
    finally:
        view.release()  # the slices that arrays hold keep the mapping alive, not this view


def discard(path: str) -> None:
    """Remove a spool file if it is there.

    Args:
        path: The spool file's path; a file already gone is no error.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def remove_directory(directory: str | None) -> None:
    """Remove a spool directory, its overflow directory, and what is left in them (parcels
    never received).

    Args:
        directory: The spool directory (:func:`spool_directory`); None: nothing to remove.
            Errors while removing are ignored.
    """
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        overflow = overflow_directory(directory)
        if overflow != directory:
            shutil.rmtree(overflow, ignore_errors=True)
