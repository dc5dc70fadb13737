"""Errors that are the user's to fix: the CLI prints them as one line, never as a traceback."""

from __future__ import annotations

import reprlib
import traceback
from pathlib import Path


class UserError(Exception):
    """A mistake in the user's input (config, data, paths) with an actionable message."""


class ConfigError(UserError):
    """The run configuration is invalid."""


class DataError(UserError):
    """An image or label cannot be used (unreadable, wrong shape, NaN, grid mismatch...)."""


def quoted(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters for a one-line message.

    The repr is built piecewise, only as far as needed, for containers: a huge or deeply nested
    value (a YAML alias bomb) costs no more than its first few elements.

    Args:
        value: Any object to show in a message (a config value, a path, a key).
        limit: The most characters returned; longer reprs end in ``...``.

    Returns:
        The shortened repr, at most ``limit`` characters long.
    """
    text = reprlib.Repr()
    text.maxlevel, text.maxlist, text.maxdict, text.maxtuple, text.maxset = 3, 8, 8, 8, 8
    text.maxstring = text.maxother = text.maxlong = limit
    shown = text.repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def one_line_cause(error: BaseException) -> str:
    """``Type: first line of the message (file:line)`` for one exception.

    The frame shown is the innermost one outside the installed libraries and Python's own (the
    plugin's or adapter's line that called into torch), followed by ``; raised in <library
    file:line>`` when the error came from deeper. The frame is unknown for errors that crossed a
    process boundary (their traceback stays there).

    Args:
        error: The exception, with its traceback when it was raised in this process.

    Returns:
        One line: the type, the message's first line and, when known, where it was raised.
    """
    message = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {message[0]}" if message else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if frames:
        own = next((f for f in reversed(frames) if not _in_a_library(f.filename)), frames[-1])
        text += f" ({_short_path(own.filename)}:{own.lineno}"
        innermost = frames[-1]
        if innermost is not own:
            text += f"; raised in {_short_path(innermost.filename)}:{innermost.lineno}"
        text += ")"
    return text


def _in_a_library(filename: str) -> bool:
    """Whether ``filename`` belongs to an installed package or to Python itself."""
    import sysconfig

    path = Path(filename)
    if "site-packages" in path.parts or "dist-packages" in path.parts:
        return True
    library = Path(sysconfig.get_paths()["stdlib"])
    return library in path.parents or filename.startswith("<")


def _short_path(filename: str) -> str:
    parts = Path(filename).parts
    for anchor in ("intrabench", "models", "prompters", "datasets", "site-packages"):
        if anchor in parts:
            index = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[index + (anchor == "site-packages") :])
    return Path(filename).name
