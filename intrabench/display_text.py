r"""Names from a user's data shown where they cannot mislead: on a terminal, in an HTML page, in a
table, in a CSV a spreadsheet opens.

* :func:`escaped`: control and invisible formatting characters written as ``\u202e``: a
  right-to-left override in a case name would otherwise show 'evil' as 'live', an escape
  sequence would move a terminal's cursor;
* :func:`spreadsheet_cell` and :func:`spreadsheet_safe`: text that a spreadsheet would run as a
  formula (``=``, ``+``, ``-``, ``@``, a tab or carriage return first: the OWASP rule on CSV
  injection) gets a single quote in front. Only CSVs meant for spreadsheets; Parquet files keep
  every name exactly.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: Unicode categories shown escaped: controls (C0, C1, DEL), formatting characters (the bidi
#: overrides and isolates, zero-width spaces), lone surrogates, line and paragraph separators
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

#: what a spreadsheet reads as the start of a formula (full-width forms included: some
#: spreadsheets fold them)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def _shown(char: str) -> str:
    r"""``char`` written as its escape: ``\x1b``, ``\u202e``, ``\U000e0001``."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@functools.lru_cache(maxsize=8)
def _outside_plain_ascii(keep: str) -> re.Pattern[str]:
    """Every character but printable ASCII and ``keep``: the few a text may hide behind (the
    rest of a page is skipped at C speed)."""
    return re.compile(f"[^\\x20-\\x7e{re.escape(keep)}]")


def _escape_if_hidden(match: re.Match[str]) -> str:
    char = match.group()
    return _shown(char) if unicodedata.category(char) in _HIDDEN else char


def escaped(text: Any, keep: str = "") -> str:
    r"""``str(text)`` with every control or invisible formatting character (but those in
    ``keep``, e.g. ``"\n\t"`` for a whole page) written as its escape (``\u202e``,
    ``\x1b``); ordinary text, accents and scripts stay as they are.

    Args:
        text: Any value; converted with ``str``.
        keep: Characters left as they are.

    Returns:
        The text, safe to show in a terminal or a page.
    """
    return _outside_plain_ascii(keep).sub(_escape_if_hidden, str(text))


def spreadsheet_cell(value: Any) -> Any:
    """``value`` with a single quote in front when it is text a spreadsheet would run as a
    formula (:data:`FORMULA_STARTS`); anything else (numbers included) unchanged.

    Args:
        value: A cell's value.

    Returns:
        The value to write.
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_safe(frame: pd.DataFrame, escape: bool = False) -> pd.DataFrame:
    """A copy of ``frame`` for a CSV a spreadsheet opens: the text cells (and column names)
    that would be formulas quoted (:func:`spreadsheet_cell`); with ``escape`` also hidden
    characters shown escaped (:func:`escaped`). Numeric columns are left alone: ``-0.5``
    stays a number.

    Args:
        frame: The table to write.
        escape: Also escape hidden characters in text cells.

    Returns:
        The safe copy.
    """
    import pandas as pd

    def cell(value: Any) -> Any:
        if escape and isinstance(value, str):
            value = escaped(value)
        return spreadsheet_cell(value)

    safe = frame.copy()
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(
            safe[column]
        ) and not pd.api.types.is_datetime64_any_dtype(safe[column]):
            safe[column] = safe[column].map(cell)
    safe.columns = [cell(c) if isinstance(c, str) else c for c in safe.columns]
    return safe
