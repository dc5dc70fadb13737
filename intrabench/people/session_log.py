"""The session log: what a person did with a live model, one JSON Lines file per session.

A session log (``sessions/<session_id>.jsonl``) is appended and flushed after every event, so
a reload or a crash loses nothing; a cut last line (the crash came mid-write) is ignored on
read and counted. Format version 1:

* line 1, the header: ``{"format": "intrabench-session", "version": 1, "session_id",
  "rater", "run" (optional), "dataset", "case_id", "target" (the run's target id, e.g.
  ``lesion-1``), "shape" [z, y, x], "spacing" [z, y, x] (mm), "model": {"name", "params"},
  "started_at" (ISO 8601 UTC), "protocol": {"shows_dice": false}}``, and
  ``"dataset_params"`` when the dataset was created with parameters (a folder spec's);
* then one event a line, each with ``"event"``, ``"t"`` (seconds since the session started,
  monotonic) and ``"step"`` (the number of effective interactions once the event is done):

  - ``{"event": "view", "slice": z, "window": [level, width]}``
  - ``{"event": "interaction", "kind": "point"|"box2d"|"box3d"|"scribble"|"lasso",
    "geometry": ..., "shown_at": t, "latency_s": s, "mask": {"shape", "bbox", "packbits"}}``
    with geometry in canonical voxel indices (z, y, x): point ``{"zyx": [z, y, x],
    "positive": true}``; box2d ``{"slice": z, "y0", "x0", "y1", "x1"}`` (inclusive); box3d
    ``{"zyx0", "zyx1"}`` (inclusive); scribble and lasso ``{"slice": z, "points": [[y, x],
    ...], "positive": bool}``. The mask after the interaction is its bounding box ``bbox``
    [z0, y0, x0, z1, y1, x1] (half-open; all zeros for an empty mask) and ``packbits``, the
    base64 of ``numpy.packbits`` of the (z, y, x) C-order crop.
  - ``{"event": "undo"}``: removes the last effective interaction; the mask reverts.
  - ``{"event": "accept"}``: the session's final mask is the current one.

Masks are boolean (z, y, x) arrays on the case's canonical grid (:mod:`intrabench.io.volume`).
"""

from __future__ import annotations

import base64
import json
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np

from intrabench.errors import DataError

FORMAT = "intrabench-session"
VERSION = 1
INTERACTION_KINDS = ("point", "box2d", "box3d", "scribble", "lasso")
EVENTS = ("view", "interaction", "undo", "accept")
#: a session log larger than this is refused unread (a person makes a few hundred events)
MAX_BYTES = 64 * 1024 * 1024
#: one line longer than this is refused (a 512^3 mask packs to 16 MiB of bits, 22 MiB base64)
MAX_LINE = 24 * 1024 * 1024
#: the interaction kind's name in :data:`intrabench.types.INTERACTION_COST`
COST_KIND = {"point": "click", "box2d": "box2d", "box3d": "box3d", "scribble": "scribble"}
COST_KIND["lasso"] = "lasso"


# -- masks ------------------------------------------------------------------------------
def encode_mask(mask: np.ndarray) -> dict[str, Any]:
    """``{"shape", "bbox", "packbits"}`` of a boolean (z, y, x) mask: its half-open bounding
    box and the base64 of ``np.packbits`` of the C-order crop (empty mask: bbox all zeros).

    Args:
        mask: A 3D mask, canonical (z, y, x); converted to bool.

    Returns:
        ``shape`` [z, y, x] in voxels, ``bbox`` [z0, y0, x0, z1, y1, x1] (ends exclusive),
        ``packbits`` the crop's bits as base64 text (empty for an empty mask).
    """
    mask = np.asarray(mask, dtype=bool)
    shape = [int(v) for v in mask.shape]
    if not mask.any():
        return {"shape": shape, "bbox": [0] * 6, "packbits": ""}
    low, high = [], []
    for axis in range(3):
        other = tuple(a for a in range(3) if a != axis)
        present = np.flatnonzero(mask.any(axis=other))
        low.append(int(present[0]))
        high.append(int(present[-1]) + 1)
    crop = mask[low[0] : high[0], low[1] : high[1], low[2] : high[2]]
    packed = base64.b64encode(np.packbits(crop.reshape(-1)).tobytes()).decode("ascii")
    return {"shape": shape, "bbox": low + high, "packbits": packed}


