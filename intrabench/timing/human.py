"""How long a clinician takes per interaction, and the time budget (docs/time-aware.md).

Defaults and where they come from:

* click 2.4 s and scribble 10.9 s: Bearman et al., "What's the point: semantic segmentation
  with point supervision", ECCV 2016 (annotators on natural images: one point 2.4 s, one
  squiggle 10.9 s, per object);
* 2D box 7.0 s: Papadopoulos et al., "Extreme clicking for efficient object annotation",
  ICCV 2017 (a tight box from four extreme clicks, 7.0 s);
* 3D box 13.0 s and boundary slice 3.0 s: **no literature measures them**; a 3D box is taken
  as a 2D box on one slice plus choosing its two boundary slices (7.0 + 2 x 3.0 s);
* lasso 10.9 s: **no literature measures a lasso around a target**; it is one freehand stroke,
  taken as long as a squiggle;
* scrolling 0.1 s per slice: **no literature**; about ten slices per second with a mouse
  wheel;
* budget: 30 s per interaction and at most 8 interactions per target, the DAVIS interactive
  track's (each IntraBench target is its own episode, so the "proportional to the number of
  objects" rule gives 240 s per target).

The numbers are declared with the interaction kinds (:mod:`intrabench.types`'s element classes,
:func:`intrabench.prompt_elements.register_interaction`); a registered kind brings its own.

Medical readers are likely slower per interaction than crowd workers on photographs; the
defaults are a starting point, set them to your readers' in the run config (``time_model:``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from intrabench.errors import UserError
from intrabench.prompt_elements import HUMAN_SECONDS
from intrabench.types import INTERACTION_COST

if TYPE_CHECKING:  # imported where used: the run config imports this module (pandas: 0.45 s)
    import pandas as pd

#: seconds per interaction kind, by the registered kinds: each prompt element class declares
#: its ``seconds`` (:mod:`intrabench.prompt_elements`; the sources of the built-in ones above)
DEFAULT_SECONDS = HUMAN_SECONDS


#: the most seconds an interaction, a slice scrolled or a budget per interaction may take (an
#: hour): a larger value is a mistake (1e300 s per click discarded every step), not a reader
MAX_SECONDS = 3600.0
#: the most interactions a budget may count (DAVIS: 8)
MAX_INTERACTIONS = 1000

#: seconds: a number (an int or a float, never ``true`` or ``"2.4"``), finite, 0..an hour
Seconds = Annotated[float, Field(strict=True, ge=0, le=MAX_SECONDS)]


class TimeModel(BaseModel):
    """Seconds per interaction kind, per slice scrolled, and the budget per target.

    Every value is checked where it is given (the run config, a finished run's
    ``config.yaml``): numbers only (``"30"`` and ``true`` are refused, not read as 30 and 1),
    finite, in a plausible range; a misspelt key or kind is refused with the valid ones."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    #: a clinician's seconds per interaction kind (sources in docs/time-aware.md)
    seconds: dict[str, Seconds] = Field(default_factory=lambda: dict(DEFAULT_SECONDS))
    #: seconds per slice scrolled between interactions
    seconds_per_slice_scrolled: Seconds = 0.1
    #: the time budget per interaction (DAVIS: 30 s), seconds
    budget_per_interaction: float = Field(default=30.0, strict=True, gt=0, le=MAX_SECONDS)
    #: interactions in the budget: budget per target = budget_per_interaction x this
    max_interactions: int = Field(default=8, strict=True, ge=1, le=MAX_INTERACTIONS)
    #: what the clinician waits for the model: ``measured`` (each step's latency as measured
    #: in this run: moves with whatever else the machine runs) or ``table`` (each model's
    #: from ``latency_table``: the same numbers on any machine, any load)
    waiting: Literal["measured", "table"] = "measured"
    #: ``waiting: table``'s latencies: a JSON file written by ``intrabench latency RUN --save
    #: FILE`` (relative to the config file), or per model (its label) seconds inline:
    #: ``{random-walker-2d: {first: 0.4, warm: 0.1, scribble: 0.15}}`` (``first``: a case's
    #: first call; ``warm``: every later one, or per interaction kind)
    latency_table: str | dict[str, dict[str, float]] | None = None

    def waiting_from(self, latency_table: str | Path) -> TimeModel:
        """This time model, waiting as the latency table file ``latency_table`` says.

        Args:
            latency_table: A JSON file written by ``intrabench latency RUN --save FILE``.

        Returns:
            A copy with ``waiting: table`` and that file; this model is unchanged.
        """
        return self.model_copy(update={"waiting": "table", "latency_table": str(latency_table)})

    @model_validator(mode="after")
    def _table_given(self) -> TimeModel:
        if self.waiting == "table" and not self.latency_table:
            raise ValueError(
                "waiting: table needs a latency_table (a file written by "
                "'intrabench latency RUN --save FILE', or seconds per model)"
            )
        if self.waiting == "measured" and self.latency_table:
            raise ValueError(
                "latency_table is read only with 'waiting: table' (the default, "
                "measured, waits what the run measured): add 'waiting: table' or "
                "remove the latency_table"
            )
        return self

    @field_validator("latency_table")
    @classmethod
    def _inline_table(cls, value: Any) -> Any:
        if isinstance(value, dict):  # inline seconds: checked now, not when the tables run
            from intrabench.timing.latency_entries import checked_entries

            try:
                checked_entries(value, "latency_table")
            except UserError as error:
                raise ValueError(str(error)) from None
        return value

    @field_validator("seconds")
    @classmethod
    def _known_kinds(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(INTERACTION_COST))
        if unknown:
            import difflib

            hints = "".join(
                f" (did you mean '{close[0]}'?)"
                for name in unknown
                if (close := difflib.get_close_matches(name, list(INTERACTION_COST), 1))
            )
            raise ValueError(
                f"unknown interaction kinds {unknown}{hints}; valid: {', '.join(INTERACTION_COST)}"
            )
        return {**DEFAULT_SECONDS, **value}

    @property
    def budget(self) -> float:
        """Seconds available per target: budget_per_interaction x max_interactions."""
        return self.budget_per_interaction * self.max_interactions


