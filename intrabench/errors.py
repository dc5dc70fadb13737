"""Errors that are the user's to fix: the CLI prints them as one line, never as a traceback."""

from __future__ import annotations

import reprlib


class UserError(Exception):
    """A mistake in the user's input (config, data, paths) with an actionable message."""


class ConfigError(UserError):
    """The run configuration is invalid."""


class DataError(UserError):
    """An image or label cannot be used (unreadable, wrong shape, NaN, grid mismatch...)."""


def quoted(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters for a one-line message (a 375-byte YAML alias
    bomb expanded to a 2.1 GB repr in an error once); the repr is built piecewise only as far as
    needed for containers."""
    text = reprlib.Repr()
    text.maxlevel, text.maxlist, text.maxdict, text.maxtuple, text.maxset = 3, 8, 8, 8, 8
    text.maxstring = text.maxother = text.maxlong = limit
    shown = text.repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."
