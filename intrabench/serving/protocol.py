"""The model protocol, version 1: what a client and a model server say to each other.

A session is ``hello``, then per case ``set_case`` (the image, once) followed by any number of
``predict`` (and, for 2D models, ``segment_slice``), then ``bye``. Requests carry an ``op``;
answers carry ``ok: true`` and the op's fields, or ``ok: false`` with ``error`` (one line)
and ``kind`` (``checkpoint``, ``data``, ``user`` or ``model``).

* ``hello {protocol}`` -> ``{protocol, model: {name, dimension, accepts, licence,
  forward_frees_cpu}, server: {intrabench, python, numpy, torch}}``. A server of another
  protocol version answers ``ok: false``; so does a client that reads another version back.
* ``set_case {spacing, geometry, modality, path?}`` with the array ``image`` (z, y, x), or
  ``path``: a ``.npy`` file on the server's machine holding it (same-machine launches: the
  image never goes through the pipe). Spacing in mm, (z, y, x).
* ``predict {prompt, previous, update_slices, target_class, release}`` -> ``{handle, box,
  model_seconds}`` with the array ``bits``: the prediction's mask cut to its bounding box
  ``box`` ([start, stop) per axis (z, y, x); null for an empty mask), ``np.packbits`` of the
  crop in C order. The server keeps the whole prediction (its feedback, e.g. low-resolution
  logits) under ``handle``; the client passes the handle back as ``previous`` to refine it, so
  feedback never crosses the wire. ``release`` lists handles the client no longer holds.
* ``segment_slice {z, points, labels, box}`` -> ``{box}`` with ``bits``: a 2D (y, x) mask, as
  above (propagation prompters query 2D models slice by slice).
* ``bye`` -> the server closes this session.

Prompts travel as :meth:`intrabench.types.Prompt.to_json` plus their interactions, effort
label and click maps, so the server's model sees the prompt the in-process model would:
elements of added kinds included (their ``elements`` section; the kind must be registered on
both sides, by the plugin that adds it, e.g. ``serve-model --import PLUGIN``). A slice prompt's
extras travel the same way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np

from intrabench.io.geometry import ImageGeometry
from intrabench.io.volume import Volume
from intrabench.prompt_elements import element_class
from intrabench.types import Box2D, Interaction, Prompt, SlicePrompt

PROTOCOL_VERSION = 1
#: error kinds an answer may name, and the exception the client raises for each
ERROR_KINDS = ("checkpoint", "data", "user", "model")


def prompt_to_wire(prompt: Prompt) -> dict[str, Any]:
    """A prompt as JSON-able data (geometry, interactions, effort label, click maps).

    Args:
        prompt: The prompt, in canonical (z, y, x) voxels.

    Returns:
        ``geometry`` (the object of :meth:`~intrabench.types.Prompt.to_json`),
        ``interactions`` (their kinds, in order), ``effort_label`` and ``click_maps``
        (``[name, count]`` pairs).
    """
    return {
        "geometry": json.loads(prompt.to_json()),
        "interactions": [interaction.kind for interaction in prompt.interactions],
        "effort_label": prompt.effort_label,
        "click_maps": [[name, int(count)] for name, count in prompt.click_maps],
    }


def prompt_from_wire(data: Any) -> Prompt:
    """The prompt :func:`prompt_to_wire` wrote.

    Args:
        data: The request's ``prompt`` field, as parsed from JSON.

    Returns:
        The prompt, equal to the one written (elements of added kinds need their kind
        registered here).

    Raises:
        ValueError: ``data`` is not such an object or a field cannot be read.
    """
    if not isinstance(data, dict) or not isinstance(data.get("geometry"), dict):
        raise ValueError("a prompt is an object with a 'geometry' object")
    try:
        geometry = Prompt.from_json(json.dumps(data["geometry"]))
        kinds = [str(kind) for kind in data.get("interactions", [])]
        return replace(
            geometry,
            interactions=tuple(Interaction(kind) for kind in kinds),  # type: ignore[arg-type]
            effort_label=str(data.get("effort_label", "")),
            click_maps=tuple((str(name), int(count)) for name, count in data.get("click_maps", [])),
        )
    except (KeyError, TypeError, IndexError) as error:
        raise ValueError(f"the prompt cannot be read ({type(error).__name__}: {error})") from None


def volume_header(image: Volume) -> dict[str, Any]:
    """What ``set_case`` says about ``image`` besides its voxels.

    Args:
        image: The case's image.

    Returns:
        ``spacing`` (mm, (z, y, x)), ``modality`` and ``geometry`` (the image grid's
        ``size``, ``spacing``, ``origin`` and ``direction`` as
        :class:`~intrabench.io.geometry.ImageGeometry` holds them), all JSON-able.
    """
    geometry = image.geometry
    return {
        "spacing": [float(v) for v in image.spacing],
        "modality": image.modality,
        "geometry": {
            "size": list(geometry.size),
            "spacing": list(geometry.spacing),
            "origin": list(geometry.origin),
            "direction": list(geometry.direction),
        },
    }


def volume_from_wire(header: dict[str, Any], array: np.ndarray) -> Volume:
    """The volume of a ``set_case`` request around ``array`` (z, y, x).

    Args:
        header: The request's header, as :func:`volume_header` wrote it.
        array: The image, (z, y, x), any numeric dtype; used as it is (not copied).

    Returns:
        The :class:`~intrabench.io.volume.Volume` with the header's spacing, geometry and
        modality.

    Raises:
        ValueError: The spacing or geometry cannot be read, or ``array`` is not 3D with
            three spacings.
    """
    try:
        spacing = tuple(float(v) for v in header["spacing"])
        grid = header["geometry"]
        geometry = ImageGeometry(
            size=tuple(int(v) for v in grid["size"]),
            spacing=tuple(float(v) for v in grid["spacing"]),
            origin=tuple(float(v) for v in grid["origin"]),
            direction=tuple(float(v) for v in grid["direction"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"set_case: the image's spacing or geometry cannot be read "
            f"({type(error).__name__}: {error})"
        ) from None
    if array.ndim != 3 or len(spacing) != 3:
        raise ValueError(f"set_case: a (z, y, x) image with 3 spacings, got shape {array.shape}")
    return Volume(
        array=array,
        spacing=spacing,
        geometry=geometry,  # type: ignore[arg-type]
        modality=str(header.get("modality", "")),
    )


def slice_prompt_to_wire(prompt: SlicePrompt) -> dict[str, Any]:
    """A slice prompt as JSON-ready data.

    Args:
        prompt: A 2D prompt on one axial slice.

    Returns:
        ``z``, ``points`` (N, 2) voxel indices as (y, x) lists, ``labels`` (N,) (1 positive,
        0 negative), ``box`` (``[y_min, x_min, y_max, x_max]``, inclusive) or None, and
        ``elements`` (its extras, ``{"kind": k, ...}`` each) when it has any.
    """
    data: dict[str, Any] = {
        "z": int(prompt.z),
        "points": np.asarray(prompt.points).tolist(),
        "labels": np.asarray(prompt.labels).tolist(),
        "box": None if prompt.box is None else list(prompt.box.as_tuple()),
    }
    if prompt.extras:
        data["elements"] = [{"kind": e.kind, **e.to_json()} for e in prompt.extras]
    return data


def slice_prompt_from_wire(data: dict[str, Any]) -> SlicePrompt:
    """A slice prompt from :func:`slice_prompt_to_wire`'s data.

    Args:
        data: The ``segment_slice`` request's header.

    Returns:
        The slice prompt: points (N, 2) int64 (y, x), labels (N,) int8, its box and extras.

    Raises:
        ValueError: A field is missing or malformed (the message names the problem).
    """
    try:
        points = np.asarray(data["points"], dtype=np.int64).reshape(-1, 2)
        labels = np.asarray(data["labels"], dtype=np.int8).reshape(-1)
        box = None if data.get("box") is None else Box2D(*(int(v) for v in data["box"]))
        extras = tuple(element_class(e["kind"]).from_json(e) for e in data.get("elements", []))
        return SlicePrompt(z=int(data["z"]), points=points, labels=labels, box=box, extras=extras)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"segment_slice: the slice prompt cannot be read ({error})") from None


def pack_mask(mask: np.ndarray, box: tuple[slice, ...] | None) -> tuple[Any, np.ndarray]:
    """(``box`` as [start, stop] pairs or None, the packed bits of the mask's crop).

    Args:
        mask: The boolean mask, (z, y, x) or (y, x).
        box: Its bounding box, one half-open ``slice`` per axis, or None for an empty mask.

    Returns:
        ``(box, bits)``: ``[[start, stop], ...]`` per axis (None for None), and the crop's
        ``np.packbits`` in C order, uint8 (empty for None).
    """
    if box is None:
        return None, np.zeros(0, dtype=np.uint8)
    crop = np.asarray(mask[box], dtype=bool)
    return [[int(s.start), int(s.stop)] for s in box], np.packbits(crop, axis=None)


def unpack_mask(
    box: Any, bits: np.ndarray, shape: tuple[int, ...]
) -> tuple[np.ndarray, tuple[slice, ...] | None]:
    """The full boolean mask of ``shape`` from :func:`pack_mask`'s parts, and its box.

    Args:
        box: ``[[start, stop], ...]`` per axis (half-open) or None (an empty mask).
        bits: The crop's packed bits, 1D uint8 of ``ceil(crop voxels / 8)`` bytes.
        shape: The full mask's shape, (z, y, x) or (y, x).

    Returns:
        ``(mask, region)``: a boolean array of ``shape`` with the crop filled in, and the
        crop's slices (None for an empty mask).

    Raises:
        ValueError: The box is not pairs, is off the grid or empty along an axis, or the
            bits do not fit it.
    """
    mask = np.zeros(shape, dtype=bool)
    if box is None:
        return mask, None
    try:
        pairs = [(int(start), int(stop)) for start, stop in box]
    except (TypeError, ValueError):
        raise ValueError(f"the mask's box {str(box)[:80]} is not [start, stop] pairs") from None
    if len(pairs) != len(shape) or any(not 0 <= a < b <= n for (a, b), n in zip(pairs, shape)):
        raise ValueError(f"the mask's box {pairs} is not inside the image {tuple(shape)}")
    crop_shape = tuple(b - a for a, b in pairs)
    size = int(np.prod(crop_shape))
    if bits.dtype != np.uint8 or bits.ndim != 1 or len(bits) != (size + 7) // 8:
        raise ValueError(f"the mask's bits ({bits.size} bytes) do not fit its box {pairs}")
    region = tuple(slice(a, b) for a, b in pairs)
    mask[region] = np.unpackbits(bits, count=size).reshape(crop_shape).astype(bool)
    return mask, region
