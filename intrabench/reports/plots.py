"""Figures from result rows (matplotlib, Agg backend): PNG bytes, usable in papers.

Every curve is one configuration (model, prompter, refiner); its value at a step is the mean
over datasets of the dataset score (:func:`intrabench.evaluation.aggregate.per_dataset`), as the paper's
Average column and Figure 6.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import dataset_statistics, per_dataset
from intrabench.evaluation.metric_registry import metric_label
from intrabench.plotting import (
    CONFIGURATION,
    configuration_label,
    configuration_styles,
    legend_below,
    legend_of_all_panels,
    line_style,
    panel_grid,
    png_bytes,
    pyplot,
)


def curve_frame(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Per (model, prompter, refiner, step): mean over datasets of the dataset score and the
    mean cumulative effort per target.

    Args:
        rows: Result rows.
        metric: The metric column (on its own scale, Dice 0-1).

    Returns:
        Columns model, prompter, refiner, step, ``score`` and ``effort`` (interactions per
        target).
    """
    scores = per_dataset(rows, metric)
    keys = ["model", "prompter", "refiner", "step"]
    curve = scores.groupby(keys)[metric].mean().rename("score")
    effort = rows.groupby(keys)["cumulative_effort"].mean().rename("effort")
    return pd.concat([curve, effort], axis=1).reset_index()


def model_dimension(model_key: str) -> int | None:
    """2 or 3 for a registered model key (``name`` or ``name(params)``), else None.

    Args:
        model_key: A model's key as in the rows.

    Returns:
        The model's dimension, or None for a label or a model this installation does not have.
    """
    from intrabench import registry

    try:
        return int(registry.models.get(str(model_key).split("(")[0]).dimension)
    except Exception:  # a label, or a model this installation does not have
        return None


def iteration_curves(
    rows: pd.DataFrame, metric: str = "dice", scale: float = 100.0, styles: dict | None = None
) -> bytes:
    """Figure 6: score vs refinement iteration; 2D models left and 3D models right when both
    are present; dashed lines for scribble refinement.

    Args:
        rows: Result rows.
        metric: The metric column plotted.
        scale: Multiplies the scores (100: Dice x100).
        styles: Colour and line per configuration
            (:func:`~intrabench.plotting.configuration_styles`); None: made from ``rows``.

    Returns:
        The figure as PNG bytes.
    """
    plt = pyplot()
    styles = styles if styles is not None else configuration_styles(rows)
    curves = curve_frame(rows, metric)
    curves["dimension"] = [model_dimension(m) for m in curves["model"]]
    panels = [
        ("2D models", curves[curves["dimension"] == 2]),
        ("3D models", curves[curves["dimension"] == 3]),
    ]
    panels = [(t, c) for t, c in panels if not c.empty]
    if len(panels) < 2:
        panels = [("", curves)]
    figure, axes = plt.subplots(
        1, len(panels), figsize=(3.6 * len(panels) + 1.5, 3.6), squeeze=False
    )
    for axis, (title, part) in zip(axes[0], panels):
        for config, group in part.groupby(CONFIGURATION):
            axis.plot(
                group["step"],
                group["score"] * scale,
                markersize=4,
                label=configuration_label(*config),
                **line_style(styles, config),
            )
        axis.set_xlabel("refinement iteration (0 = initial prompt)")
        axis.set_ylabel(f"{metric_name(metric)} x{scale:g} (mean over datasets)")
        axis.set_title(title or f"{metric_name(metric)} per refinement iteration", fontsize=10)
        axis.grid(alpha=0.3)
        axis.xaxis.get_major_locator().set_params(integer=True)
    figure.tight_layout()
    legend_of_all_panels(figure, list(axes[0]))
    return png_bytes(figure)


def _log_effort_axis(axis, efforts: pd.Series) -> None:
    """A log x axis labelled 1, 2, 5, 10, ... (plain numbers, no labels on minor ticks)."""
    if len(efforts) and (efforts > 0).all():
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

        axis.set_xscale("log")
        axis.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.xaxis.set_major_formatter(ScalarFormatter())
        axis.xaxis.set_minor_formatter(NullFormatter())


def metric_name(metric: str) -> str:
    """How a metric column is written in figures: its registered label (``dice`` -> Dice,
    ``nsd`` -> NSD); another column as it is.

    Args:
        metric: The metric column's name.

    Returns:
        The label.
    """
    return metric_label(metric)


def effort_curves(
    rows: pd.DataFrame, metric: str = "dice", scale: float = 100.0, styles: dict | None = None
) -> bytes:
    """Score vs mean cumulative human effort (interactions per target).

    Args:
        rows: Result rows.
        metric: The metric column plotted.
        scale: Multiplies the scores (100: Dice x100).
        styles: Colour and line per configuration; None: made from ``rows``.

    Returns:
        The figure as PNG bytes (effort on a log axis).
    """
    plt = pyplot()
    styles = styles if styles is not None else configuration_styles(rows)
    curves = curve_frame(rows, metric)
    figure, axis = plt.subplots(figsize=(6.0, 3.6))
    for config, group in curves.groupby(CONFIGURATION):
        axis.plot(
            group["effort"],
            group["score"] * scale,
            markersize=4,
            label=configuration_label(*config),
            **line_style(styles, config),
        )
    _log_effort_axis(axis, curves["effort"])
    axis.set_xlabel("interactions per target (cumulative, mean; log scale)")
    axis.set_ylabel(f"{metric_name(metric)} x{scale:g}")
    axis.set_title(f"{metric_name(metric)} vs human effort (mean over datasets)", fontsize=10)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    legend_below(figure, [axis], curves.groupby(CONFIGURATION).ngroups)
    return png_bytes(figure)


