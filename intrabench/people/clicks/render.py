"""What the click page shows for one task: a scrollable run of axial slices with the error
outlined.

Pictures are those of the review page (:mod:`intrabench.review.render`: 16-bit grey values in
red and green, the default window's grey in blue, so the page windows them exactly), shown the
radiological way (both in-plane axes flipped). Unlike the review's, they keep every voxel (up
to :data:`FULL_SIDE` per side; a larger slice is shown from every ``step``-th voxel), because
the page turns a click on a picture pixel back into a canonical voxel index.

Each slice has an outline picture (RGBA, the picture's size): the error's border (for a first
click the target's, for a correction the missed and extra voxels') in magenta, and for a
correction the prediction's border in yellow.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from scipy import ndimage

from intrabench.plotting import radiological
from intrabench.review.render import (
    grey_pixels,
    grey_scale,
    png_data_url,
    window,
    window_presets,
)

#: Slices are shown from at most this many pixels per side (every ``step``-th voxel beyond).
FULL_SIDE = 512
#: Most slices a task offers: a contiguous run around the error.
MAX_SLICES = 64
#: Slices shown beyond the error's extent on each side (at least; half the extent when larger).
MARGIN_SLICES = 3
ERROR_COLOUR = (255, 0, 255, 255)
PREDICTION_COLOUR = (255, 214, 0, 255)


def border(mask: np.ndarray) -> np.ndarray:
    """The voxels of a 2D ``mask`` that touch its outside (4-connected).

    Args:
        mask: A boolean slice, shape (h, w).

    Returns:
        A boolean array of ``mask``'s shape, True on the mask's border.
    """
    return mask & ~ndimage.binary_erosion(mask, border_value=0)


def slice_range(error: np.ndarray, shown: np.ndarray, start: int) -> tuple[int, int]:
    """The first and last slice a task offers (inclusive): the z extent of ``shown`` (error
    and prediction, (z, y, x)) grown by :data:`MARGIN_SLICES` or half the extent, clipped to
    the volume, at most :data:`MAX_SLICES` centred on ``start``.

    Args:
        error: The boolean error (or target) volume, canonical (z, y, x); its depth clips the
            range.
        shown: The boolean voxels that must be offered (error and prediction), same shape.
        start: The slice the task opens on (the error's largest).

    Returns:
        ``(first, last)`` z indices, inclusive.
    """
    present = np.flatnonzero(shown.any(axis=(1, 2)))
    if not present.size:
        present = np.array([start])
    margin = max(MARGIN_SLICES, int(present[-1] - present[0] + 1) // 2)
    first = max(0, int(present[0]) - margin)
    last = min(error.shape[0] - 1, int(present[-1]) + margin)
    if last - first + 1 > MAX_SLICES:
        first = max(first, min(start - MAX_SLICES // 2, last - MAX_SLICES + 1))
        last = first + MAX_SLICES - 1
    return first, last


def outline_pixels(error: np.ndarray, prediction: np.ndarray | None, step: int) -> np.ndarray:
    """RGBA (h, w, 4) of one slice's outlines in the radiological view, every ``step``-th
    voxel: the error's border over the prediction's.

    Args:
        error: The boolean error on one slice, shape (y, x).
        prediction: The boolean prediction on that slice; None: a first click (no prediction).
        step: Keep every ``step``-th voxel in both directions (downsampling for the page).

    Returns:
        A uint8 array of shape (h, w, 4), transparent off the outlines.
    """
    picture = np.zeros((*error[::step, ::step].shape, 4), dtype=np.uint8)
    if prediction is not None:
        picture[radiological(border(prediction))[::step, ::step]] = PREDICTION_COLOUR
    picture[radiological(border(error))[::step, ::step]] = ERROR_COLOUR
    return picture


def task_data(
    identity: dict[str, Any],
    image: np.ndarray,
    spacing: tuple[float, float, float],
    is_ct: bool,
    truth: np.ndarray,
    prediction: np.ndarray | None,
) -> dict[str, Any]:
    """Everything the page draws for one task (JSON-able): ``identity`` (task, collection,
    ids, kind, step, target name) and, per offered slice, its picture and outline as PNG data
    URLs; the default window, presets and quantisation as the review's jobs have them.

    Args:
        identity: The task's names and ids, passed to the page as they are.
        image: The case's image, canonical (z, y, x), in its own units (HU for CT).
        spacing: Voxel spacing in mm, (z, y, x).
        is_ct: Whether the image is CT (fixed windows) or MR (percentile windows).
        truth: The target's boolean ground truth, same shape as ``image``.
        prediction: The mask to correct, boolean, same shape; None: a first click (the error
            is the target).

    Returns:
        The task's data, as :func:`task_script` writes it.
    """
    error = truth if prediction is None else truth ^ prediction
    areas = error.sum(axis=(1, 2))
    start = int(np.argmax(areas))
    shown = error if prediction is None else error | prediction
    first, last = slice_range(error, shown, start)
    zs = list(range(first, last + 1))
    planes = image[zs]
    inside = image[truth]
    low, high = window(planes, is_ct, float(inside.mean()) if inside.size else 0.0)
    base, scale = grey_scale(planes, high - low)
    height, width = image.shape[1:]
    step = max(1, int(np.ceil(max(height, width) / FULL_SIDE)))
    slices = []
    for z in zs:
        picture = radiological(image[z])[::step, ::step]
        slices.append(
            {
                "z": z,
                "picture": png_data_url(grey_pixels(picture, low, high, base, scale)),
                "outline": png_data_url(
                    outline_pixels(error[z], None if prediction is None else prediction[z], step)
                ),
            }
        )
    return {
        **identity,
        "shape": [int(v) for v in image.shape],
        "slices": slices,
        "start": zs.index(start),
        "step": step,
        # pixel aspect (height of a row / width of a column), so circles stay round
        "aspect": float(spacing[1] / spacing[2]),
        "window": [float(low), float(high)],
        "presets": window_presets(planes, is_ct),
        "grey": {"base": base, "scale": scale},
    }


def task_script(data: dict[str, Any]) -> str:
    """The task as a script the page loads from ``file://`` (no fetch, no server).

    Args:
        data: The task's data (:func:`task_data`).

    Returns:
        One line of JavaScript calling ``window.intrabenchTask`` with the data as JSON.
    """
    return f"window.intrabenchTask({json.dumps(data, separators=(',', ':'))});\n"
