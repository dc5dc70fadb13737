"""Result rows checked before they are summarised: every metric within its range.

A run writes each metric in the range its declaration gives
(:attr:`intrabench.evaluation.metric_registry.Metric.value_range`: Dice, IoU and NSD in
[0, 1], HD95 a finite distance >= 0), NaN only where the metric may be undefined (an empty
mask, surface metrics not computed at that step). A value outside (Dice NaN, 1e308, -1 or 2)
comes from a damaged or edited run folder; the tables averaged it in silently (a mean Dice
above 100) or failed with a traceback. :func:`checked_rows` refuses it in one line naming the
row. io does not read the metric declarations: the caller hands the ranges in
(:func:`intrabench.evaluation.metric_registry.metric_ranges`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from intrabench.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

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


def checked_rows(
    rows: pd.DataFrame,
    source: str | Path,
    ranges: Mapping[str, tuple[float, float, bool]],
) -> pd.DataFrame:
    """The result rows, once every metric value is checked against its range.

    Args:
        rows: Result rows (one per step; :func:`intrabench.io.results.load_results`).
        source: Where they were read from (a run folder), named in the message.
        ranges: Per metric column: (lowest, highest, whether NaN is a value the run writes)
            (:func:`intrabench.evaluation.metric_registry.metric_ranges`); every value that
            is not NaN must also be finite. A column the rows lack is not checked.

    Returns:
        ``rows`` unchanged.

    Raises:
        DataError: A value is outside its range (or text): the message names the first such
            row (its dataset, case, target, model, prompter, refiner, seed and step), the
            value, the range and how many rows are outside.
    """
    import pandas as pd

    for column, (low, high, nan_allowed) in ranges.items():
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
