"""How messages count and list: ``1 target`` / ``2 targets``, and a cut list that says how
much it left out (``a, b, ... and 26 more``), so that no message calls one thing plural or
hides that its list stops."""

from __future__ import annotations

from collections.abc import Sequence


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 target``, ``2 targets`` (``plural``: an irregular plural, e.g. ``"cases"``).

    Args:
        number: The count.
        noun: The singular noun.
        plural: The plural when it is not ``noun + "s"``; None: ``noun + "s"``.

    Returns:
        The count and the noun.
    """
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def listed(items: Sequence, limit: int = 10, separator: str = ", ") -> str:
    """``a, b, c``; longer than ``limit``: ``a, b, ... and 26 more`` (items shown by str).

    Args:
        items: The items to list, in order.
        limit: The most items shown.
        separator: Put between the items.

    Returns:
        The list as one line of text.
    """
    shown = separator.join(str(item) for item in items[:limit])
    return shown + (f"{separator}... and {len(items) - limit} more" if len(items) > limit else "")
