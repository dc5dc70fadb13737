"""Figures from result rows (matplotlib, Agg backend): PNG bytes, usable in papers.

Every curve is one configuration (model, prompter, refiner); its value at a step is the mean
over datasets of the dataset score (:func:`intrabench.evaluation.aggregate.per_dataset`), as the paper's
Average column and Figure 6.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import dataset_statistics, per_dataset


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=150, bbox_inches="tight")
    _pyplot().close(figure)
    return buffer.getvalue()


def panel_grid(count: int, max_columns: int, width: float, height: float):
    """A figure of ``count`` panels on a grid of at most ``max_columns`` columns, each
    ``width`` x ``height`` inches; unused grid cells hidden. Returns (figure, the ``count``
    axes in reading order)."""
    import math

    columns = min(max_columns, max(1, count))
    rows = max(1, math.ceil(count / columns))
    figure, axes = _pyplot().subplots(rows, columns, figsize=(width * columns, height * rows),
                                      squeeze=False)
    for axis in axes.ravel()[count:]:
        axis.axis("off")
    return figure, list(axes.ravel()[:count])


def configuration_label(model: str, prompter: str, refiner: str) -> str:
    return f"{model} | {prompter}" + ("" if refiner == "none" else f" + {refiner}")


def curve_frame(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Per (model, prompter, refiner, step): mean over datasets of the dataset score and the
    mean cumulative effort per target."""
    scores = per_dataset(rows, metric)
    keys = ["model", "prompter", "refiner", "step"]
    curve = scores.groupby(keys)[metric].mean().rename("score")
    effort = rows.groupby(keys)["cumulative_effort"].mean().rename("effort")
    return pd.concat([curve, effort], axis=1).reset_index()


def model_dimension(model_key: str) -> int | None:
    """2 or 3 for a registered model key (``name`` or ``name(params)``), else None."""
    from intrabench import registry

    try:
        return int(registry.models.get(str(model_key).split("(")[0]).dimension)
    except Exception:  # a label, or a model this installation does not have
        return None


def iteration_curves(rows: pd.DataFrame, metric: str = "dice", scale: float = 100.0) -> bytes:
    """Figure 6: score vs refinement iteration; 2D models left and 3D models right when both
    are present; dashed lines for scribble refinement."""
    plt = _pyplot()
    curves = curve_frame(rows, metric)
    curves["dimension"] = [model_dimension(m) for m in curves["model"]]
    panels = [("2D models", curves[curves["dimension"] == 2]), ("3D models", curves[curves["dimension"] == 3])]
    panels = [(t, c) for t, c in panels if not c.empty]
    if len(panels) < 2:
        panels = [("", curves)]
    figure, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.2), squeeze=False)
    for axis, (title, part) in zip(axes[0], panels):
        for (model, prompter, refiner), group in part.groupby(["model", "prompter", "refiner"]):
            style = "--" if "scribble" in str(refiner).lower() else "-"
            axis.plot(group["step"], group["score"] * scale, style, marker="o", markersize=3,
                      label=configuration_label(model, prompter, refiner))
        axis.set_xlabel("refinement iteration (0 = initial prompt)")
        axis.set_ylabel(f"{metric} x{scale:g} (mean over datasets)")
        axis.set_title(title or f"{metric} per refinement iteration")
        axis.grid(alpha=0.3)
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=1)
    return _png(figure)


def effort_curves(rows: pd.DataFrame, metric: str = "dice", scale: float = 100.0) -> bytes:
    """Score vs mean cumulative human effort (interactions per target)."""
    plt = _pyplot()
    curves = curve_frame(rows, metric)
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for (model, prompter, refiner), group in curves.groupby(["model", "prompter", "refiner"]):
        axis.plot(group["effort"], group["score"] * scale, marker="o", markersize=3,
                  linestyle="--" if "scribble" in str(refiner).lower() else "-",
                  label=configuration_label(model, prompter, refiner))
    if (curves["effort"] > 0).all():
        from matplotlib.ticker import LogLocator, ScalarFormatter

        axis.set_xscale("log")
        axis.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.xaxis.set_major_formatter(ScalarFormatter())
    axis.set_xlabel("interactions per target (cumulative, mean; log scale)")
    axis.set_ylabel(f"{metric} x{scale:g}")
    axis.set_title(f"{metric} vs human effort")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _png(figure)