def decode_mask(data: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The boolean (z, y, x) mask :func:`encode_mask` wrote.

    Args:
        data: The encoded mask, as a log line holds it.
        shape: The session's (z, y, x) grid the mask must be on; None: not checked.

    Returns:
        The mask, boolean, canonical (z, y, x).

    Raises:
        DataError: ``data`` is not an encoded mask, is not on the grid ``shape``, or its bbox or
            bits do not fit.
    """
    if not isinstance(data, dict):
        raise DataError("the mask is not an object with shape, bbox and packbits")
    grid = _int_list(data.get("shape"), 3, "the mask's shape")
    if shape is not None and tuple(grid) != tuple(shape):
        raise DataError(f"the mask's shape {grid} is not the session's {list(shape)}")
    if any(v <= 0 for v in grid) or math.prod(grid) > 2**31:
        raise DataError(f"the mask's shape {grid} is not a volume's")
    bbox = _int_list(data.get("bbox"), 6, "the mask's bbox")
    mask = np.zeros(grid, dtype=bool)
    if bbox == [0] * 6:
        return mask
    low, high = bbox[:3], bbox[3:]
    if any(not 0 <= a < b <= n for a, b, n in zip(low, high, grid)):
        raise DataError(f"the mask's bbox {bbox} is not inside the grid {grid}")
    crop_shape = tuple(b - a for a, b in zip(low, high))
    try:
        raw = base64.b64decode(str(data.get("packbits", "")), validate=True)
    except ValueError:
        raise DataError("the mask's packbits is not base64") from None
    size = math.prod(crop_shape)
    if len(raw) != (size + 7) // 8:
        raise DataError(
            f"the mask's packbits holds {len(raw)} bytes; its bbox needs {(size + 7) // 8}"
        )
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), count=size).astype(bool)
    mask[low[0] : high[0], low[1] : high[1], low[2] : high[2]] = bits.reshape(crop_shape)
    return mask


# -- writing ----------------------------------------------------------------------------
def new_header(
    *,
    session_id: str,
    rater: str,
    dataset: str,
    case_id: str,
    target: str,
    shape: tuple[int, int, int],
    spacing: tuple[float, float, float],
    model: str,
    params: dict[str, Any] | None = None,
    run: str | None = None,
    shows_dice: bool = False,
) -> dict[str, Any]:
    """The header line of a new session (started now, UTC).

    Args:
        session_id: The session's id (its log's file name).
        rater: The person's name.
        dataset: The dataset's key.
        case_id: The case's id.
        target: The target's id within the case.
        shape: The case's grid, (z, y, x) in voxels.
        spacing: Voxel spacing in mm, (z, y, x).
        model: The model's registered name.
        params: The model's parameters; None: none.
        run: The run this session belongs to; None: none (not written).
        shows_dice: Whether the page shows the person the Dice of each mask (part of the
            protocol).

    Returns:
        The header: format and version, ids, grid, model, ``started_at`` (ISO 8601, UTC) and
        ``protocol``.
    """
    header: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "session_id": str(session_id),
        "rater": str(rater),
    }
    if run is not None:
        header["run"] = str(run)
    header.update(
        dataset=str(dataset),
        case_id=str(case_id),
        target=str(target),
        shape=[int(v) for v in shape],
        spacing=[float(v) for v in spacing],
        model={"name": str(model), "params": dict(params or {})},
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        protocol={"shows_dice": bool(shows_dice)},
    )
    return header


class SessionWriter:
    """Appends a session's events to its log, one line each, flushed to disk before returning.

    ``t`` is measured from the writer's creation (monotonic); a writer reopening a log
    (:meth:`resume`) continues after its last event's ``t`` (the time the server was down
    is not counted)."""

    def __init__(self, path: Path, handle: IO[str], header: dict[str, Any], t0: float, step: int):
        self.path = Path(path)
        self.header = header
        self._handle = handle
        self._t0 = t0
        self.step = step

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> SessionWriter:
        """A new log at ``path`` (refused when it exists: nothing is overwritten).

        Args:
            path: The log file to create (its folder is created).
            header: The header line (:func:`new_header`), written first.

        Returns:
            The writer, its clock started now, step 0.

        Raises:
            DataError: ``path`` exists.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            handle = path.open("x", encoding="utf-8")
        except FileExistsError:
            raise DataError(f"{path} exists: a session log is never overwritten") from None
        writer = cls(path, handle, header, time.monotonic(), 0)
        writer._write(header)
        return writer

    @classmethod
    def resume(cls, path: Path) -> SessionWriter:
        """The writer of an existing log, after its last complete event (a cut last line is
        cut off the file first, so the next event starts on a line of its own).

        Args:
            path: The existing log.

        Returns:
            The writer, its clock continuing from the last event's time, at the log's step.

        Raises:
            DataError: ``path`` is not a session log (:func:`read_session`).
        """
        session = read_session(path)
        path = Path(path)
        if session.cut_lines:
            _drop_cut_line(path)
        last_t = max((float(e.get("t", 0.0)) for e in session.events), default=0.0)
        handle = path.open("a", encoding="utf-8")
        return cls(path, handle, session.header, time.monotonic() - last_t, session.step)

    def now(self) -> float:
        """Seconds since the session started (monotonic).

        Returns:
            Seconds, rounded to 0.1 ms.
        """
        return round(time.monotonic() - self._t0, 4)

    def view(self, z: int, window: tuple[float, float], t: float | None = None) -> dict:
        """Record that slice ``z`` is shown with ``window`` (level, width).

        Args:
            z: The axial slice index.
            window: ``(level, width)`` in the image's units.
            t: The event's time in session seconds; None: now.

        Returns:
            The event as written.
        """
        return self._event("view", t, slice=int(z), window=[float(window[0]), float(window[1])])

    def interaction(
        self,
        kind: str,
        geometry: dict[str, Any],
        mask: np.ndarray,
        *,
        latency_s: float,
        shown_at: float | None = None,
        t: float | None = None,
    ) -> dict:
        """Record one interaction with the mask the model returned after it.

        Args:
            kind: One of :data:`INTERACTION_KINDS`.
            geometry: The interaction's geometry as the page sent it (voxel indices).
            mask: The model's mask after it, boolean, canonical (z, y, x).
            latency_s: The model's time to answer, in seconds.
            shown_at: When the previous mask appeared on screen, in session seconds; None: unknown.
            t: The event's time in session seconds; None: now.

        Returns:
            The event as written (its step is the new step).

        Raises:
            DataError: ``kind`` is not an interaction kind.
        """
        if kind not in INTERACTION_KINDS:
            raise DataError(f"unknown interaction kind {kind!r}; one of {INTERACTION_KINDS}")
        self.step += 1
        return self._event(
            "interaction",
            t,
            kind=kind,
            geometry=geometry,
            shown_at=None if shown_at is None else round(float(shown_at), 4),
            latency_s=round(float(latency_s), 4),
            mask=encode_mask(mask),
        )

    def undo(self, t: float | None = None) -> dict:
        """Record an undo (the last effective interaction is removed).

        Args:
            t: The event's time in session seconds; None: now.

        Returns:
            The event as written.
        """
        self.step = max(0, self.step - 1)
        return self._event("undo", t)

    def accept(self, t: float | None = None) -> dict:
        """Record that the person accepted the current mask.

        Args:
            t: The event's time in session seconds; None: now.

        Returns:
            The event as written.
        """
        return self._event("accept", t)

    def close(self) -> None:
        """Close the log file (every event is already on disk)."""
        self._handle.close()

    def _event(self, name: str, t: float | None, **fields: Any) -> dict:
        event = {"event": name, "t": self.now() if t is None else round(float(t), 4)}
        event["step"] = self.step
        event.update(fields)
        self._write(event)
        return event

    def _write(self, data: dict[str, Any]) -> None:
        self._handle.write(json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())


