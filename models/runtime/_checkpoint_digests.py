"""The weights' digests of a checkpoint file, remembered so that torch need not read it again.

An exported encoder or decoder is found by the SHA-256 of its weights
(:func:`._encoder_backends.tensors_digest`), which takes ``torch.load`` of the checkpoint to
compute, after ``import torch`` (docs/performance.md). This book, one JSON file
in the exports folder, maps a checkpoint file's own SHA-256 to those digests once they have
been computed, so that a later run finds its exports, and can start compiling them, before
torch is imported.

The book is a finding aid: the checkpoint's SHA-256 that keys it is computed (or checked
against the pinned one) by the caller at every run, and every export it leads to is checked
against its own record (its file's SHA-256 computed again). Entries are addressed by
content, so they never go stale; an unreadable, non-hex or missing entry costs a
``torch.load``. The book lives with the exports and is trusted as they are: whoever can write
that folder can already replace an export together with its record.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

BOOK_NAME = "checkpoint-digests.json"
_HEX = re.compile(r"[0-9a-f]{64}")


def recorded_digests(directory: Path, checkpoint_sha256: str) -> dict[str, str] | None:
    """The digests recorded for the checkpoint whose file has ``checkpoint_sha256`` (``{'encoder':
    ..., 'decoder': ...}``), or None: no book, an unreadable one, or no valid entry."""
    try:
        book = json.loads((Path(directory) / BOOK_NAME).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    entry = book.get(checkpoint_sha256) if isinstance(book, dict) else None
    if not (
        isinstance(entry, dict)
        and entry
        and all(
            isinstance(k, str) and isinstance(v, str) and _HEX.fullmatch(v)
            for k, v in entry.items()
        )
    ):
        return None
    return dict(entry)


def record_digests(directory: Path, checkpoint_sha256: str, digests: dict[str, str]) -> None:
    """Add (or replace) the entry of ``checkpoint_sha256``; written whole and replaced
    atomically (two runs writing at once lose an entry at worst, never the file). A folder
    that cannot be written is not an error: the digests are computed again next time."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        try:
            book = json.loads((directory / BOOK_NAME).read_text())
        except (OSError, ValueError, RecursionError):
            book = {}
        if not isinstance(book, dict):
            book = {}
        book[checkpoint_sha256] = dict(digests)
        handle, temporary = tempfile.mkstemp(dir=directory, suffix=".json.part")
        try:
            with os.fdopen(handle, "w") as stream:
                json.dump(book, stream, indent=1, sort_keys=True)
            os.replace(temporary, directory / BOOK_NAME)
        finally:
            Path(temporary).unlink(missing_ok=True)
    except OSError:
        pass
