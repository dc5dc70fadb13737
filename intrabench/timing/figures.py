"""Dice against the clinician's accumulated time (the DAVIS interactive track's curve), PNG."""

from __future__ import annotations

import pandas as pd

from intrabench.reports.plots import _png, panel_grid
from intrabench.timing.budget import AT_SECONDS, time_curves
from intrabench.timing.human import TimeModel


def time_curve_plot(rows: pd.DataFrame, model: TimeModel, metric: str = "dice") -> bytes:
    """One panel per model: the mean ``metric`` x100 against accumulated seconds (human time +
    waiting for the model), one line per prompter / refiner, up to the budget."""
    curves = time_curves(rows, model, metric)
    models = sorted(curves["model"].unique()) if not curves.empty else []
    figure, axes = panel_grid(len(models), 2, 5.6, 3.6)
    for axis, name in zip(axes, models):
        part = curves[curves["model"] == name]
        for (prompter, refiner), line in part.groupby(["prompter", "refiner"], sort=True):
            label = prompter if refiner == "none" else f"{prompter} / {refiner}"
            axis.plot(line["seconds"], 100 * line["value"], label=label, linewidth=1.4)
        axis.axvline(AT_SECONDS, color="grey", linestyle=":", linewidth=1)
        axis.set_title(name, fontsize=9)
        axis.set_xlabel("accumulated time (s): human + waiting for the model")
        axis.set_ylabel(f"{metric} x100 (mean over targets)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6)
    figure.tight_layout()
    return _png(figure)