def human_seconds(rows: pd.DataFrame, model: TimeModel) -> pd.Series:
    """The clinician's seconds for each row's step: interactions of each kind times their
    seconds, plus the slices scrolled; 0 for rows without the counts (runs made before).

    Args:
        rows: Step rows with ``interactions_<kind>`` and ``slices_scrolled`` counts.
        model: The time model: seconds per interaction kind and per slice scrolled.

    Returns:
        Float seconds per row, on ``rows``' index.
    """
    import pandas as pd

    total = pd.Series(0.0, index=rows.index)
    for kind, seconds in model.seconds.items():
        column = f"interactions_{kind}"
        if column in rows:
            total += rows[column].fillna(0).astype(float) * seconds
    if "slices_scrolled" in rows:
        total += rows["slices_scrolled"].fillna(0).astype(float) * model.seconds_per_slice_scrolled
    return total


def step_kind(rows: pd.DataFrame) -> pd.Series:
    """Each step's interaction kind: the kind with the most effort (interactions x their
    cost; ties: the order of ``INTERACTION_COST``, so a propagated box's step is "box2d");
    "none" for a step without interactions.

    Args:
        rows: Step rows with ``interactions_<kind>`` counts.

    Returns:
        The kind per row (e.g. "point", "box2d", "none"), on ``rows``' index.
    """
    import pandas as pd

    columns = [f"interactions_{k}" for k in INTERACTION_COST if f"interactions_{k}" in rows]
    if not columns:
        return pd.Series("none", index=rows.index)
    costs = np.array([INTERACTION_COST[c.removeprefix("interactions_")] for c in columns])
    counts = rows[columns].fillna(0).to_numpy(dtype=float) * costs
    kinds = np.array([c.removeprefix("interactions_") for c in columns])
    return pd.Series(
        np.where(counts.max(axis=1) > 0, kinds[counts.argmax(axis=1)], "none"), index=rows.index
    )
