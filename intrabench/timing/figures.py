"""Dice against the clinician's accumulated time (the DAVIS interactive track's curve), PNG,
in the report's style: each configuration (model, prompter, refiner) has the colour and marker
it has in every other figure of the report, the panels share one y-range, and the 60 s line
of Dice@60s is labelled."""

from __future__ import annotations

import pandas as pd

from intrabench.plotting import (
    configuration_label,
    configuration_styles,
    legend_of_all_panels,
    line_style,
    panel_grid,
    png_bytes,
)
from intrabench.timing.budget import AT_SECONDS, time_curves
from intrabench.timing.human import TimeModel

#: markers on a curve: this many per panel width (the curve has 121 points)
MARKS_PER_CURVE = 8


def time_curve_plot(
    rows: pd.DataFrame,
    model: TimeModel,
    metric: str = "dice",
    styles: dict | None = None,
    waiting: str = "",
) -> bytes:
    """One panel per model: the mean ``metric`` x100 against accumulated seconds (human time +
    waiting for the model), one line per prompter / refiner, up to the budget. ``styles``:
    the report's :func:`~intrabench.plotting.configuration_styles` (computed from
    ``rows`` when not given); ``waiting``: how the waiting was counted, for the x label.

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model (budget and limits).
        metric: The metric column (0-1; plotted x100).
        styles: Colour and marker per configuration; None to compute them from ``rows``.
        waiting: Words for the x label on how waiting was counted ("" for none).

    Returns:
        The figure as PNG bytes.
    """
    styles = styles if styles is not None else configuration_styles(rows)
    curves = time_curves(rows, model, metric)
    models = sorted(curves["model"].unique()) if not curves.empty else []
    figure, axes = panel_grid(len(models), 2, 5.6, 3.6)
    top = 100 * float(curves["value"].max()) if not curves.empty else 100.0
    y_range = (0.0, min(100.0, top * 1.08) if top > 0 else 100.0)
    every = max(1, len(curves["seconds"].unique()) // MARKS_PER_CURVE) if not curves.empty else 1
    for axis, name in zip(axes, models):
        part = curves[curves["model"] == name]
        for (prompter, refiner), line in part.groupby(["prompter", "refiner"], sort=True):
            config = (name, prompter, refiner)
            axis.plot(
                line["seconds"],
                100 * line["value"],
                linewidth=1.4,
                markersize=4,
                markevery=every,
                label=configuration_label(*config),
                **line_style(styles, config),
            )
        axis.axvline(AT_SECONDS, color="grey", linestyle=":", linewidth=1)
        axis.annotate(
            f"{AT_SECONDS:g} s (Dice@60s)",
            (AT_SECONDS, y_range[1]),
            xytext=(3, -3),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=7,
            color="dimgrey",
        )
        axis.set_ylim(*y_range)
        axis.set_xlim(0, model.budget)
        axis.set_title(name, fontsize=9)
        axis.set_xlabel(
            "accumulated time (s): human + waiting for the model"
            + (f"\n({waiting})" if waiting else ""),
            fontsize=8,
        )
        axis.set_ylabel(f"{metric} x100 (mean over targets)")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    legend_of_all_panels(figure, axes)
    return png_bytes(figure)
