"""What the rating page shows for one mask: axial slices, the mask, the prompt.

Each picture is shipped as an RGB PNG (lossless): red and green hold the slice's grey value
quantised to 16 bits (red the high byte; value = ``base + scale * (256 * red + green)``, with
``scale`` 1 for integer images spanning at most 65536 values: exact), blue the grey of the
job's default window (8 bits, exactly as the page showed it before a window could be changed).
The page applies the rater's window (centre, width) in a canvas.

Every picture is an axial slice shown the radiological way: anterior at the top and the
patient's right on the viewer's left (canonical (z, y, x) arrays are RAS, so both in-plane axes
are flipped). Coordinates handed to the page (prompts, zoom window) are (row, column) of that
flipped slice, in voxels.
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from intrabench.plotting import radiological
from intrabench.prompt_elements import BoxMark, Click, Stroke
from intrabench.types import Prompt

#: Most slices a job's slider offers (evenly spaced over the target's extent).
MAX_SLICES = 15
#: Full views are shown from at most this many pixels per side (every n-th voxel).
FULL_SIDE = 256
#: Zoom window: the mask and target's box on the shown slices, grown by this fraction per side.
ZOOM_MARGIN = 0.3
ZOOM_MIN_SIDE = 24


def window(image: np.ndarray, is_ct: bool, inside_mean: float) -> tuple[float, float]:
    """Display range (low, high): CT lung window (level -600, width 1500) for a target darker
    than -300 HU, else soft tissue (40, 400); MR: the 0.5th-99.5th percentiles of ``image``.

    Args:
        image: Voxel values to take the MR percentiles from (the shown slices), any shape.
        is_ct: Whether the values are CT Hounsfield units.
        inside_mean: The mean value inside the target (HU for CT), which picks the CT window.

    Returns:
        ``(low, high)`` in the image's units, ``high > low``.
    """
    if is_ct:
        level, width = (-600.0, 1500.0) if inside_mean < -300 else (40.0, 400.0)
        return level - width / 2, level + width / 2
    low, high = np.percentile(image, [0.5, 99.5])
    return float(low), float(max(high, low + 1e-6))


#: CT window presets (name, centre, width), HU.
CT_PRESETS = (("soft tissue", 40.0, 400.0), ("lung", -600.0, 1500.0), ("bone", 400.0, 1800.0))
#: MR window presets: (name, low percentile, high percentile) of the shown slices.
MR_PRESETS = (("percentiles 0.5-99.5", 0.5, 99.5), ("percentiles 2-98", 2.0, 98.0))
#: Quantisation levels of the shipped grey values (16 bits).
GREY_LEVELS = 65536
#: Quantisation steps per default window width for non-integer images: a window 4 times
#: narrower than the default still has its 256 grey levels.
WINDOW_STEPS = 1024


def window_presets(planes: np.ndarray, is_ct: bool) -> list[dict[str, Any]]:
    """The page's window presets for a job: CT soft tissue, lung and bone; MR two percentile
    windows of ``planes`` (the shown slices).

    Args:
        planes: The shown slices' values, shape (slices, y, x).
        is_ct: Whether the values are CT Hounsfield units (fixed presets) or MR (percentiles).

    Returns:
        One ``{"name", "centre", "width"}`` per preset, centre and width in the image's units.
    """
    if is_ct:
        return [{"name": n, "centre": c, "width": w} for n, c, w in CT_PRESETS]
    presets = []
    for name, low_q, high_q in MR_PRESETS:
        low, high = (float(v) for v in np.percentile(planes, [low_q, high_q]))
        high = max(high, low + 1e-6)
        presets.append({"name": name, "centre": (low + high) / 2, "width": high - low})
    return presets


def grey_scale(planes: np.ndarray, width: float) -> tuple[float, float]:
    """(base, scale) quantising ``planes`` to at most 16 bits: value = base + scale * q, q in
    0..65535.

    Integer values spanning at most 65536 values: scale 1 (lossless); otherwise a step of
    :data:`WINDOW_STEPS` per default window ``width`` (a window that narrow still shows every grey
    level), coarser where the range needs it.

    Args:
        planes: The shown slices' values, any shape.
        width: The default window's width, in the image's units.

    Returns:
        ``(base, scale)``: the lowest value and the step per quantisation level.
    """
    low, high = float(planes.min()), float(planes.max())
    if np.array_equal(planes, np.round(planes)) and high - low < GREY_LEVELS:
        return low, 1.0
    return low, max((high - low) / (GREY_LEVELS - 1), width / WINDOW_STEPS, 1e-12)


def windowed(plane: np.ndarray, low: float, high: float) -> np.ndarray:
    """uint8 grey of ``plane`` in the window ``[low, high]``: round(clip((v - low) / (high -
    low), 0, 1) * 255), halves to even (the page computes the same for other windows).

    Args:
        plane: A slice's values, shape (h, w).
        low: The window's lower end, in the image's units.
        high: The window's upper end (``> low``).

    Returns:
        A uint8 array of ``plane``'s shape, 0 at ``low`` or below, 255 at ``high`` or above.
    """
    scaled = np.clip((plane.astype(np.float64) - low) / (high - low), 0, 1) * 255
    return scaled.round().astype(np.uint8)


def grey_pixels(
    plane: np.ndarray, low: float, high: float, base: float, scale: float
) -> np.ndarray:
    """uint8 (h, w, 3) of a (h, w) ``plane``: red, green the 16-bit quantised value (high,
    low byte), blue the grey in the default window ``[low, high]``.

    Args:
        plane: A slice's values, shape (h, w).
        low: The default window's lower end.
        high: The default window's upper end.
        base: The quantisation's base (:func:`grey_scale`).
        scale: The quantisation's step (:func:`grey_scale`).

    Returns:
        A uint8 array of shape (h, w, 3).
    """
    q = np.clip(np.round((plane.astype(np.float64) - base) / scale), 0, GREY_LEVELS - 1)
    q = q.astype(np.uint16)
    return np.stack(
        [(q >> 8).astype(np.uint8), (q & 255).astype(np.uint8), windowed(plane, low, high)], axis=-1
    )


def png_data_url(pixels: np.ndarray) -> str:
    """A grey (uint8 (h, w)), RGB (uint8 (h, w, 3)) or RGBA (uint8 (h, w, 4)) picture as a
    PNG data URL.

    Args:
        pixels: The picture, uint8, rows top to bottom.

    Returns:
        ``data:image/png;base64,...``.
    """
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def mask_pixels(mask: np.ndarray) -> np.ndarray:
    """RGBA: white and opaque inside the mask, transparent outside (the page tints it).

    Args:
        mask: A boolean slice, shape (h, w).

    Returns:
        A uint8 array of shape (h, w, 4).
    """
    pixels = np.zeros((*mask.shape, 4), dtype=np.uint8)
    pixels[mask] = 255
    return pixels


def informative_slice(prediction: np.ndarray, truth: np.ndarray) -> int:
    """The axial slice with the largest prediction or ground-truth area (the first of ties).

    Args:
        prediction: Boolean mask, canonical (z, y, x).
        truth: Boolean ground truth, same shape.

    Returns:
        The z index.
    """
    areas = np.maximum(prediction.sum(axis=(1, 2)), truth.sum(axis=(1, 2)))
    return int(np.argmax(areas))


def prompt_slices(prompt: Prompt) -> Counter:
    """How much of ``prompt`` each axial slice holds: a click, a 2D box or a lasso counts 1,
    a scribble the number of its voxels on the slice (a 3D box is on every slice it spans and
    is not counted).

    Args:
        prompt: The prompt, its marks in canonical (z, y, x) voxels.

    Returns:
        z index -> count; slices holding nothing are absent.
    """
    held: Counter = Counter()
    for mark in prompt.marks():
        if isinstance(mark, Click):
            held[int(mark.zyx[0])] += 1
        elif isinstance(mark, BoxMark):
            if not mark.volume:
                held[int(mark.low[0])] += 1
        elif mark.closed:
            held[int(mark.voxels[0, 0])] += 1
        else:
            held.update(mark.voxels[:, 0].astype(int).tolist())
    return held


def _evenly(slices: np.ndarray, most: int = MAX_SLICES) -> list[int]:
    """At most ``most`` of ``slices`` (sorted), evenly spaced over them, first and last kept."""
    if slices.size <= most:
        return slices.tolist()
    return slices[np.unique(np.linspace(0, slices.size - 1, most).round().astype(int))].tolist()


def shown_slices(
    prediction: np.ndarray, truth: np.ndarray, best: int, prompted: Iterable[int] = ()
) -> list[int]:
    """The slider's slices: the z extent of prediction and truth, at most :data:`MAX_SLICES`
    evenly spaced; every slice holding the mask (at most :data:`MAX_SLICES` of them, evenly
    spaced: a mask on a few slices of a long target is never missed by the spacing); the
    informative slice; and every slice in ``prompted`` (those holding a prompt; at most
    :data:`MAX_SLICES` of them, evenly spaced).

    Args:
        prediction: Boolean mask, canonical (z, y, x).
        truth: Boolean ground truth, same shape.
        best: The informative slice (:func:`informative_slice`).
        prompted: The z indices holding a prompt.

    Returns:
        The z indices, sorted, without repeats.
    """
    present = np.flatnonzero((prediction | truth).any(axis=(1, 2)))
    span = np.arange(present[0], present[-1] + 1) if present.size else np.array([best])
    masked = np.flatnonzero(prediction.any(axis=(1, 2)))
    with_prompt = np.array(sorted(set(prompted)), dtype=int)
    return sorted(set(_evenly(span)) | set(_evenly(masked)) | {best} | set(_evenly(with_prompt)))


def start_slice(
    slices: list[int], best: int, latest: Prompt | None, shows: Iterable[int] | None = None
) -> int:
    """The slice a job opens on: of the slices that show the mask or the target (``shows``;
    all when not given), the one holding most of the latest interaction (the prompt of the
    step that made the mask; the one nearest ``best`` of ties), else ``best``, the most
    informative slice. A negative click outside both (mask and target empty there) is not where
    the job opens.

    Args:
        slices: The shown slices (:func:`shown_slices`).
        best: The informative slice.
        latest: The interaction of the mask's own step; None: none (the job opens on ``best``).
        shows: The z indices where the mask or the target is present; None: every slice.

    Returns:
        A z index.
    """
    held = prompt_slices(latest) if latest is not None else Counter()
    showing = set(slices) if shows is None else set(shows)
    candidates = [z for z in slices if held[z] > 0 and z in showing]
    if not candidates:
        return best
    return min(candidates, key=lambda z: (-held[z], abs(z - best), z))


def prompt_marks(prompt: Prompt, z: int, shape_yx: tuple[int, int]) -> dict[str, list]:
    """The prompt's parts on slice ``z`` in (row, column) of the radiological view.

    Clicks ``[row, col, label]``, boxes ``[row0, col0, row1, col1]`` (inclusive), scribble
    strokes (lists of ``[row, col]``) with their label, one per run of the scribble's consecutive
    voxels on the slice (a scribble drawn across slices leaves one-voxel strokes, which the page
    draws as dots); a lasso is a stroke that ends at its start.

    Args:
        prompt: The prompt, its marks in canonical (z, y, x) voxels.
        z: The axial slice.
        shape_yx: The slice's (y, x) size in voxels, to flip into the radiological view.

    Returns:
        ``{"clicks": [...], "boxes": [...], "strokes": [...]}`` as above.
    """
    height, width = shape_yx

    def flip(y: int, x: int) -> list[int]:
        return [height - 1 - int(y), width - 1 - int(x)]

    marks = prompt.marks()
    clicks = [
        [*flip(m.zyx[1], m.zyx[2]), int(m.label)]
        for m in marks
        if isinstance(m, Click) and int(m.zyx[0]) == z
    ]
    flat = [m for m in marks if isinstance(m, BoxMark) and not m.volume and m.low[0] == z]
    spanning = [
        m for m in marks if isinstance(m, BoxMark) and m.volume and m.low[0] <= z <= m.high[0]
    ]
    boxes = [  # the 2D box of the slice, else the 3D box's on its z-range
        [*flip(m.high[1], m.high[2]), *flip(m.low[1], m.low[2])] for m in (flat or spanning)[:1]
    ]
    strokes = []
    for mark in marks:
        if not isinstance(mark, Stroke):
            continue
        points = np.asarray(mark.voxels).reshape(-1, 3)
        if mark.closed:  # a closed stroke: back to its first vertex
            if len(points) and int(points[0, 0]) == z:
                contour = [flip(y, x) for _, y, x in points]
                strokes.append({"label": int(mark.label), "points": contour + contour[:1]})
            continue
        on = np.flatnonzero(points[:, 0] == z)  # its runs of consecutive voxels on this slice
        for run in np.split(on, np.flatnonzero(np.diff(on) > 1) + 1) if on.size else []:
            strokes.append(
                {"label": int(mark.label), "points": [flip(y, x) for _, y, x in points[run]]}
            )
    return {"clicks": clicks, "boxes": boxes, "strokes": strokes}


def zoom_window(
    prediction: np.ndarray, truth: np.ndarray, slices: list[int]
) -> tuple[int, int, int, int]:
    """(row0, col0, row1, col1), exclusive ends, in the radiological view: the box of the mask
    and the target over ``slices`` (one slice: that slice's own zoom), grown by
    :data:`ZOOM_MARGIN`, square-ish.

    Args:
        prediction: Boolean mask, canonical (z, y, x).
        truth: Boolean ground truth, same shape.
        slices: The z indices whose union the window covers.

    Returns:
        The window in pixels of the radiological view; the whole slice when both are empty
        there.
    """
    union = (prediction[slices] | truth[slices]).any(axis=0)
    view = radiological(union)
    height, width = view.shape
    if not view.any():
        return 0, 0, height, width
    rows, cols = np.flatnonzero(view.any(axis=1)), np.flatnonzero(view.any(axis=0))
    side = max(rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1)
    side = int(max(ZOOM_MIN_SIDE, round(side * (1 + 2 * ZOOM_MARGIN))))
    centre = ((rows[0] + rows[-1]) // 2, (cols[0] + cols[-1]) // 2)
    row0 = int(np.clip(centre[0] - side // 2, 0, max(0, height - side)))
    col0 = int(np.clip(centre[1] - side // 2, 0, max(0, width - side)))
    return row0, col0, min(height, row0 + side), min(width, col0 + side)


def job_data(
    job: str,
    image: np.ndarray,
    spacing: tuple[float, float, float],
    is_ct: bool,
    prediction: np.ndarray,
    truth: np.ndarray,
    prompt: Prompt,
    latest: Prompt | None = None,
) -> dict[str, Any]:
    """Everything the page draws for one job (JSON-able).

    Per shown slice the full and zoomed picture (see the module's doc: grey values and default
    grey) and mask as PNG data URLs, the prompt marks, and the geometry to place them; the default
    window ``window`` (low, high), the window ``presets`` and the pictures' quantisation ``grey``
    (base, scale).

    Args:
        job: The blinded job name (``job-001``), the only name the page shows.
        image: The case's image, canonical (z, y, x), in its own units (HU for CT).
        spacing: Voxel spacing in mm, (z, y, x).
        is_ct: Whether the image is CT (fixed windows) or MR (percentile windows).
        prediction: The mask to rate, boolean, same shape as ``image``.
        truth: The target's ground truth, boolean, same shape.
        prompt: What the model saw (every prompt up to the mask's step).
        latest: The interaction of the mask's own step (the job opens on the slice holding most
            of it); None: none.

    Returns:
        The job's data, as :func:`job_script` writes it.
    """
    best = informative_slice(prediction, truth)
    slices = shown_slices(prediction, truth, best, prompt_slices(prompt))
    shows = np.flatnonzero((prediction | truth).any(axis=(1, 2))).tolist()
    first = start_slice(slices, best, latest, shows)
    inside = image[truth]
    planes = image[slices]
    low, high = window(planes, is_ct, float(inside.mean()) if inside.size else 0.0)
    base, scale = grey_scale(planes, high - low)
    height, width = image.shape[1:]
    step = max(1, int(np.ceil(max(height, width) / FULL_SIDE)))
    row0, col0, row1, col1 = zoom_window(prediction, truth, slices)

    def grey(plane: np.ndarray) -> np.ndarray:
        return grey_pixels(plane, low, high, base, scale)

    views = []
    for z in slices:
        picture, mask = radiological(image[z]), radiological(prediction[z])
        # each slice zooms on its own mask and target (a slice with neither: the whole box)
        own = (
            zoom_window(prediction, truth, [z])
            if (prediction[z] | truth[z]).any()
            else (row0, col0, row1, col1)
        )
        views.append(
            {
                "z": int(z),
                "full": png_data_url(grey(picture[::step, ::step])),
                "fullMask": png_data_url(mask_pixels(mask[::step, ::step])),
                "zoom": png_data_url(grey(picture[own[0] : own[2], own[1] : own[3]])),
                "zoomMask": png_data_url(mask_pixels(mask[own[0] : own[2], own[1] : own[3]])),
                "zoomBox": [int(v) for v in own],
                "marks": prompt_marks(prompt, int(z), (height, width)),
            }
        )
    return {
        "job": job,
        "slices": views,
        "start": slices.index(first),
        "step": step,
        "shape": [int(height), int(width)],
        "zoomBox": [row0, col0, row1, col1],
        # pixel aspect (height of a row / width of a column), so circles stay round
        "aspect": float(spacing[1] / spacing[2]),
        "slices_total": int(image.shape[0]),
        "window": [float(low), float(high)],
        "presets": window_presets(planes, is_ct),
        "grey": {"base": base, "scale": scale},
    }


def job_script(data: dict[str, Any]) -> str:
    """The job as a script the page loads from ``file://`` (no fetch, no server).

    Args:
        data: The job's data (:func:`job_data`).

    Returns:
        One line of JavaScript calling ``window.intrabenchJob`` with the data as JSON.
    """
    return f"window.intrabenchJob({json.dumps(data, separators=(',', ':'))});\n"