def _drop_cut_line(path: Path) -> None:
    """Truncate ``path`` after its last newline."""
    with path.open("rb+") as handle:
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)


# -- reading ----------------------------------------------------------------------------
@dataclass
class Session:
    """A read session log: its header, its valid events in order, and what was wrong.

    ``problems``: one line per event line that was skipped (``line N: why``); ``cut_lines``:
    1 when the last line was cut (a crash mid-write), else 0."""

    path: Path
    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cut_lines: int = 0

    @property
    def shape(self) -> tuple[int, int, int]:
        """The session image's shape ``(z, y, x)`` in voxels, from its header."""
        return tuple(self.header["shape"])  # type: ignore[return-value]

    @property
    def accepted(self) -> bool:
        """Whether the person accepted a mask (an accept event is in the log)."""
        return any(event["event"] == "accept" for event in self.events)

    @property
    def step(self) -> int:
        """The number of interactions in effect (undone ones left out)."""
        return len(self.effective_interactions())

    def effective_interactions(self) -> list[dict[str, Any]]:
        """The interaction events that stand once the undos are applied, in order (up to the
        last accept when there is one).

        Returns:
            The interaction events, oldest first.
        """
        stack: list[dict[str, Any]] = []
        for event in self.events:
            if event["event"] == "interaction":
                stack.append(event)
            elif event["event"] == "undo" and stack:
                stack.pop()
        return stack

    def masks(self) -> list[np.ndarray]:
        """The boolean (z, y, x) mask after each effective interaction.

        Returns:
            One mask per effective interaction, in order.
        """
        return [decode_mask(e["mask"], self.shape) for e in self.effective_interactions()]

    def final_mask(self) -> np.ndarray:
        """The current mask (all False before any interaction).

        Returns:
            A boolean (z, y, x) mask on the session's grid.
        """
        masks = self.effective_interactions()
        return decode_mask(masks[-1]["mask"], self.shape) if masks else np.zeros(self.shape, bool)

    def prompts(self) -> list[Any]:
        """Each effective interaction as an :class:`intrabench.types.Prompt` (its geometry and
        its one interaction), initial first, then the corrections, in voxel indices (z, y, x).

        Returns:
            One prompt per effective interaction.
        """
        return [interaction_prompt(e) for e in self.effective_interactions()]

    def seconds_per_interaction(self) -> list[tuple[str, float]]:
        """(kind, seconds) of every interaction the person made (undone ones too): from the
        previous mask on screen (the previous interaction plus the model's latency), the
        previous undo, or the session's start, to the interaction.

        Returns:
            ``(kind, seconds >= 0)`` per interaction, in order.
        """
        out: list[tuple[str, float]] = []
        ready = 0.0
        for event in self.events:
            if event["event"] == "interaction":
                out.append((event["kind"], round(max(0.0, event["t"] - ready), 4)))
                ready = event["t"] + event["latency_s"]
            elif event["event"] == "undo":
                ready = event["t"]
        return out


