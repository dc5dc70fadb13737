"""Argument types of the command line: numbers checked where argparse reads them, so that a
value no command can use is one line of usage error, not a traceback or an empty result."""

from __future__ import annotations

import argparse

#: bootstrap resamples at most: more change nothing a table shows, and cost minutes
MAX_BOOTSTRAP = 100_000


def positive_number(text: str) -> float:
    """A finite number > 0 (a scale factor).

    Args:
        text: The option's value as typed.

    Returns:
        The number.

    Raises:
        ValueError: Not a number (argparse reports it as a usage error).
        argparse.ArgumentTypeError: Not finite and > 0.
    """
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def count(text: str) -> int:
    """A whole number >= 0 (a seed, a number of figures).

    Args:
        text: The option's value as typed.

    Returns:
        The number.

    Raises:
        ValueError: Not a whole number (argparse reports it as a usage error).
        argparse.ArgumentTypeError: Below 0.
    """
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def resamples(text: str) -> int:
    """Bootstrap resamples: 1 to :data:`MAX_BOOTSTRAP` (0 has nothing to resample; more than that
    changes nothing a table shows and costs minutes).

    Args:
        text: The option's value as typed.

    Returns:
        The number of resamples.

    Raises:
        ValueError: Not a whole number (argparse reports it as a usage error).
        argparse.ArgumentTypeError: Outside 1 to :data:`MAX_BOOTSTRAP`.
    """
    value = int(text)
    if not 1 <= value <= MAX_BOOTSTRAP:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_BOOTSTRAP:,}, got {text}")
    return value
