"""Figure style shared by every feature that draws (reports, attributes, clicks, timing,
review): the headless pyplot backend, PNG bytes, panel grids, one colour, marker, hatch and
line style per configuration (model, prompter, refiner), legends under the panels, and the
radiological display of a canonical (z, y, x) cut. It imports no feature, so the
features stand beside each other and never import one another's helpers.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd


def pyplot():
    """``matplotlib.pyplot`` on the headless ``Agg`` backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(figure) -> bytes:
    """A figure as PNG bytes (150 dpi, tight box); the figure is closed.

    Args:
        figure: A matplotlib figure.

    Returns:
        The PNG file's bytes.
    """
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=150, bbox_inches="tight")
    pyplot().close(figure)
    return buffer.getvalue()


def panel_grid(count: int, max_columns: int, width: float, height: float):
    """A figure of ``count`` panels on a grid of at most ``max_columns`` columns, each
    ``width`` x ``height`` inches; unused grid cells hidden.

    Args:
        count: The panels wanted (at least one is made).
        max_columns: The most columns of the grid.
        width: One panel's width in inches.
        height: One panel's height in inches.

    Returns:
        ``(figure, the count axes in reading order)``.
    """
    import math

    columns = min(max_columns, max(1, count))
    rows = max(1, math.ceil(count / columns))
    figure, axes = pyplot().subplots(
        rows, columns, figsize=(width * columns, height * rows), squeeze=False
    )
    for axis in axes.ravel()[count:]:
        axis.axis("off")
    return figure, list(axes.ravel()[:count])


def configuration_label(model: str, prompter: str, refiner: str) -> str:
    """A configuration's legend label: ``model | prompter``, plus `` + refiner`` unless ``none``.

    Args:
        model: The model's key.
        prompter: The prompter's key.
        refiner: The refiner's key (``"none"``: not refined).

    Returns:
        The label.
    """
    return f"{model} | {prompter}" + ("" if refiner == "none" else f" + {refiner}")


#: markers cycled after the ten colours: configuration i gets colour i % 10, marker i // 10
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
#: bar hatches, in the same role as the markers
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++", "**", "||")
CONFIGURATION = ["model", "prompter", "refiner"]


def configuration_styles(rows: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, str]]:
    """One style per configuration (model, prompter, refiner) of ``rows``, in sorted order:
    ``color`` (tab10, i % 10), ``marker`` and ``hatch`` (i // 10), ``linestyle`` (dashed for
    scribble refinement). Distinct for up to 100 configurations; pass the same mapping to
    every figure so a configuration looks the same throughout a report.

    Args:
        rows: Result rows with the model, prompter and refiner columns.

    Returns:
        (model, prompter, refiner) -> ``{"color": "#rrggbb", "marker", "hatch", "linestyle"}``.
    """
    from matplotlib import colormaps

    colours = colormaps["tab10"].colors
    configs = sorted(
        {
            tuple(str(v) for v in c)
            for c in rows[CONFIGURATION].drop_duplicates().itertuples(index=False)
        }
    )
    styles = {}
    for i, config in enumerate(configs):
        styles[config] = {
            "color": "#{:02x}{:02x}{:02x}".format(*(int(round(255 * v)) for v in colours[i % 10])),
            "marker": MARKERS[(i // 10) % len(MARKERS)],
            "hatch": HATCHES[(i // 10) % len(HATCHES)],
            "linestyle": "--" if "scribble" in config[2].lower() else "-",
        }
    return styles


def line_style(styles: dict, config: tuple) -> dict[str, object]:
    """The matplotlib ``color``, ``marker`` and ``linestyle`` keywords of one configuration in
    ``styles``.

    Args:
        styles: :func:`configuration_styles`'s mapping.
        config: (model, prompter, refiner); values are compared as text.

    Returns:
        The keywords for ``Axes.plot``.
    """
    style = styles[tuple(str(v) for v in config)]
    return {"color": style["color"], "marker": style["marker"], "linestyle": style["linestyle"]}


def legend_below(figure, axes, count: int) -> None:
    """One legend for the figure, under its panels, in up to two columns (stays readable when
    the figure is shown 800 px wide).

    Args:
        figure: The matplotlib figure.
        axes: Its axes; the first one's lines make the legend.
        count: The number of entries (more than 4: two columns).
    """
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=1 if count <= 4 else 2,
        fontsize=8,
        frameon=False,
    )


def legend_of_all_panels(figure, axes) -> None:
    """One legend under the figure with every panel's lines (each label once), in up to two
    columns; call after ``tight_layout``.

    Args:
        figure: The matplotlib figure.
        axes: The panels whose lines are gathered.
    """
    handles: dict[str, object] = {}
    for axis in axes:
        handles.update(zip(*reversed(axis.get_legend_handles_labels())))
    if handles:
        figure.legend(
            list(handles.values()),
            list(handles),
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=1 if len(handles) <= 4 else 2,
            fontsize=8,
            frameon=False,
        )


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
    cut run the other way, so it is the plane reversed along both (row 0 drawn at the top).

    Args:
        plane: A 2D cut of a canonical volume: (y, x), (z, x) or (z, y).

    Returns:
        A view of ``plane`` reversed along both axes.
    """
    return plane[::-1, ::-1]