def interaction_prompt(event: dict[str, Any]) -> Any:
    """The :class:`intrabench.types.Prompt` of one interaction event (a scribble's stroke
    becomes the voxels of the polyline through its points, each joined to the next).

    Args:
        event: An interaction event with ``kind`` and ``geometry`` (voxel indices: ``zyx`` for a
            point, ``slice`` and y/x corners for a 2D box, ``zyx0``/``zyx1`` for a 3D box,
            ``slice`` and (y, x) ``points`` for a scribble or lasso).

    Returns:
        The prompt holding that one interaction.
    """
    from skimage.draw import line

    from intrabench.types import Box2D, Box3D, Lasso, Prompt, Scribble, interactions

    kind, geometry = event["kind"], event["geometry"]
    done = interactions(COST_KIND[kind], 1)  # type: ignore[arg-type]
    if kind == "point":
        return Prompt(
            points=[geometry["zyx"]],
            point_labels=[1 if geometry["positive"] else 0],
            interactions=done,
        )
    if kind == "box2d":
        z = int(geometry["slice"])
        box = Box2D(geometry["y0"], geometry["x0"], geometry["y1"], geometry["x1"])
        return Prompt(boxes={z: box}, interactions=done)
    if kind == "box3d":
        return Prompt(box3d=Box3D(*geometry["zyx0"], *geometry["zyx1"]), interactions=done)
    z, label = int(geometry["slice"]), 1 if geometry["positive"] else 0
    points = np.asarray(geometry["points"], dtype=np.int64).reshape(-1, 2)
    if kind == "lasso":
        return Prompt(lassos=(Lasso(z, points, label),), interactions=done)
    voxels = [points[:1]]
    for (y0, x0), (y1, x1) in zip(points[:-1], points[1:]):
        ys, xs = line(int(y0), int(x0), int(y1), int(x1))
        voxels.append(np.stack([ys, xs], axis=1)[1:])
    yx = np.concatenate(voxels)
    zyx = np.concatenate([np.full((len(yx), 1), z, dtype=np.int64), yx], axis=1)
    return Prompt(scribbles=(Scribble(zyx, label),), interactions=done)


