"""``recorded``: clickability maps built from clicks people made (RClicks section 4.3).

``clicks_file`` is a CSV with one row per observed click and the columns ``dataset``,
``case``, ``target``, ``z``, ``y``, ``x`` (canonical voxel indices, as in IntraBench's prompts)
and optionally ``step`` (0: the first click on the target; k: the k-th correction; a row
without a step counts for every step). The map of a region is
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
    ) -> None:
        import pandas as pd

        path = Path(clicks_file).expanduser()
        if not path.is_file():
            raise ValueError(f"clicks_file not found: {path}")
        table = pd.read_csv(path, dtype={"dataset": str, "case": str, "target": str})
        missing = [c for c in _COLUMNS if c not in table]
        if missing:
            raise ValueError(
                f"{path}: missing columns {missing} (need {', '.join(_COLUMNS)}[, step])"
            )
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
        """The recorded clicks of ``region``'s target and step inside its crop, (N, ndim) local."""
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
        """Unnormalised click weights from the recorded clicks: float64 of the mask's shape, 0 outside it."""
        return self.weights_and_source(region)[0]

    def weights_and_source(self, region: ClickRegion) -> tuple[np.ndarray, str]:
        """The map of the recorded clicks, or the fallback's (``fallback:<name>``) where the
        region has none (or they give it no weight)."""
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
