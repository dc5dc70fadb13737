"""Figures of a robustness run (PNG bytes): IoU against clicks for the baseline strategy, G1
and Gn (RClicks Figure 8, left), and every target's mean against its standard deviation of
the first click's IoU over the clicking groups (RClicks Figure 8, right)."""

from __future__ import annotations

import pandas as pd

from intrabench.clicks.robustness import CONFIGURATION, robustness_rows
from intrabench.plotting import panel_grid, png_bytes, pyplot


def iou_curves(rows: pd.DataFrame) -> bytes:
    """One panel per model x prompter x refiner: mean IoU after each round (x: clicks, 1 =
    the initial prompt) over the targets, for the baseline strategy, G1 and the last group.

    Args:
        rows: Step rows of a robustness run (``click_group``, ``click_groups``, ``iou``).

    Returns:
        The figure as PNG bytes (IoU x100).
    """
    rows = robustness_rows(rows)
    configurations = sorted(rows.groupby(CONFIGURATION).groups)
    figure, axes = panel_grid(len(configurations), 3, 4.4, 3.2)
    styles = {"baseline": ("black", "--"), "G1": ("tab:red", "-"), "last": ("tab:green", "-")}
    for axis, configuration in zip(axes, configurations):
        part = rows[
            (rows[CONFIGURATION] == pd.Series(configuration, index=CONFIGURATION)).all(axis=1)
        ]
        n_groups = int(part["click_groups"].iloc[0])
        for strategy, style in (("baseline", "baseline"), ("G1", "G1"), (f"G{n_groups}", "last")):
            curve = part[part["click_group"] == strategy].groupby("step")["iou"].mean()
            if curve.empty:
                continue
            colour, line = styles[style]
            axis.plot(
                curve.index + 1,
                100 * curve.to_numpy(),
                color=colour,
                linestyle=line,
                label=strategy,
                marker="o",
                markersize=3,
            )
        axis.set_title(" / ".join(configuration), fontsize=8)
        axis.set_xlabel("clicks (rounds)")
        axis.set_ylabel("IoU x100 (mean over targets)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    return png_bytes(figure)


def mean_std_scatter(targets: pd.DataFrame) -> bytes:
    """Each target's mean (x) against standard deviation (y) of the first click's IoU over the
    clicking groups, one colour per model (``targets``: per-target statistics).

    Args:
        targets: One row per target and configuration with ``model``, ``iou_1_mean`` and
            ``iou_1_std`` (0-1).

    Returns:
        The figure as PNG bytes (both axes x100).
    """
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5.2, 4.0))
    colours = plt.get_cmap("tab10")
    for index, (model, part) in enumerate(targets.groupby("model", sort=True)):
        axis.scatter(
            100 * part["iou_1_mean"],
            100 * part["iou_1_std"],
            s=14,
            alpha=0.75,
            color=colours(index % 10),
            label=model,
        )
    axis.set_xlabel("mean IoU@1 over clicking groups (x100)")
    axis.set_ylabel("std of IoU@1 over clicking groups (x100)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    return png_bytes(figure)