def dataset_bars(rows: pd.DataFrame, metric: str = "dice", scale: float = 100.0,
                 n_boot: int = 1000) -> bytes:
    """Final-step score per dataset and configuration, with bootstrap 95% CIs over cases."""
    plt = _pyplot()
    last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
    final = rows[rows["step"] == last]
    stats = dataset_statistics(final, metric, config=("model", "prompter", "refiner"), n_boot=n_boot)
    datasets = sorted(stats["dataset"].unique())
    configs = list(stats.groupby(["model", "prompter", "refiner"]).groups)
    width = 0.8 / max(1, len(configs))
    figure, axis = plt.subplots(figsize=(max(6, 1.2 * len(datasets) * max(1, len(configs)) ** 0.5), 4.2))
    positions = np.arange(len(datasets))
    for i, config in enumerate(configs):
        part = stats[(stats["model"] == config[0]) & (stats["prompter"] == config[1])
                     & (stats["refiner"] == config[2])].set_index("dataset").reindex(datasets)
        heights = part["mean"].to_numpy() * scale
        errors = np.vstack([heights - part["ci_low"].to_numpy() * scale,
                            part["ci_high"].to_numpy() * scale - heights])
        axis.bar(positions + (i - (len(configs) - 1) / 2) * width, heights, width,
                 yerr=np.nan_to_num(errors), capsize=2, label=configuration_label(*config))
    axis.set_xticks(positions, datasets, rotation=20, ha="right")
    axis.set_ylabel(f"final {metric} x{scale:g}")
    axis.set_title(f"final {metric} per dataset (bars: 95% bootstrap CI over cases)")
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _png(figure)


#: orientation letters of each view in radiological display: (top, bottom, left, right)
VIEW_LETTERS: dict[str, tuple[str, str, str, str]] = {
    "axial": ("A", "P", "R", "L"),
    "coronal": ("S", "I", "R", "L"),
    "sagittal": ("S", "I", "A", "P"),
}


def radiological(plane: np.ndarray) -> np.ndarray:
    """A 2D cut of a canonical (z, y, x) volume (x -> R, y -> A, z -> S) as a radiologist
    reads it: an axial (y, x) plane with anterior up and the patient's right on the image's
    left; a coronal (z, x) plane with superior up and right on the left; a sagittal (z, y)
    plane with superior up and anterior on the left. In every view both axes of the canonical
    cut run the other way, so it is the plane reversed along both (row 0 drawn at the top)."""
    return plane[::-1, ::-1]


def overlay(image: np.ndarray, ground_truth: np.ndarray, prediction: np.ndarray | None,
            spacing: tuple[float, float, float], title: str = "", margin_mm: float = 15.0) -> bytes:
    """Axial, coronal and sagittal views through the target's centre, zoomed to the target:
    image in grey, ground truth contour green, prediction contour red (filled lightly).

    Arrays are (z, y, x) canonical; ``spacing`` (z, y, x) mm sets the aspect ratio. Views are
    in radiological display (:func:`radiological`), with orientation letters on their edges.
    """
    plt = _pyplot()
    from intrabench.evaluation.metrics import union_bbox

    box = union_bbox(ground_truth) or tuple(slice(0, s) for s in image.shape)
    center = [int(np.clip(np.median(np.flatnonzero(ground_truth.any(axis=tuple(o for o in range(3) if o != a)))), 0, s - 1))
              if ground_truth.any() else s // 2 for a, s in enumerate(image.shape)]
    pad = [int(np.ceil(margin_mm / s)) for s in spacing]
    window = [slice(max(0, b.start - p), min(n, b.stop + p)) for b, p, n in zip(box, pad, image.shape)]
    low, high = np.percentile(image[tuple(window)], [1, 99]) if image.size else (0, 1)
    views = [  # (name, 2D index, rows axis, columns axis)
        ("axial", (center[0], window[1], window[2]), 1, 2),
        ("coronal", (window[0], center[1], window[2]), 0, 2),
        ("sagittal", (window[0], window[1], center[2]), 0, 1),
    ]
    figure, axes = plt.subplots(1, 3, figsize=(10, 3.6))
    for axis, (name, index, rows_axis, columns_axis) in zip(axes, views):
        picture = radiological(image[index])
        truth = radiological(ground_truth[index])
        predicted = radiological(prediction[index]) if prediction is not None else None
        aspect = spacing[rows_axis] / spacing[columns_axis]
        axis.imshow(picture, cmap="gray", vmin=low, vmax=high, aspect=aspect, interpolation="nearest")
        if predicted is not None and predicted.any():
            axis.imshow(np.ma.masked_where(~predicted, predicted), cmap="autumn", alpha=0.3,
                        aspect=aspect, interpolation="nearest")
            axis.contour(predicted, levels=[0.5], colors="red", linewidths=1.0)
        if truth.any():
            axis.contour(truth, levels=[0.5], colors="lime", linewidths=1.0)
        axis.set_title(name, fontsize=9)
        axis.set_axis_off()
        top, bottom, left, right = VIEW_LETTERS[name]
        for text, x, y, ha, va in ((top, 0.5, 0.98, "center", "top"),
                                   (bottom, 0.5, 0.02, "center", "bottom"),
                                   (left, 0.02, 0.5, "left", "center"),
                                   (right, 0.98, 0.5, "right", "center")):
            axis.text(x, y, text, transform=axis.transAxes, ha=ha, va=va, color="yellow",
                      fontsize=8, fontweight="bold")
    if title:
        figure.suptitle(title, fontsize=9)
    return _png(figure)
