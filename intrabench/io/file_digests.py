"""SHA-256 of checkpoint files, remembered while the file on disk stays the same file.

A pinned checkpoint is hashed before every load, so that a swapped or damaged file is never
used in silence. For SAM ViT-H that is 2.4 GiB to hash before every run's first forward pass
(docs/performance.md). :func:`remembered_sha256` hashes a file
once and then keeps its hash in a small JSON book (``file-sha256.json`` in IntraBench's cache
folder, ``$INTRABENCH_CACHE`` or ``~/.cache/intrabench``) under the file's resolved path,
with what identifies that file's content on disk: its size, its modification time in
nanoseconds, its inode and device. A file copied over, moved in, downloaded again, written to
or truncated changes at least one of them and is hashed again.

What the book does not defend against: someone who rewrites a file's bytes and then sets its
modification time back (they could edit the book as well). ``intrabench models verify`` and
the download's own check hash the whole file every time and do not read the book; they record
what they computed (:func:`fresh_sha256`), and ``intrabench models list`` only reads it
(:func:`known_sha256`) for files too large to hash while listing.

The book is a convenience: unreadable, malformed or unwritable, it is ignored and the file is
hashed (``INTRABENCH_NO_DIGEST_BOOK=1`` turns it off).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from intrabench.io.cache import cache_root

BOOK_NAME = "file-sha256.json"
DISABLE_VARIABLE = "INTRABENCH_NO_DIGEST_BOOK"
_HEX = re.compile(r"[0-9a-f]{64}")
#: entries kept at most (the oldest written are dropped first)
_MAX_ENTRIES = 256


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 22) -> str:
    """The SHA-256 of the whole file, read now.

    Args:
        path: The file.
        chunk_size: Bytes read at a time (4 MiB by default).

    Returns:
        The digest as 64 lower-case hex digits.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def book_path() -> Path:
    """The file of remembered digests, in the cache folder.

    Returns:
        ``<cache root>/`` :data:`BOOK_NAME` (it may not exist yet).
    """
    return cache_root() / BOOK_NAME


def _identity(path: Path) -> dict[str, int]:
    stat = path.stat()
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
        "device": stat.st_dev,
    }


def _read_book() -> dict:
    try:
        book = json.loads(book_path().read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return book if isinstance(book, dict) else {}


def remembered_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of ``path``: from the book when the file is still the one hashed (same
    resolved path, size, modification time, inode and device), else computed and recorded.

    Args:
        path: The file (resolved before lookup).

    Returns:
        The digest as 64 lower-case hex digits.
    """
    path = Path(path).resolve()
    if os.environ.get(DISABLE_VARIABLE):
        return sha256_file(path)
    identity = _identity(path)
    entry = _read_book().get(str(path))
    if (
        isinstance(entry, dict)
        and isinstance(entry.get("sha256"), str)
        and _HEX.fullmatch(entry["sha256"])
        and all(entry.get(key) == value for key, value in identity.items())
    ):
        return entry["sha256"]
    digest = sha256_file(path)
    if _identity(path) == identity:  # not changed while it was read
        _record(str(path), {**identity, "sha256": digest})
    return digest


def known_sha256(path: str | os.PathLike) -> str | None:
    """The SHA-256 the book holds for ``path`` while the file is still the one hashed (same
    resolved path, size, modification time, inode and device), else None; never hashes.

    Args:
        path: The file; a missing or unreadable one gives None.

    Returns:
        The digest as 64 lower-case hex digits, or None.
    """
    if os.environ.get(DISABLE_VARIABLE):
        return None
    try:
        path = Path(path).resolve()
        identity = _identity(path)
    except OSError:
        return None
    entry = _read_book().get(str(path))
    if (
        isinstance(entry, dict)
        and isinstance(entry.get("sha256"), str)
        and _HEX.fullmatch(entry["sha256"])
        and all(entry.get(key) == value for key, value in identity.items())
    ):
        return entry["sha256"]
    return None


def fresh_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of the whole file, read now (the book is not read), and recorded in the
    book for :func:`known_sha256` and :func:`remembered_sha256`.

    Args:
        path: The file (resolved before it is recorded).

    Returns:
        The digest as 64 lower-case hex digits.
    """
    path = Path(path).resolve()
    identity = _identity(path)
    digest = sha256_file(path)
    if not os.environ.get(DISABLE_VARIABLE) and _identity(path) == identity:
        _record(str(path), {**identity, "sha256": digest})
    return digest


def _record(key: str, entry: dict) -> None:
    """Add the entry; the book is written whole and replaced atomically (two processes that
    write at once lose an entry at worst, never the book). Failures are ignored."""
    target = book_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        book = _read_book()
        book.pop(key, None)
        book[key] = entry
        while len(book) > _MAX_ENTRIES:
            book.pop(next(iter(book)))
        handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".json.part")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(book, out)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        pass
