"""The report's image overlays: the worst targets per model (a failure gallery), drawn the way a
radiologist reads them, with the prompts the simulated clinician gave.

Each overlay is one target of one configuration and seed: axial, coronal and sagittal views
through the target (radiological display, orientation letters on the edges, see
:func:`intrabench.plotting.radiological`), ground truth as a green contour, the prediction
as a red contour with a light fill. With ``save_predictions: all`` the first step and the final
step are drawn side by side (one row each, on the same slices); otherwise the final step alone.

Prompts drawn: clicks with their sign (positive: blue disc, negative: magenta cross), 2D and 3D
boxes (yellow, dashed), scribbles (blue or magenta dots), lassos (a closed blue or magenta line
on their axial slice), every interaction up to the row's
step. A click is drawn in a view when it lies on that view's plane; the axial view is cut
through the slice holding most of the first prompt's parts, and says how many clicks lie on
other slices. Slice indices in titles are canonical voxel indices (z, y, x) of the case's
volume, as in the result rows' prompts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.masks import bounding_box, union_of_boxes
from intrabench.plotting import VIEW_LETTERS, png_bytes, pyplot, radiological
from intrabench.prompt_elements import BoxMark, Click, Stroke
from intrabench.types import Prompt

#: marker colours of the prompts (the contours are green: truth, red: prediction)
POSITIVE, NEGATIVE, BOX = "#2f7fff", "#ff3fd2", "#ffd400"


@dataclass
class StepPanel:
    """One row of an overlay: a step's prediction (canonical (z, y, x) bool, or None), the
    prompt up to that step, and its Dice (0-1, shown x100)."""

    label: str
    prediction: np.ndarray | None
    prompt: Prompt | None = None
    dice: float | None = None


@dataclass
class GalleryItem:
    """A drawn overlay: the PNG, its file-name stem, caption, the model it belongs to and the
    steps drawn (one row each)."""

    name: str
    caption: str
    png: bytes
    model: str
    steps: tuple[int, ...] = ()


# -- where to cut ---------------------------------------------------------------------------
def prompt_slices(prompt: Prompt | None) -> Counter:
    """How many parts of ``prompt`` lie on each axial slice z: clicks, 2D boxes, scribble
    voxels (one per scribble and slice), lassos and a 3D box's middle slice.

    Args:
        prompt: The prompt, its marks in canonical (z, y, x) voxels; None: no prompt.

    Returns:
        z index -> count; slices holding nothing are absent.
    """
    counts: Counter = Counter()
    for mark in prompt.marks() if prompt is not None else []:
        if isinstance(mark, Click):
            counts[int(mark.zyx[0])] += 1
        elif isinstance(mark, BoxMark):
            counts[(mark.low[0] + mark.high[0]) // 2 if mark.volume else int(mark.low[0])] += 1
        elif mark.closed:
            counts[int(mark.voxels[0, 0])] += 1
        else:
            counts.update({int(z) for z in mark.voxels[:, 0]})
    return counts


def cut_centre(ground_truth: np.ndarray, prompt: Prompt | None) -> tuple[int, int, int]:
    """(z, y, x) of the planes to show: y and x through the target's median voxel; z the axial
    slice holding most of ``prompt``'s parts (the nearest to the target's median of ties),
    else the target's median.

    Args:
        ground_truth: The target's boolean mask, canonical (z, y, x) (empty: the volume's
            centre).
        prompt: The prompt whose parts pick the axial slice; None: none.

    Returns:
        The voxel through which the three planes are cut.
    """
    shape = ground_truth.shape
    if ground_truth.any():
        median = []
        for axis in range(3):
            others = tuple(a for a in range(3) if a != axis)
            present = np.flatnonzero(ground_truth.any(axis=others))
            median.append(int(np.clip(np.median(present), 0, shape[axis] - 1)))
    else:
        median = [s // 2 for s in shape]
    counts = {z: n for z, n in prompt_slices(prompt).items() if 0 <= z < shape[0]}
    if counts:
        most = max(counts.values())
        median[0] = min(
            (z for z, n in counts.items() if n == most), key=lambda z: (abs(z - median[0]), z)
        )
    return median[0], median[1], median[2]


def zoom_window(
    shape: tuple[int, ...], masks: list[np.ndarray], spacing: tuple[float, ...], margin_mm: float
) -> list[slice]:
    """Per axis, the box of every non-empty mask grown by ``margin_mm`` (whole volume when all
    are empty).

    Args:
        shape: The volume's (z, y, x) shape in voxels.
        masks: Boolean masks of that shape (None entries are passed over).
        spacing: Voxel spacing in mm, (z, y, x).
        margin_mm: The margin around the masks' box, in mm.

    Returns:
        One half-open slice per axis (z, y, x), clipped to the volume.
    """
    box = union_of_boxes(bounding_box(m) for m in masks if m is not None)
    if box is None:
        return [slice(0, s) for s in shape]
    return [
        slice(
            max(0, b.start - int(np.ceil(margin_mm / step))),
            min(size, b.stop + int(np.ceil(margin_mm / step))),
        )
        for b, size, step in zip(box, shape, spacing)
    ]


#: (view name, fixed canonical axis, rows axis, columns axis)
VIEWS = (("axial", 0, 1, 2), ("coronal", 1, 0, 2), ("sagittal", 2, 0, 1))
_AXIS_NAMES = "zyx"


def view_position(
    point_zyx, rows_axis: int, columns_axis: int, window: list[slice]
) -> tuple[float, float]:
    """(row, column) in a radiological view cut to ``window`` of a canonical voxel (or of
    several: ``point_zyx`` indexed by axis gives arrays): both axes reversed, so voxel
    ``window.stop - 1`` is row (or column) 0.

    Args:
        point_zyx: A canonical (z, y, x) voxel, or per axis an array of coordinates.
        rows_axis: The canonical axis (0, 1 or 2) that runs down the view.
        columns_axis: The canonical axis that runs across the view.
        window: The view's per-axis slices (:func:`zoom_window`).

    Returns:
        ``(row, column)`` as floats (or arrays), in pixels of the cut view.
    """
    return (
        window[rows_axis].stop - 1 - np.asarray(point_zyx[rows_axis], dtype=float),
        window[columns_axis].stop - 1 - np.asarray(point_zyx[columns_axis], dtype=float),
    )


# -- drawing --------------------------------------------------------------------------------
def _draw_click(axis, row_column: tuple[float, float], label: int) -> None:
    """A click at (row, column): a positive one a blue dot, a negative one a magenta cross."""
    row, column = row_column
    if int(label) == 1:
        axis.plot(
            column,
            row,
            "o",
            markersize=7,
            markerfacecolor=POSITIVE,
            markeredgecolor="white",
            markeredgewidth=1.0,
            zorder=6,
        )
    else:
        axis.plot(
            column,
            row,
            "X",
            markersize=8,
            markerfacecolor=NEGATIVE,
            markeredgecolor="white",
            markeredgewidth=0.8,
            zorder=6,
        )


def _draw_stroke(
    axis, stroke: Stroke, fixed: int, plane: int, axes: tuple[int, int], window: list[slice]
) -> None:
    """An open stroke as dots where its voxels lie on the plane; a closed one (a loop on one
    axial slice) as a solid line, in the axial view of its slice only."""
    color = POSITIVE if int(stroke.label) == 1 else NEGATIVE
    voxels = np.asarray(stroke.voxels).reshape(-1, 3)
    if not stroke.closed:
        voxels = voxels[voxels[:, fixed] == plane]
        if len(voxels):
            rows, columns = view_position(voxels.T, *axes, window)
            axis.plot(columns, rows, ".", markersize=2.5, zorder=5, color=color)
        return
    if fixed != 0 or not len(voxels) or int(voxels[0, 0]) != plane:
        return
    loop = np.vstack([voxels, voxels[:1]])
    rows, columns = view_position(loop.T, *axes, window)
    axis.plot(columns, rows, "-", linewidth=1.4, zorder=5, color=color)


def _draw_prompt(
    axis,
    prompt: Prompt,
    fixed: int,
    plane: int,
    rows_axis: int,
    columns_axis: int,
    window: list[slice],
) -> int:
    """Draw the parts of ``prompt`` on the plane ``fixed`` = ``plane``; returns how many clicks
    lie off it."""
    from matplotlib.patches import Rectangle

    off_plane = 0
    marks = prompt.marks()
    for mark in marks:
        if isinstance(mark, Click):
            if int(mark.zyx[fixed]) != plane:
                off_plane += 1
                continue
            _draw_click(axis, view_position(mark.zyx, rows_axis, columns_axis, window), mark.label)
    boxes = [  # inclusive (low, high) corners as canonical points
        (mark.low, mark.high)
        for mark in marks
        if isinstance(mark, BoxMark)
        and (
            mark.low[fixed] <= plane <= mark.high[fixed]
            if mark.volume
            else fixed == 0 and int(mark.low[0]) == plane
        )
    ]
    for low, high in boxes:
        # the high corner is the top-left one in the reversed view
        row, column = view_position(high, rows_axis, columns_axis, window)
        axis.add_patch(
            Rectangle(
                (column - 0.5, row - 0.5),
                high[columns_axis] - low[columns_axis] + 1,
                high[rows_axis] - low[rows_axis] + 1,
                fill=False,
                edgecolor=BOX,
                linestyle="--",
                linewidth=1.2,
                zorder=5,
            )
        )
    for mark in marks:
        if isinstance(mark, Stroke):
            _draw_stroke(axis, mark, fixed, plane, (rows_axis, columns_axis), window)
    return off_plane


def draw_overlay(
    image: np.ndarray,
    ground_truth: np.ndarray,
    panels: list[StepPanel],
    spacing: tuple[float, float, float],
    title: str = "",
    margin_mm: float = 15.0,
) -> bytes:
    """Axial, coronal and sagittal views (one row per panel) on the same planes, zoomed to the
    target, its predictions and ``margin_mm`` around them. Views are radiological with
    orientation letters.

    Args:
        image: The case's image, canonical (z, y, x); shown between its 1st and 99th
            percentiles.
        ground_truth: The target's boolean mask, same shape.
        panels: One row each: a step's prediction (same shape, or None), prompt and Dice.
        spacing: Voxel spacing in mm, (z, y, x); sets the pixel aspect ratio.
        title: The figure's title; empty: none.
        margin_mm: The margin kept around target and predictions, in mm.

    Returns:
        The figure as PNG bytes.
    """
    plt = pyplot()
    first_prompt = next((p.prompt for p in panels if p.prompt is not None), None)
    centre = cut_centre(ground_truth, first_prompt)
    window = zoom_window(
        image.shape, [ground_truth] + [p.prediction for p in panels], spacing, margin_mm
    )
    clicks = [np.asarray(p.prompt.points).reshape(-1, 3) for p in panels if p.prompt is not None]
    keep = np.concatenate([np.asarray([centre]), *clicks]).astype(int)  # centre and every click
    keep = np.clip(keep, 0, np.asarray(image.shape) - 1)
    window = [
        slice(min(w.start, int(keep[:, a].min())), max(w.stop, int(keep[:, a].max()) + 1))
        for a, w in enumerate(window)
    ]
    low, high = np.percentile(image[tuple(window)], [1, 99]) if image.size else (0.0, 1.0)
    figure, axes = plt.subplots(
        len(panels), 3, figsize=(7.2, 2.75 * len(panels) + 0.4), squeeze=False, layout="constrained"
    )
    for axes_row, panel in zip(axes, panels):
        for axis, (name, fixed, rows_axis, columns_axis) in zip(axes_row, VIEWS):
            index = [window[0], window[1], window[2]]
            index[fixed] = centre[fixed]
            picture = radiological(image[tuple(index)])
            truth = radiological(ground_truth[tuple(index)])
            aspect = spacing[rows_axis] / spacing[columns_axis]
            axis.imshow(
                picture, cmap="gray", vmin=low, vmax=high, aspect=aspect, interpolation="nearest"
            )
            if panel.prediction is not None:
                predicted = radiological(panel.prediction[tuple(index)])
                if predicted.any():
                    axis.imshow(
                        np.ma.masked_where(~predicted, predicted),
                        cmap="autumn",
                        alpha=0.3,
                        aspect=aspect,
                        interpolation="nearest",
                    )
                    axis.contour(predicted, levels=[0.5], colors="red", linewidths=1.0)
            if truth.any():
                axis.contour(truth, levels=[0.5], colors="lime", linewidths=1.0)
            off_plane = 0
            if panel.prompt is not None:
                off_plane = _draw_prompt(
                    axis, panel.prompt, fixed, centre[fixed], rows_axis, columns_axis, window
                )
            axis.set_xlim(-0.5, picture.shape[1] - 0.5)
            axis.set_ylim(picture.shape[0] - 0.5, -0.5)
            heading = f"{name} {_AXIS_NAMES[fixed]}={centre[fixed]}"
            if name == "axial":
                dice = "" if panel.dice is None else f", Dice {100 * panel.dice:.1f}"
                heading = f"{panel.label}{dice}\n{heading}"
                if off_plane:
                    heading += f" (+{off_plane} click{'s' if off_plane > 1 else ''} elsewhere)"
            axis.set_title(heading, fontsize=9)
            axis.set_axis_off()
            top, bottom, left, right = VIEW_LETTERS[name]
            for text, x, y, ha, va in (
                (top, 0.5, 0.98, "center", "top"),
                (bottom, 0.5, 0.02, "center", "bottom"),
                (left, 0.02, 0.5, "left", "center"),
                (right, 0.98, 0.5, "right", "center"),
            ):
                axis.text(
                    x,
                    y,
                    text,
                    transform=axis.transAxes,
                    ha=ha,
                    va=va,
                    color="yellow",
                    fontsize=8,
                    fontweight="bold",
                )
    if title:
        figure.suptitle(title, fontsize=9)
    # the colours' meaning in the image itself, not only in its caption and alt text
    from matplotlib.lines import Line2D

    figure.legend(
        handles=[
            Line2D([], [], color="lime", linewidth=1.5, label="ground truth"),
            Line2D([], [], color="red", linewidth=1.5, label="prediction"),
            Line2D([], [], color=POSITIVE, marker="o", linestyle="", label="positive prompt"),
            Line2D([], [], color=NEGATIVE, marker="o", linestyle="", label="negative prompt"),
        ],
        loc="outside lower center",
        ncols=4,
        fontsize=8,
        frameon=False,
    )
    return png_bytes(figure)


# -- which targets ----------------------------------------------------------------------------
def failure_gallery(episodes: pd.DataFrame, per_model: int) -> pd.DataFrame:
    """The ``per_model`` episodes of lowest final Dice of each model (over its prompters,
    refiners and seeds), models in name order; ties broken by dataset, case, target,
    prompter, refiner, seed (the same table gives the same gallery).

    Args:
        episodes: One row per episode with ``dice_final`` (0-1) and the episode's keys.
        per_model: How many episodes per model (below 1: none).

    Returns:
        The chosen episodes, grouped by model.
    """
    if episodes.empty or per_model < 1:
        return episodes.head(0)
    order = ["dice_final", "dataset", "case", "target", "prompter", "refiner", "seed"]
    ranked = episodes.sort_values(["model", *order], kind="stable", na_position="first")
    return ranked.groupby("model", sort=True).head(per_model).reset_index(drop=True)


def chosen_episodes(episodes: pd.DataFrame, chosen: list[str], limit: int) -> pd.DataFrame:
    """Episodes of the requested ``dataset/case`` (or ``case``) names, at most ``limit`` per
    model, in the gallery's order.

    Args:
        episodes: One row per episode.
        chosen: ``dataset/case`` or ``case`` names.
        limit: The most episodes per model.

    Returns:
        The matching episodes, lowest final Dice first within each model.
    """
    wanted = set(chosen)
    mask = [
        f"{d}/{c}" in wanted or c in wanted for d, c in zip(episodes["dataset"], episodes["case"])
    ]
    return failure_gallery(episodes[mask], limit)


def overlay_file_name(episode) -> str:
    """A file-name stem unique per target, configuration and seed, 200 characters at most
    (a longer one ends in a hash of the whole: the file system's limit is 255).

    Args:
        episode: An episode row (attributes ``dataset``, ``case``, ``target``, ``model``,
            ``prompter``, ``refiner``, ``seed``).

    Returns:
        ``overlay-<dataset>-<case>-...-seed<n>``, made safe.
    """
    from intrabench.io.run_paths import safe_file_name

    parts = [
        episode.dataset,
        episode.case,
        episode.target,
        episode.model,
        episode.prompter,
        episode.refiner,
    ]
    stem = (
        "overlay-" + "-".join(safe_file_name(str(p)) for p in parts) + f"-seed{int(episode.seed)}"
    )
    return safe_file_name(stem, limit=200)


def gallery(
    run_dir: Path,
    rows: pd.DataFrame,
    episodes: pd.DataFrame,
    chosen: list[str] | None,
    per_model: int,
) -> tuple[list[GalleryItem], list[str]]:
    """Overlays of the chosen episodes (``chosen`` cases, else :func:`failure_gallery`) and
    notes on what could not be drawn (no saved predictions, a dataset not on this machine).

    Args:
        run_dir: The run directory (its config, predictions and datasets are read).
        rows: The run's result rows.
        episodes: One row per episode.
        chosen: ``dataset/case`` or ``case`` names to draw; None or empty: the lowest final
            Dice of each model.
        per_model: The most overlays per model.

    Returns:
        ``(items, notes)``: the drawn overlays, and HTML notes on what could not be drawn.
    """
    from intrabench.config import run_config, run_dataset
    from intrabench.io.run_paths import MASK_KEYS, mask_file
    from intrabench.io.volume import read_volume
    from intrabench.plotting import configuration_label
    from intrabench.types import prompt_until

    notes: list[str] = []
    if not (run_dir / "config.yaml").exists():
        return [], ["The run directory has no config.yaml, so the images cannot be found."]
    config = run_config(run_dir)
    if not config.save_predictions:
        return [], [
            "This run did not save its predictions (set <code>save_predictions: "
            "true</code>, or <code>all</code> for the first step as well, and run "
            "again), so image overlays cannot be drawn."
        ]
    picked = (
        chosen_episodes(episodes, chosen, per_model)
        if chosen
        else failure_gallery(episodes, per_model)
    )
    episode_keys = [k for k in MASK_KEYS if k != "step"]
    by_episode = rows.sort_values("step").groupby(episode_keys, sort=False)
    datasets: dict[str, object] = {}
    drawn_items: dict[int, GalleryItem] = {}
    first_steps_missing = False
    loaded: tuple[tuple[str, str], object] | None = None  # one case in memory at a time
    # case by case (a case shared by several episodes is read once), drawn in the gallery's order
    in_case_order = picked.reset_index(drop=True).sort_values(["dataset", "case"], kind="stable")
    for position, episode in zip(in_case_order.index, in_case_order.itertuples(index=False)):
        steps = by_episode.get_group(tuple(getattr(episode, k) for k in episode_keys))
        final_step = int(steps["step"].max())
        wanted = [0, final_step] if final_step > 0 else [0]
        files = {
            step: mask_file(run_dir, steps[steps["step"] == step].iloc[0], final_step)
            for step in wanted
        }
        if files[final_step] is None:
            notes.append(
                f"No saved prediction for {episode.dataset}/{episode.case} target "
                f"{episode.target} ({episode.model}, seed {episode.seed})."
            )
            continue
        try:
            if episode.dataset not in datasets:
                datasets[episode.dataset] = run_dataset(run_dir, config, episode.dataset)
            if loaded is None or loaded[0] != (episode.dataset, episode.case):
                loaded = (
                    (episode.dataset, episode.case),
                    datasets[episode.dataset].load(episode.case),
                )  # type: ignore[attr-defined]
            case = loaded[1]
        except Exception as error:  # noqa: BLE001 - the dataset may not be on this machine
            notes.append(f"Could not load {episode.dataset}/{episode.case}: {error}")
            continue
        target = next((t for t in case.targets if t.target_id == episode.target), None)
        if target is None:
            notes.append(f"{episode.dataset}/{episode.case} has no target {episode.target}.")
            continue
        prompts = steps["prompt_json"].fillna("").tolist() if "prompt_json" in steps else []
        panels, drawn = [], []
        for step in wanted:
            if files[step] is None:
                first_steps_missing = True
                continue
            row = steps[steps["step"] == step].iloc[0]
            label = f"step {step}" + (" (final)" if step == final_step and step else "")
            prompt = (
                prompt_until(
                    prompts[: int(np.flatnonzero(steps["step"] == step)[0]) + 1], keep_previous=True
                )
                if prompts
                else None
            )
            panels.append(
                StepPanel(
                    label,
                    read_volume(files[step], dtype=np.uint8).array > 0,
                    prompt,
                    float(row["dice"]),
                )
            )
            drawn.append(step)
        configuration = configuration_label(episode.model, episode.prompter, episode.refiner)
        title = (
            f"{episode.dataset} / {episode.case} / target {episode.target} - "
            f"{configuration} - seed {int(episode.seed)}"
        )
        png = draw_overlay(
            case.image.array, case.target_mask(target), panels, case.image.spacing, title=title
        )
        shown = " and ".join(f"step {step}" for step in drawn)
        caption = (
            f"{title}: final Dice {100 * episode.dice_final:.1f}; {shown}. Green: ground truth; "
            "red: prediction; blue discs / magenta crosses: positive / negative clicks; "
            "yellow dashed: boxes."
        )
        drawn_items[position] = GalleryItem(
            overlay_file_name(episode), caption, png, str(episode.model), tuple(drawn)
        )
    items = [drawn_items[position] for position in sorted(drawn_items)]
    if first_steps_missing:
        notes.append(
            "Only final masks were saved: set <code>save_predictions: all</code> to see "
            "the first step beside the last."
        )
    return items, notes
