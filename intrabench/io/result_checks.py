"""Result rows checked before they are summarised: every metric within its range.

A run writes Dice, IoU and NSD in [0, 1] and HD95 as a finite distance >= 0 (NaN where it is
not defined: an empty mask, surface metrics not computed at that step). A value outside (Dice
NaN, 1e308, -1 or 2) comes from a damaged or edited run folder; the tables averaged it in
silently (a mean Dice above 100) or failed with a traceback. :func:`checked_rows` refuses it in
one line naming the row.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from intrabench.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

#: per metric column: (lowest, highest, whether NaN is a value the run writes); every value
#: that is not NaN must also be finite
METRIC_RANGES: dict[str, tuple[float, float, bool]] = {
    "dice": (0.0, 1.0, False),
    "iou": (0.0, 1.0, False),
    "nsd": (0.0, 1.0, True),
    "hd95": (0.0, float("inf"), True),
}

#: the columns that name a row in the message
_IDENTITY = ("dataset", "case", "target", "model", "prompter", "refiner", "seed", "step")


def _outside(values: np.ndarray, low: float, high: float, nan_allowed: bool) -> np.ndarray:
    """Boolean per value: not a number within [low, high] (NaN allowed or not; inf never)."""
    inside = np.isfinite(values) & (values >= low) & (values <= high)
    return ~inside & ~(np.isnan(values) & nan_allowed)


def _shown(value: object) -> str:
    """A value as the message shows it: ``nan``, ``1e+308``, ``-1``; text quoted, cut."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return f"{float(value):g}"
    return repr(value)[:40]


def _row_name(rows: pd.DataFrame, position: int) -> str:
    row = rows.iloc[position]
    return ", ".join(f"{column} {row[column]}" for column in _IDENTITY if column in rows)


def checked_rows(rows: pd.DataFrame, source: str | Path) -> pd.DataFrame:
    """``rows`` unchanged when each metric column of :data:`METRIC_RANGES` holds numbers in
    its range; else DataError naming the first row outside (its dataset, case, target, model,
    prompter, refiner, seed and step), the value, the range and how many rows are outside."""
    import pandas as pd

    for column, (low, high, nan_allowed) in METRIC_RANGES.items():
        if column not in rows or rows.empty:
            continue
        values = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=np.float64)
        text = rows[column].notna().to_numpy() & np.isnan(values)  # not a number at all
        bad = np.flatnonzero(_outside(values, low, high, nan_allowed) | text)
        if not bad.size:
            continue
        allowed = f"{low:g}..{high:g}" if np.isfinite(high) else f"finite, >= {low:g}"
        more = f" (and {bad.size - 1} more row(s))" if bad.size > 1 else ""
        raise DataError(
            f"{source}: {column} = {_shown(rows[column].iloc[bad[0]])} is outside its "
            f"range ({allowed}{', or NaN' if nan_allowed else ''}) in the row of "
            f"{_row_name(rows, int(bad[0]))}{more}: the results are damaged or "
            "edited; restore the run folder or re-run those work units"
        )
    return rows
