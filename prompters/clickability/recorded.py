"""``recorded``: clickability maps built from clicks people made (RClicks section 4.3).

``clicks_file`` is a CSV with one row per observed click and the columns ``dataset``,
``case``, ``target``, ``z``, ``y``, ``x`` (canonical voxel indices, as in IntraBench's prompts)
and optionally ``step`` (0: the first click on the target; k: the k-th correction; a row
without a step counts for every step). Optional columns, as ``intrabench clicks collect import``
writes them (docs/measuring-people.md): ``rater`` (who clicked; ``raters`` keeps only the
clicks of those named), ``seconds`` (the time to the click, finite and >= 0) and any others,
which are read past. Coordinates must be whole numbers and steps whole numbers >= 0 (or
empty): a row with NaN, a fraction or text there is refused with its line. The map of a region is
:func:`~intrabench.clicks.observed.map_from_clicks` of the clicks recorded for its target and
step that fall in its crop (on its slice, for 2D clicks), restricted to the region. A region
without recorded clicks gets the ``fallback`` model's map (``distance`` by default); the
results count those (``click_map_fallbacks`` of ``click_map_regions`` per step) and the run
says how many at its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.clicks.observed import map_from_clicks
from intrabench.registry import clickability

_COLUMNS = ("dataset", "case", "target", "z", "y", "x")


def _bad_row(table, column: str, whole: bool, optional: bool) -> str | None:
    """Why a value of ``column`` cannot be used (its first such CSV line), or None: not a
    number, not finite, negative where only >= 0 is meant, a fraction where ``whole``; empty
    only when ``optional``."""
    import pandas as pd

    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    empty = table[column].isna().to_numpy()
    bad = ~np.isfinite(values) & ~(empty & optional)
    finite = np.where(np.isfinite(values), values, 0.0)
    if whole:
        bad |= np.isfinite(values) & (finite != np.round(finite))
    if column in ("step", "seconds"):
        bad |= np.isfinite(values) & (finite < 0)
    if not bad.any():
        return None
    line = int(np.flatnonzero(bad)[0]) + 2  # the header is line 1
    shown = str(table[column].iloc[line - 2])[:30]
    kind = "a whole number" if whole else "a number"
    return f"line {line}: {column} is {shown!r}, not {kind}" + (
        " >= 0" if column in ("step", "seconds") else ""
    )


@clickability.register
class RecordedClickability(ClickabilityModel):
    """Maps from observed clicks (see the module docstring)."""

    name: ClassVar[str] = "recorded"
    description: ClassVar[str] = "maps built from clicks people made (CSV), RClicks section 4.3"

    def __init__(
        self,
        clicks_file: str,
        click_sigma_mm: float = 5.0,
        error_sigma_mm: float = 2.0,
        fallback: str = "distance",
        raters: list[str] | None = None,
    ) -> None:
        import pandas as pd

        path = Path(clicks_file).expanduser()
        if not path.is_file():
            raise ValueError(f"clicks_file not found: {path}")
        table = pd.read_csv(path, dtype={"dataset": str, "case": str, "target": str, "rater": str})
        missing = [c for c in _COLUMNS if c not in table]
        if missing:
            raise ValueError(
                f"{path}: missing columns {missing} (need {', '.join(_COLUMNS)}[, step])"
            )
        checks = [("z", True, False), ("y", True, False), ("x", True, False)]
        checks += [(c, c == "step", True) for c in ("step", "seconds") if c in table]
        for column, whole, optional in checks:
            problem = _bad_row(table, column, whole, optional)
            if problem:
                raise ValueError(f"{path}: {problem}")
        if raters is not None:
            if "rater" not in table:
                raise ValueError(f"{path}: no rater column, so raters cannot choose clicks")
            unknown = sorted(set(map(str, raters)) - set(table["rater"].dropna()))
            if unknown:
                raise ValueError(f"{path}: no clicks of rater(s) {unknown}")
            table = table[table["rater"].isin([str(r) for r in raters])]
        if not click_sigma_mm > 0 or not error_sigma_mm > 0:
            raise ValueError("click_sigma_mm and error_sigma_mm must be > 0")
        if "step" not in table:
            table["step"] = np.nan
        self.clicks: dict[tuple[str, str, str], np.ndarray] = {
            key: group[["step", "z", "y", "x"]].to_numpy(dtype=np.float64)
            for key, group in table.groupby(["dataset", "case", "target"], sort=True)
        }
        self.click_sigma_mm = float(click_sigma_mm)
        self.error_sigma_mm = float(error_sigma_mm)
        if fallback == self.name:
            raise ValueError("the fallback of 'recorded' cannot be 'recorded'")
        self.fallback = clickability.create(fallback)
        self.needs_image = self.fallback.needs_image  # type: ignore[misc]

    def clicks_in(self, region: ClickRegion) -> np.ndarray:
        """The recorded clicks of ``region``'s target and step inside its crop, (N, ndim) local.

        Args:
            region: The region, placed by its ``identity``, ``step`` and ``origin``.

        Returns:
            Int64 (N, mask.ndim) indices into the region's mask ((0, ndim) when none).
        """
        rows = self.clicks.get(tuple(str(v) for v in region.identity))  # type: ignore[arg-type]
        if rows is None:
            return np.zeros((0, region.mask.ndim), dtype=np.int64)
        steps = rows[:, 0]
        rows = rows[np.isnan(steps) | (steps == region.step)]
        local = rows[:, 1:].astype(np.int64) - np.array(region.origin, dtype=np.int64)
        if region.mask.ndim == 2:  # a click on the region's slice only
            local = local[local[:, 0] == 0][:, 1:]
        inside = ((local >= 0) & (local < np.array(region.mask.shape))).all(axis=1)
        return local[inside]

    def weights(self, region: ClickRegion) -> np.ndarray:
        """Unnormalised click weights from the recorded clicks: float64 of the mask's shape, 0
        outside it.

        Args:
            region: The region to click in (mask, spacing in mm, identity, step, origin).

        Returns:
            The weights (the fallback's where the region has no recorded click).
        """
        return self.weights_and_source(region)[0]

    def weights_and_source(self, region: ClickRegion) -> tuple[np.ndarray, str]:
        """The map of the recorded clicks, or the fallback's (``fallback:<name>``) where the
        region has none (or they give it no weight).

        Args:
            region: The region to click in (mask, spacing in mm, identity, step, origin).

        Returns:
            (weights, source): float64 weights of the mask's shape, and this model's name or
            ``fallback:<name>``.
        """
        clicks = self.clicks_in(region)
        if len(clicks):
            try:
                observed = map_from_clicks(
                    clicks, region.mask, region.spacing, self.click_sigma_mm, self.error_sigma_mm
                )
                if (observed * region.mask).sum() > 0:
                    return np.where(region.mask, observed, 0.0), self.name
            except ValueError:
                pass
        return self.fallback.weights(region), f"fallback:{self.fallback.name}"