def read_session(path: Path, max_bytes: int = MAX_BYTES) -> Session:
    """Read a session log.

    An event line that is not valid (garbage, NaN, off the grid, ...) is skipped and described
    in ``Session.problems``; a cut last line is counted in ``Session.cut_lines``.

    Args:
        path: The ``.jsonl`` log.
        max_bytes: The largest log read, in bytes.

    Returns:
        The session: its header, valid events, problems and cut lines.

    Raises:
        DataError: The file is not a session log (unreadable, too large, empty, no valid
            header).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise DataError(f"{path}: cannot read it ({error.strerror})") from None
    if size > max_bytes:
        raise DataError(f"{path}: {size} bytes, more than a session log's {max_bytes}; not read")
    data = path.read_bytes()
    lines = data.split(b"\n")
    cut = 0
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines and not data.endswith(b"\n") and len(lines) > 1:
        lines.pop()  # the last line never got its newline: a write was cut
        cut = 1
    if not lines:
        raise DataError(f"{path}: empty, not a session log")
    header = _header(path, lines[0])
    session = Session(path=path, header=header, cut_lines=cut)
    shape = tuple(header["shape"])
    for number, raw in enumerate(lines[1:], start=2):
        try:
            session.events.append(_event(raw, shape))
        except DataError as error:
            session.problems.append(f"line {number}: {error}")
    return session


def _loads(raw: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise DataError(f"{constant} is not a number a session log holds")

    if len(raw) > MAX_LINE:
        raise DataError(f"a line of {len(raw)} bytes, more than {MAX_LINE}")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise DataError("not a JSON line") from None


def _header(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        header = _loads(raw)
    except DataError as error:
        raise DataError(f"{path}: line 1 is not a session header ({error})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DataError(f"{path}: line 1 is not a session header (no format {FORMAT!r})")
    if header.get("version") != VERSION:
        raise DataError(
            f"{path}: session log version {header.get('version')!r}; this IntraBench reads "
            f"version {VERSION}"
        )
    for key in ("session_id", "rater", "dataset", "case_id", "target"):
        if not isinstance(header.get(key), str) or not header[key]:
            raise DataError(f"{path}: the header has no {key}")
    try:
        shape = _int_list(header.get("shape"), 3, "the header's shape")
        if any(v <= 0 for v in shape):
            raise DataError(f"the header's shape {shape} is not a volume's")
        spacing = header.get("spacing")
        if (
            not isinstance(spacing, list)
            or len(spacing) != 3
            or not all(_number(v) and v > 0 for v in spacing)
        ):
            raise DataError("the header's spacing is not three positive numbers")
    except DataError as error:
        raise DataError(f"{path}: {error}") from None
    model = header.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str):
        raise DataError(f"{path}: the header has no model name")
    header["shape"] = shape
    return header


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _int_list(value: Any, n: int, what: str) -> list[int]:
    if (
        not isinstance(value, list)
        or len(value) != n
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise DataError(f"{what} is not {n} whole numbers")
    return [int(v) for v in value]


def _event(raw: bytes, shape: tuple[int, ...]) -> dict[str, Any]:
    event = _loads(raw)
    if not isinstance(event, dict) or event.get("event") not in EVENTS:
        raise DataError(f"not an event (one of {', '.join(EVENTS)})")
    if not _number(event.get("t")) or event["t"] < 0:
        raise DataError("no time t (seconds since the session started)")
    if event["event"] == "view":
        z = event.get("slice")
        if not isinstance(z, int) or not 0 <= z < shape[0]:
            raise DataError(f"view of slice {z!r}, off the grid {list(shape)}")
        window = event.get("window")
        if not isinstance(window, list) or len(window) != 2 or not all(map(_number, window)):
            raise DataError("the view's window is not [level, width]")
    elif event["event"] == "interaction":
        _check_interaction(event, shape)
    return event


def _check_interaction(event: dict[str, Any], shape: tuple[int, ...]) -> None:
    kind = event.get("kind")
    if kind not in INTERACTION_KINDS:
        raise DataError(f"interaction kind {kind!r}, not one of {', '.join(INTERACTION_KINDS)}")
    if not _number(event.get("latency_s")) or event["latency_s"] < 0:
        raise DataError("the interaction has no latency_s")
    if event.get("shown_at") is not None and not _number(event["shown_at"]):
        raise DataError("the interaction's shown_at is not a number")
    check_geometry(kind, event.get("geometry"), shape)
    decode_mask(event.get("mask"), shape)


def check_geometry(kind: str, geometry: Any, shape: tuple[int, ...]) -> Any:
    """The :class:`intrabench.types.Prompt` of an interaction's ``geometry`` (as the log holds
    it) on the (z, y, x) grid ``shape``.

    Args:
        kind: One of :data:`INTERACTION_KINDS`.
        geometry: The interaction's geometry (whole voxel indices).
        shape: The session's (z, y, x) grid, in voxels.

    Returns:
        The prompt of that interaction.

    Raises:
        DataError: In one line, when it is not a ``kind``'s geometry or is off the grid.
    """
    if kind not in INTERACTION_KINDS:
        raise DataError(f"interaction kind {kind!r}, not one of {', '.join(INTERACTION_KINDS)}")
    if not isinstance(geometry, dict):
        raise DataError(f"the {kind} has no geometry")
    if kind == "point" and not isinstance(geometry.get("positive"), bool):
        raise DataError("the point's positive is not true or false")
    if not _whole_numbers({k: v for k, v in geometry.items() if k != "positive"}):
        raise DataError(f"the {kind}'s coordinates are not voxel indices (whole numbers)")
    try:
        prompt = interaction_prompt({"kind": kind, "geometry": geometry})
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        raise DataError(f"the {kind}'s geometry is not a {kind}'s") from None
    off = prompt.outside(shape)
    if off is None and kind in ("scribble", "lasso"):
        off = _stroke_outside(geometry, shape)
    if off is not None:
        raise DataError(f"the {kind}'s {off} is off the grid {list(shape)}")
    return prompt


def _whole_numbers(value: Any, depth: int = 0) -> bool:
    """Whether every number in ``value`` (lists and dicts of them) is an int (not a bool)."""
    if isinstance(value, bool) or depth > 4:
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, dict):
        return all(_whole_numbers(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_whole_numbers(v, depth + 1) for v in value)
    return False


def _stroke_outside(geometry: dict[str, Any], shape: tuple[int, ...]) -> str | None:
    """The first (y, x) vertex of a stroke that is off the slice, described, or None."""
    if not isinstance(geometry.get("positive"), bool):
        return "positive (not true or false)"
    points = np.asarray(geometry["points"], dtype=np.int64).reshape(-1, 2)
    if not len(points):
        return "stroke (no points)"
    bad = np.flatnonzero(((points < 0) | (points >= np.array(shape[1:]))).any(axis=1))
    return None if not len(bad) else f"vertex {tuple(points[bad[0]].tolist())}"
