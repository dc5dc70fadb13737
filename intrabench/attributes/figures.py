"""Figures of results by target attribute: box plots per group and scatter plots (PNG bytes).

``targets``: :func:`intrabench.attributes.stratify.assign_groups`'s output collapsed per model
(:func:`~intrabench.attributes.stratify.collapse`): one row per model x target with its final
Dice, its ``attr_*`` values and ``group_*`` labels.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from intrabench.attributes.catalogue import BY_NAME
from intrabench.attributes.stratify import PRESENCE_GROUPS, TERTILE_GROUPS
from intrabench.plotting import png_bytes, pyplot

#: Attributes drawn as scatter plots (value against Dice), log scale where marked.
SCATTER = (("volume_ml", True), ("sphericity", False), ("cnr", False), ("elongation", False))


def grouped_attributes(targets: pd.DataFrame) -> list[str]:
    """Attributes whose groups split these targets (at least two groups with targets).

    Args:
        targets: One row per model x target with ``group_*`` columns (module docstring).

    Returns:
        The attribute names (without ``group_``), in column order.
    """
    found = []
    for column in targets.columns:
        if column.startswith("group_") and targets[column].dropna().nunique() >= 2:
            found.append(column.removeprefix("group_"))
    return found


def box_plots(targets: pd.DataFrame, metric: str = "dice_final", scale: float = 100.0) -> bytes:
    """One panel per grouped attribute: ``metric`` per group, a box per model side by side.

    Args:
        targets: One row per model x target (module docstring).
        metric: The score column drawn (a fraction, e.g. ``dice_final``).
        scale: Factor applied to it (100: Dice x100; the y axis is then 0-100).

    Returns:
        The figure as PNG bytes.
    """
    plt = pyplot()
    attributes = grouped_attributes(targets)
    models = sorted(targets["model"].unique())
    columns = 3
    rows = max(1, math.ceil(len(attributes) / columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.9 * rows), squeeze=False)
    colours = plt.get_cmap("tab10")
    width = 0.8 / max(1, len(models))
    for panel, attribute in zip(axes.flat, attributes):
        order = PRESENCE_GROUPS if BY_NAME[attribute].grouping == "presence" else TERTILE_GROUPS
        for index, model in enumerate(models):
            chosen = targets[targets["model"] == model]
            data = [
                chosen.loc[chosen[f"group_{attribute}"] == group, metric].dropna().to_numpy()
                * scale
                for group in order
            ]
            positions = np.arange(len(order)) + (index - (len(models) - 1) / 2) * width
            kept = [(d, p) for d, p in zip(data, positions) if d.size]
            if not kept:
                continue
            boxes = panel.boxplot(
                [d for d, _ in kept],
                positions=[p for _, p in kept],
                widths=width * 0.9,
                patch_artist=True,
                showfliers=True,
                flierprops={"markersize": 3},
            )
            for patch in boxes["boxes"]:
                patch.set_facecolor(colours(index % 10))
                patch.set_alpha(0.55)
        panel.set_xticks(np.arange(len(order)), order)
        spec = BY_NAME[attribute]
        panel.set_title(
            f"{attribute} ({spec.unit})" if spec.unit not in ("1", "true/false") else attribute,
            fontsize=9,
        )
        panel.set_ylim(-3, 103 if scale == 100 else None)
        panel.tick_params(labelsize=8)
    for panel in list(axes.flat)[len(attributes) :]:
        panel.set_visible(False)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=colours(i % 10), alpha=0.55) for i in range(len(models))
    ]
    figure.legend(
        handles,
        models,
        loc="upper center",
        ncol=min(4, len(models)),
        fontsize=8,
        bbox_to_anchor=(0.5, 1.02),
    )
    figure.supylabel(f"final {metric.removesuffix('_final')} x{scale:g}", fontsize=9)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    return png_bytes(figure)


def scatter_plots(targets: pd.DataFrame, metric: str = "dice_final", scale: float = 100.0) -> bytes:
    """``metric`` against the value of a few attributes, one point per model x target.

    Args:
        targets: One row per model x target with ``attr_*`` columns (module docstring).
        metric: The score column drawn (a fraction, e.g. ``dice_final``).
        scale: Factor applied to it (100: Dice x100).

    Returns:
        The figure as PNG bytes (one panel per attribute of :data:`SCATTER` present; a log
        x axis leaves out values <= 0).
    """
    plt = pyplot()
    chosen = [(name, log) for name, log in SCATTER if f"attr_{name}" in targets]
    figure, axes = plt.subplots(
        1, max(1, len(chosen)), figsize=(3.6 * max(1, len(chosen)), 3.2), squeeze=False
    )
    colours = plt.get_cmap("tab10")
    models = sorted(targets["model"].unique())
    for panel, (name, log) in zip(axes.flat, chosen):
        for index, model in enumerate(models):
            part = targets[targets["model"] == model]
            x = pd.to_numeric(part[f"attr_{name}"], errors="coerce").to_numpy(dtype=float)
            y = part[metric].to_numpy(dtype=float) * scale
            keep = np.isfinite(x) & np.isfinite(y) & ((x > 0) if log else True)
            panel.scatter(x[keep], y[keep], s=12, alpha=0.7, color=colours(index % 10), label=model)
        if log:
            panel.set_xscale("log")
        unit = BY_NAME[name].unit
        panel.set_xlabel(name + ("" if unit in ("1",) else f" ({unit})"), fontsize=9)
        panel.tick_params(labelsize=8)
    axes.flat[0].set_ylabel(f"final {metric.removesuffix('_final')} x{scale:g}", fontsize=9)
    axes.flat[0].legend(fontsize=7)
    figure.tight_layout()
    return png_bytes(figure)