def dataset_effort_curves(
    rows: pd.DataFrame,
    metric: str = "dice",
    scale: float = 100.0,
    n_boot: int = 1000,
    styles: dict | None = None,
) -> bytes:
    """One panel per dataset: the dataset score at each step against the mean cumulative
    interactions per target, with its bootstrap 95% CI over cases as a band.

    Args:
        rows: Result rows.
        metric: The metric column plotted.
        scale: Multiplies the scores (100: Dice x100).
        n_boot: Bootstrap resamples of the cases for the bands.
        styles: Colour and line per configuration; None: made from ``rows``.

    Returns:
        The figure as PNG bytes.
    """
    styles = styles if styles is not None else configuration_styles(rows)
    stats = dataset_statistics(rows, metric, config=(*CONFIGURATION, "step"), n_boot=n_boot)
    effort = rows.groupby([*CONFIGURATION, "step", "dataset"])["cumulative_effort"].mean()
    stats = stats.join(effort.rename("effort"), on=[*CONFIGURATION, "step", "dataset"])
    datasets = sorted(stats["dataset"].unique())
    figure, axes = panel_grid(len(datasets), 2, 3.6, 3.0)
    for axis, dataset in zip(axes, datasets):
        part = stats[stats["dataset"] == dataset]
        for config, group in part.groupby(CONFIGURATION):
            group = group.sort_values("step")
            style = line_style(styles, config)
            axis.fill_between(
                group["effort"],
                group["ci_low"] * scale,
                group["ci_high"] * scale,
                color=style["color"],
                alpha=0.15,
                linewidth=0,
            )
            axis.plot(
                group["effort"],
                group["mean"] * scale,
                markersize=4,
                label=configuration_label(*config),
                **style,
            )
        _log_effort_axis(axis, part["effort"])
        axis.set_title(dataset, fontsize=10)
        axis.set_xlabel("interactions per target (log)", fontsize=9)
        axis.set_ylabel(f"{metric_name(metric)} x{scale:g}", fontsize=9)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    legend_below(figure, axes, stats.groupby(CONFIGURATION).ngroups)
    return png_bytes(figure)


def dataset_bars(
    rows: pd.DataFrame,
    metric: str = "dice",
    scale: float = 100.0,
    n_boot: int = 1000,
    styles: dict | None = None,
) -> bytes:
    """Final-step score per dataset and configuration, with bootstrap 95% CIs over cases.

    Args:
        rows: Result rows.
        metric: The metric column plotted.
        scale: Multiplies the scores (100: Dice x100).
        n_boot: Bootstrap resamples of the cases for the error bars.
        styles: Colour per configuration; None: made from ``rows``.

    Returns:
        The figure as PNG bytes.
    """
    plt = pyplot()
    last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
    final = rows[rows["step"] == last]
    stats = dataset_statistics(
        final, metric, config=("model", "prompter", "refiner"), n_boot=n_boot
    )
    datasets = sorted(stats["dataset"].unique())
    configs = list(stats.groupby(["model", "prompter", "refiner"]).groups)
    width = 0.8 / max(1, len(configs))
    figure, axis = plt.subplots(
        figsize=(min(7.2, max(5.0, 1.0 * len(datasets) * max(1, len(configs)) ** 0.5)), 3.6)
    )
    positions = np.arange(len(datasets))
    styles = styles if styles is not None else configuration_styles(rows)
    for i, config in enumerate(configs):
        part = (
            stats[
                (stats["model"] == config[0])
                & (stats["prompter"] == config[1])
                & (stats["refiner"] == config[2])
            ]
            .set_index("dataset")
            .reindex(datasets)
        )
        heights = part["mean"].to_numpy() * scale
        errors = np.vstack(
            [
                heights - part["ci_low"].to_numpy() * scale,
                part["ci_high"].to_numpy() * scale - heights,
            ]
        )
        style = styles[tuple(str(v) for v in config)]
        where = positions + (i - (len(configs) - 1) / 2) * width
        axis.bar(
            where,
            heights,
            width,
            label=configuration_label(*config),
            color=style["color"],
            hatch=style["hatch"],
            edgecolor="white",
            linewidth=0.3,
        )
        interval = np.isfinite(errors).all(axis=0)
        if interval.any():
            axis.errorbar(
                where[interval],
                heights[interval],
                yerr=errors[:, interval],
                fmt="none",
                ecolor="black",
                capsize=2,
                linewidth=0.8,
            )
        for x, height, n_cases in zip(
            where[~interval], heights[~interval], part["n_cases"].to_numpy()[~interval]
        ):
            if np.isfinite(height):  # one case: there is no interval to draw; say so
                axis.text(x, height, f"n={int(n_cases)}", ha="center", va="bottom", fontsize=6)
    axis.set_xticks(positions, datasets, rotation=20, ha="right")
    axis.set_ylabel(f"final {metric_name(metric)} x{scale:g}")
    axis.set_title(
        f"final {metric_name(metric)} per dataset (error bars: 95% bootstrap CI "
        "over cases; n=1: one case, no interval)",
        fontsize=10,
    )
    axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    legend_below(figure, [axis], len(configs))
    return png_bytes(figure)
