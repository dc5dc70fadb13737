"""The data model shared by datasets, prompters, models and the engine.

Array conventions: every mask is a boolean numpy array indexed (z, y, x) in the canonical
orientation of :mod:`intrabench.io.volume`; every prompt coordinate is an integer voxel index
(z, y, x) in that same space. The prompt boxes (:class:`Box2D`, :class:`Box3D`) are inclusive on
both ends, as a user draws them; a mask's bounding box is a :data:`intrabench.masks.Box`
(half-open slices); ``from_box`` and ``to_box`` convert.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from intrabench import prompt_elements
from intrabench.masks import (
    UNKNOWN,
    Box,
    bounding_box,
    box_from_inclusive,
    inclusive_corners,
    with_box,
)
from intrabench.prompt_elements import (
    BoxMark,
    Click,
    PromptElement,
    Stroke,
    register_element,
    register_interaction,
)

if TYPE_CHECKING:  # an annotation only: types imports nothing of io
    from intrabench.io.volume import Volume

PromptKind = Literal["point", "box2d", "box3d", "scribble", "lasso", "mask"]
PROMPT_KINDS: tuple[str, ...] = ("point", "box2d", "box3d", "scribble", "lasso", "mask")

InteractionKind = Literal["click", "box2d", "box3d", "scribble", "boundary_slice", "lasso"]

#: Human effort of one interaction by kind (paper section 2.3; docs/architecture.md): the
#: registered kinds' (:mod:`intrabench.prompt_elements`), in registration order.
INTERACTION_COST = prompt_elements.INTERACTION_COST
#: Element class by prompt element kind: the built-in five (registered below) and any added.
ELEMENT_KINDS = prompt_elements.ELEMENT_KINDS


@dataclass(frozen=True)
class Interaction:
    """One thing the simulated user did (a click, a drawn box, a chosen boundary slice...)."""

    kind: InteractionKind

    @property
    def cost(self) -> int:
        """Its human effort (:data:`INTERACTION_COST` of its kind)."""
        return INTERACTION_COST[self.kind]


def interactions(kind: InteractionKind, count: int) -> tuple[Interaction, ...]:
    """``count`` interactions of one kind.

    Args:
        kind: The interaction kind: a key of :data:`INTERACTION_COST` (``click``, ``box2d``,
            ``box3d``, ``scribble``, ``boundary_slice``, ``lasso`` or a registered one).
        count: How many; anything ``int()`` takes (0 gives none).

    Returns:
        ``count`` equal :class:`Interaction` objects, e.g. for a prompt's ``interactions``.
    """
    return tuple(Interaction(kind) for _ in range(int(count)))


@dataclass(frozen=True)
class Box2D:
    """An axis-aligned box on one axial slice: inclusive (y_min, x_min, y_max, x_max)."""

    y_min: int
    x_min: int
    y_max: int
    x_max: int

    def as_tuple(self) -> tuple[int, int, int, int]:
        """``(y_min, x_min, y_max, x_max)``, inclusive voxel indices.

        Returns:
            The four coordinates in field order (the order of the box's JSON form).
        """
        return (self.y_min, self.x_min, self.y_max, self.x_max)

    @classmethod
    def from_box(cls, box: Box) -> Box2D:
        """The prompt box of a (y, x) :data:`intrabench.masks.Box` (half-open slices).

        Args:
            box: Two half-open slices (y, x) with explicit starts and stops, e.g. the
                :func:`~intrabench.masks.bounding_box` of a non-empty 2D mask.

        Returns:
            The inclusive box: ``y_max = y.stop - 1``, ``x_max = x.stop - 1``.
        """
        (y_min, x_min), (y_max, x_max) = inclusive_corners(box)
        return cls(int(y_min), int(x_min), int(y_max), int(x_max))

    def to_box(self) -> Box:
        """This box as (y, x) half-open slices (:data:`intrabench.masks.Box`).

        Returns:
            ``(slice(y_min, y_max + 1), slice(x_min, x_max + 1))``, to index a (Y, X) slice array.
        """
        return box_from_inclusive((self.y_min, self.x_min), (self.y_max, self.x_max))


@dataclass(frozen=True)
class Point(PromptElement):
    """A click at voxel ``zyx`` (z, y, x); ``label`` 1 = positive, 0 = negative."""

    kind: ClassVar[str] = "point"
    interaction: ClassVar[str] = "click"
    cost: ClassVar[int] = 1
    seconds: ClassVar[float] = 2.4
    zyx: tuple[int, int, int]
    field: ClassVar[str | None] = "points"
    label: int = 1

    def slices(self) -> set[int]:
        """The axial slices it lies on: the click's slice z.

        Returns:
            ``{z}``.
        """
        return {int(self.zyx[0])}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a click mark at its voxel with its label (canonical voxel
        coordinates).

        Returns:
            One :class:`~intrabench.prompt_elements.Click` at (z, y, x) with label 1 or 0.
        """
        return [Click(tuple(int(v) for v in self.zyx), int(self.label))]  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"zyx": [z, y, x], "label": 0 or 1}``.

        Returns:
            That dict, plain ints (JSON-able).
        """
        return {"zyx": [int(v) for v in self.zyx], "label": int(self.label)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Point:
        """The Point written by :meth:`to_json`.

        Args:
            data: ``{"zyx": [z, y, x], "label": 0 or 1}`` (voxel indices; other keys ignored).

        Returns:
            The click, coordinates and label as ints.
        """
        return cls(tuple(int(v) for v in data["zyx"]), int(data["label"]))  # type: ignore[arg-type]

    def value(self) -> tuple[tuple[int, ...], int]:
        """What :meth:`Prompt.elements` pairs with ``point``: ``((z, y, x), label)``.

        Returns:
            The voxel index as a tuple of three ints and the label (1 positive, 0 negative).
        """
        return (tuple(int(v) for v in self.zyx), int(self.label))

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """``point <index> at (z, y, x)`` when it is off the grid ``shape``, else None.

        Args:
            shape: The image grid's size (z, y, x) in voxels.
            key: Its index among the prompt's clicks (its :meth:`order_key`), named in the message.

        Returns:
            The description when a coordinate is negative or not below the grid's size on its axis;
            None when the click is on the grid.
        """
        zyx = tuple(int(v) for v in self.zyx)
        if any(v < 0 or v >= int(n) for v, n in zip(zyx, shape)):
            return f"point {key} at {zyx}"
        return None

    @classmethod
    def stored(cls, prompt: Prompt) -> tuple[Point, ...]:
        """The prompt's clicks, in the order of ``points``.

        Args:
            prompt: The prompt whose ``points`` and ``point_labels`` are read.

        Returns:
            One :class:`Point` per row of ``points``, with its label.
        """
        return tuple(
            cls(tuple(int(v) for v in zyx), int(label))  # type: ignore[arg-type]
            for zyx, label in zip(prompt.points, prompt.point_labels)
        )

    @classmethod
    def count(cls, prompt: Prompt) -> int:
        """The number of clicks.

        Args:
            prompt: The prompt.

        Returns:
            The number of rows of ``prompt.points``.
        """
        return len(prompt.points)

    @classmethod
    def keys(cls, prompt: Prompt) -> list[int]:
        """The clicks' indices.

        Args:
            prompt: The prompt.

        Returns:
            ``[0, 1, ..., N - 1]`` for its N clicks (a click's key in ``order`` is its index).
        """
        return list(range(len(prompt.points)))

    @classmethod
    def merged(cls, first: Prompt, second: Prompt) -> dict[str, Any]:
        """``first``'s clicks, then ``second``'s.

        Args:
            first: The earlier prompt.
            second: The later prompt; its clicks are added after ``first``'s (none is replaced).

        Returns:
            The ``Prompt`` keywords ``points`` (N, 3) and ``point_labels`` (N,), concatenated.
        """
        return {
            "points": np.concatenate([first.points, second.points]),
            "point_labels": np.concatenate([first.point_labels, second.point_labels]),
        }

    @classmethod
    def fields(cls, elements: tuple[PromptElement, ...]) -> dict[str, Any]:
        """``points`` (N, 3) int64 and ``point_labels`` (N,) int8 of these clicks.

        Args:
            elements: The prompt's :class:`Point` elements in the user's order.

        Returns:
            The ``Prompt`` keywords ``points`` (z, y, x rows) and ``point_labels`` (1 / 0).

        Raises:
            ValueError: A coordinate is a float that is not a whole number.
        """
        points = _as_points([element.zyx for element in elements])  # type: ignore[attr-defined]
        labels = np.array([int(element.label) for element in elements], dtype=np.int8)  # type: ignore[attr-defined]
        return {"points": points, "point_labels": labels}

    @classmethod
    def normalised(cls, prompt: Prompt) -> dict[str, Any]:
        """``points`` as (N, 3) int64 voxel indices, ``point_labels`` as (N,) int8.

        Args:
            prompt: The prompt as constructed (lists, float arrays of whole numbers...).

        Returns:
            The ``Prompt`` fields ``points`` and ``point_labels`` in their stored form.

        Raises:
            ValueError: A coordinate is not a whole number, or the numbers of points and labels
                differ.
        """
        points = _as_points(prompt.points)
        return {"points": points, "point_labels": _as_labels(prompt.point_labels, len(points))}

    @classmethod
    def slices_in(cls, prompt: Prompt) -> set[int]:
        """The slices of the clicks.

        Args:
            prompt: The prompt.

        Returns:
            The axial indices z of its clicks (empty without clicks).
        """
        return {int(z) for z in prompt.points[:, 0]}

    @classmethod
    def visited_in(cls, prompt: Prompt) -> set[int]:
        """The slices of the clicks.

        Args:
            prompt: The prompt.

        Returns:
            The axial indices z the user scrolls to for the clicks: those they lie on.
        """
        return cls.slices_in(prompt)

    @classmethod
    def points_in(cls, prompt: Prompt) -> tuple[np.ndarray, np.ndarray]:
        """The clicks themselves: (``points``, ``point_labels``).

        Args:
            prompt: The prompt.

        Returns:
            ``points`` (N, 3) int64 (z, y, x) and ``point_labels`` (N,) int8, the prompt's own
            arrays (N may be 0).
        """
        return prompt.points, prompt.point_labels

    @classmethod
    def json_sections(cls, prompt: Prompt) -> dict[str, Any]:
        """``"points": [[z, y, x], ...], "labels": [1, 0, ...]``.

        Args:
            prompt: The prompt.

        Returns:
            The two sections of :meth:`Prompt.to_json` for the clicks, as lists (both present, maybe
            empty).
        """
        return {"points": prompt.points.tolist(), "labels": prompt.point_labels.tolist()}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``points`` and ``point_labels`` from :meth:`json_sections`.

        Args:
            data: The parsed JSON of a prompt, with ``points`` and ``labels``.

        Returns:
            The ``Prompt`` keywords ``points`` and ``point_labels`` (lists; the prompt converts
            them).
        """
        return {"points": data["points"], "point_labels": data["labels"]}

    @classmethod
    def summary_counts(cls, prompt: Prompt) -> dict[str, Any]:
        """``n_points``, ``n_positive`` and ``n_negative``.

        Args:
            prompt: The prompt.

        Returns:
            The three counts (ints) for a results row's prompt summary.
        """
        return {
            "n_points": int(len(prompt.points)),
            "n_positive": int((prompt.point_labels == 1).sum()),
            "n_negative": int((prompt.point_labels == 0).sum()),
        }


@dataclass(frozen=True)
class SliceBox(PromptElement):
    """A 2D ``box`` (:class:`Box2D`, inclusive) drawn on axial slice ``z``."""

    kind: ClassVar[str] = "box2d"
    interaction: ClassVar[str] = "box2d"
    cost: ClassVar[int] = 2
    seconds: ClassVar[float] = 7.0
    z: int
    field: ClassVar[str | None] = "boxes"
    replaced_by_key: ClassVar[bool] = True
    box: Box2D

    def slices(self) -> set[int]:
        """The axial slices it lies on: its slice z.

        Returns:
            ``{z}``.
        """
        return {int(self.z)}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a box mark from its (z, y_min, x_min) to (z, y_max, x_max) corner
        (canonical voxel coordinates).

        Returns:
            One :class:`~intrabench.prompt_elements.BoxMark` on slice z, inclusive corners.
        """
        b = self.box
        return [BoxMark((int(self.z), b.y_min, b.x_min), (int(self.z), b.y_max, b.x_max))]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"z": z, "box": [y_min, x_min, y_max, x_max]}``.

        Returns:
            That dict; the box inclusive, in voxel indices.
        """
        return {"z": int(self.z), "box": list(self.box.as_tuple())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SliceBox:
        """The SliceBox written by :meth:`to_json`.

        Args:
            data: ``{"z": z, "box": [y_min, x_min, y_max, x_max]}`` (inclusive voxel indices).

        Returns:
            The 2D box on slice z.
        """
        return cls(int(data["z"]), Box2D(*(int(v) for v in data["box"])))

    def order_key(self, index: int) -> int:
        """Its key in a prompt's ``order``: its slice z (one 2D box per slice).

        Args:
            index: Its index among the prompt's 2D boxes (unused: the slice is the key).

        Returns:
            z.
        """
        return int(self.z)

    def value(self) -> tuple[int, Box2D]:
        """What :meth:`Prompt.elements` pairs with ``box2d``: ``(z, Box2D)``.

        Returns:
            Its slice index and its inclusive :class:`Box2D`.
        """
        return (int(self.z), self.box)

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """``the box on slice z (...)`` when a corner is off the grid or the box is inverted.

        Args:
            shape: The image grid's size (z, y, x) in voxels.
            key: Its key in the prompt's ``order`` (its slice; the message names the slice itself).

        Returns:
            The description with the box's ``(y_min, x_min, y_max, x_max)`` when a corner is off the
            grid or a minimum exceeds its maximum; None when the box is valid.
        """
        b = self.box
        if _bad_box(shape, (int(self.z), b.y_min, b.x_min), (int(self.z), b.y_max, b.x_max)):
            return f"the box on slice {self.z} ({b.as_tuple()})"
        return None

    @classmethod
    def stored(cls, prompt: Prompt) -> tuple[SliceBox, ...]:
        """The prompt's 2D boxes by ascending slice.

        Args:
            prompt: The prompt whose ``boxes`` (slice z -> :class:`Box2D`) are read.

        Returns:
            One :class:`SliceBox` per slice, in ascending z.
        """
        return tuple(cls(z, box) for z, box in prompt.boxes.items())

    @classmethod
    def count(cls, prompt: Prompt) -> int:
        """The number of 2D boxes.

        Args:
            prompt: The prompt.

        Returns:
            The number of slices with a 2D box.
        """
        return len(prompt.boxes)

    @classmethod
    def fields(cls, elements: tuple[PromptElement, ...]) -> dict[str, Any]:
        """``boxes``: slice z -> :class:`Box2D` (a later box on a slice wins).

        Args:
            elements: The prompt's :class:`SliceBox` elements in the user's order.

        Returns:
            The ``Prompt`` keyword ``boxes``.
        """
        return {"boxes": {int(e.z): e.box for e in elements}}  # type: ignore[attr-defined]

    @classmethod
    def normalised(cls, prompt: Prompt) -> dict[str, Any]:
        """``boxes`` keyed by int slice, in ascending z.

        Args:
            prompt: The prompt as constructed (its ``boxes`` any mapping of slice to
                :class:`Box2D`).

        Returns:
            The ``Prompt`` field ``boxes`` as a dict sorted by slice.
        """
        return {"boxes": {int(z): b for z, b in sorted(prompt.boxes.items())}}

    @classmethod
    def box_on_slice(cls, prompt: Prompt, z: int) -> Box2D | None:
        """The 2D box drawn on slice ``z``, if any.

        Args:
            prompt: The prompt.
            z: The axial slice index.

        Returns:
            The inclusive :class:`Box2D` on that slice, or None.
        """
        return prompt.boxes.get(z)

    @classmethod
    def json_sections(cls, prompt: Prompt) -> dict[str, Any]:
        """``"boxes": {"z": [y_min, x_min, y_max, x_max]}``.

        Args:
            prompt: The prompt.

        Returns:
            The ``boxes`` section of :meth:`Prompt.to_json`: slices as string keys (JSON object
            keys), boxes inclusive; present even when empty.
        """
        return {"boxes": {str(z): list(b.as_tuple()) for z, b in prompt.boxes.items()}}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``boxes`` from :meth:`json_sections`.

        Args:
            data: The parsed JSON of a prompt, with ``boxes``.

        Returns:
            The ``Prompt`` keyword ``boxes``: int slice -> :class:`Box2D`.
        """
        return {"boxes": {int(z): Box2D(*b) for z, b in data["boxes"].items()}}

    @classmethod
    def summary_counts(cls, prompt: Prompt) -> dict[str, Any]:
        """``n_boxes2d``.

        Args:
            prompt: The prompt.

        Returns:
            ``{"n_boxes2d": number of 2D boxes}`` for a results row's prompt summary.
        """
        return {"n_boxes2d": len(prompt.boxes)}


@dataclass(frozen=True)
class Box3D(PromptElement):
    """An axis-aligned 3D box: inclusive (z_min, y_min, x_min) to (z_max, y_max, x_max)."""

    kind: ClassVar[str] = "box3d"
    interaction: ClassVar[str] = "box3d"
    cost: ClassVar[int] = 3
    seconds: ClassVar[float] = 13.0

    field: ClassVar[str | None] = "box3d"
    replaced_by_key: ClassVar[bool] = True

    z_min: int
    y_min: int
    x_min: int
    z_max: int
    y_max: int
    x_max: int

    def slice_box(self) -> Box2D:
        """The box's in-plane extent as a :class:`Box2D` (inclusive).

        Returns:
            ``Box2D(y_min, x_min, y_max, x_max)``, the same on every slice of its z-range.
        """
        return Box2D(self.y_min, self.x_min, self.y_max, self.x_max)

    def as_tuple(self) -> tuple[int, int, int, int, int, int]:
        """``(z_min, y_min, x_min, z_max, y_max, x_max)``, inclusive voxel indices.

        Returns:
            The six coordinates in field order (the order of the box's JSON form).
        """
        return (self.z_min, self.y_min, self.x_min, self.z_max, self.y_max, self.x_max)

    @classmethod
    def from_box(cls, box: Box) -> Box3D:
        """The prompt box of a (z, y, x) :data:`intrabench.masks.Box` (half-open slices).

        Args:
            box: Three half-open slices (z, y, x) with explicit starts and stops, e.g. the
                :func:`~intrabench.masks.bounding_box` of a non-empty mask.

        Returns:
            The inclusive box: each maximum is its slice's ``stop - 1``.
        """
        low, high = inclusive_corners(box)
        return cls(*(int(v) for v in low), *(int(v) for v in high))

    def to_box(self) -> Box:
        """This box as (z, y, x) half-open slices (:data:`intrabench.masks.Box`).

        Returns:
            Three slices ``min..max + 1``, to index a (Z, Y, X) volume.
        """
        return box_from_inclusive(self.as_tuple()[:3], self.as_tuple()[3:])

    def slices(self) -> set[int]:
        """The axial slices it lies on: every slice of its inclusive z-range.

        Returns:
            ``{z_min, ..., z_max}``.
        """
        return set(range(self.z_min, self.z_max + 1))

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a box mark between its inclusive corners (canonical voxel
        coordinates).

        Returns:
            One :class:`~intrabench.prompt_elements.BoxMark` with ``volume=True`` (drawn on every
            slice it spans).
        """
        t = self.as_tuple()
        return [BoxMark(t[:3], t[3:], volume=True)]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"box": [z_min, y_min, x_min, z_max, y_max,
        x_max]}``.

        Returns:
            That dict; inclusive voxel indices.
        """
        return {"box": list(self.as_tuple())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Box3D:
        """The Box3D written by :meth:`to_json`.

        Args:
            data: ``{"box": [z_min, y_min, x_min, z_max, y_max, x_max]}`` (inclusive voxel indices).

        Returns:
            The 3D box.
        """
        return cls(*(int(v) for v in data["box"]))

    def visited_slices(self) -> set[int]:
        """None: the user does not visit a 3D box's slices one by one (its cost is the box's).

        Returns:
            An empty set.
        """
        return set()

    def order_key(self, index: int) -> int:
        """Its key in a prompt's ``order``: 0 (a prompt has one 3D box).

        Args:
            index: Its index among the prompt's 3D boxes (unused).

        Returns:
            0.
        """
        return 0

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """``the 3D box (...)`` when a corner is off the grid or the box is inverted.

        Args:
            shape: The image grid's size (z, y, x) in voxels.
            key: Its key in the prompt's ``order`` (always 0; not named in the message).

        Returns:
            The description with the box's six coordinates when a corner is off the grid or a
            minimum exceeds its maximum; None when the box is valid.
        """
        t = self.as_tuple()
        return f"the 3D box {t}" if _bad_box(shape, t[:3], t[3:]) else None

    @classmethod
    def stored(cls, prompt: Prompt) -> tuple[Box3D, ...]:
        """The prompt's 3D box, or none.

        Args:
            prompt: The prompt whose ``box3d`` is read.

        Returns:
            ``(box3d,)``, or ``()`` when the prompt has no 3D box.
        """
        return () if prompt.box3d is None else (prompt.box3d,)

    @classmethod
    def fields(cls, elements: tuple[PromptElement, ...]) -> dict[str, Any]:
        """``box3d``: the last of these boxes, or None.

        Args:
            elements: The prompt's :class:`Box3D` elements in the user's order (a later one
                replaces an earlier one).

        Returns:
            The ``Prompt`` keyword ``box3d``.
        """
        return {"box3d": elements[-1] if elements else None}

    @classmethod
    def box_on_slice(cls, prompt: Prompt, z: int) -> Box2D | None:
        """The 3D box's in-plane extent on the slices of its z-range.

        Args:
            prompt: The prompt.
            z: The axial slice index.

        Returns:
            The box's inclusive (y, x) extent (:meth:`slice_box`) when ``z_min <= z <= z_max``, else
            None (also without a 3D box).
        """
        box = prompt.box3d
        return box.slice_box() if box is not None and box.z_min <= z <= box.z_max else None

    @classmethod
    def json_sections(cls, prompt: Prompt) -> dict[str, Any]:
        """``"box3d": [z_min, y_min, x_min, z_max, y_max, x_max]`` or ``null``.

        Args:
            prompt: The prompt.

        Returns:
            The ``box3d`` section of :meth:`Prompt.to_json` (inclusive voxel indices, or None).
        """
        return {"box3d": list(prompt.box3d.as_tuple()) if prompt.box3d is not None else None}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``box3d`` from :meth:`json_sections`.

        Args:
            data: The parsed JSON of a prompt, with ``box3d`` (six ints or None).

        Returns:
            The ``Prompt`` keyword ``box3d``: a :class:`Box3D` or None.
        """
        return {"box3d": cls(*data["box3d"]) if data["box3d"] is not None else None}

    @classmethod
    def summary_counts(cls, prompt: Prompt) -> dict[str, Any]:
        """``has_box3d``.

        Args:
            prompt: The prompt.

        Returns:
            ``{"has_box3d": bool}`` for a results row's prompt summary.
        """
        return {"has_box3d": prompt.box3d is not None}


class _StoredAsTuple:
    """How a kind whose elements a prompt keeps as one tuple field (``field``: scribbles,
    lassos) reads and writes that field."""

    field: ClassVar[str | None]

    @classmethod
    def stored(cls, prompt: Prompt) -> tuple[PromptElement, ...]:
        """The prompt's elements of this kind, in order (its ``field``)."""
        return tuple(getattr(prompt, cls.field))

    @classmethod
    def fields(cls, elements: tuple[PromptElement, ...]) -> dict[str, Any]:
        """The ``Prompt`` keyword ``field``: ``elements`` (in the user's order) as a tuple."""
        return {cls.field: tuple(elements)}

    @classmethod
    def normalised(cls, prompt: Prompt) -> dict[str, Any]:
        """The ``Prompt`` field ``field`` in its stored form, a tuple (given: any iterable)."""
        return {cls.field: tuple(getattr(prompt, cls.field))}


@dataclass(frozen=True, eq=False)
class Scribble(_StoredAsTuple, PromptElement):
    """An ordered polyline of voxels (M, 3) in (z, y, x), all positive (1) or negative (0)."""

    kind: ClassVar[str] = "scribble"
    interaction: ClassVar[str] = "scribble"
    cost: ClassVar[int] = 3
    seconds: ClassVar[float] = 10.9
    points: np.ndarray
    field: ClassVar[str | None] = "scribbles"
    label: int

    def slices(self) -> set[int]:
        """The axial slices it lies on: the slices its voxels lie on.

        Returns:
            The z of each of its voxels, once each.
        """
        return {int(z) for z in np.asarray(self.points).reshape(-1, 3)[:, 0]}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a stroke mark along its voxels with its label (canonical voxel
        coordinates).

        Returns:
            One :class:`~intrabench.prompt_elements.Stroke` of its (M, 3) int64 voxels, open.
        """
        return [Stroke(np.asarray(self.points, dtype=np.int64).reshape(-1, 3), int(self.label))]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"label": 0 or 1, "points": [[z, y, x], ...]}``.

        Returns:
            That dict; voxels in drawing order, as lists of ints.
        """
        return {"label": int(self.label), "points": np.asarray(self.points).reshape(-1, 3).tolist()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scribble:
        """The Scribble written by :meth:`to_json`.

        Args:
            data: ``{"label": 0 or 1, "points": [[z, y, x], ...]}`` (voxel indices).

        Returns:
            The scribble, its voxels an (M, 3) int64 array.
        """
        return cls(np.asarray(data["points"], dtype=np.int64).reshape(-1, 3), int(data["label"]))

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """``scribble <index>'s voxel (z, y, x)``: its first voxel off the grid, or None.

        Args:
            shape: The image grid's size (z, y, x) in voxels.
            key: Its index among the prompt's scribbles, named in the message.

        Returns:
            The description of its first voxel with a coordinate negative or not below the grid's
            size; None when all its voxels are on the grid.
        """
        found = _first_off(shape, self.points)
        return None if found is None else f"scribble {key}'s voxel {found[1]}"

    @classmethod
    def points_in(cls, prompt: Prompt) -> tuple[np.ndarray, np.ndarray] | None:
        """Every scribble's voxels with its label, in order (None without scribbles).

        Args:
            prompt: The prompt.

        Returns:
            (points (M, 3) int (z, y, x), labels (M,) int8), the scribbles' voxels one after the
            other, each labelled with its scribble's label; None when the prompt has no scribble.
        """
        if not prompt.scribbles:
            return None
        points = [s.points.reshape(-1, 3) for s in prompt.scribbles]
        labels = [np.full(len(s.points), s.label, dtype=np.int8) for s in prompt.scribbles]
        return np.concatenate(points), np.concatenate(labels)

    @classmethod
    def json_sections(cls, prompt: Prompt) -> dict[str, Any]:
        """``"scribbles": [{"label": 1, "points": [[z, y, x], ...]}]``.

        Args:
            prompt: The prompt.

        Returns:
            The ``scribbles`` section of :meth:`Prompt.to_json` (each scribble's :meth:`to_json`),
            present even when empty.
        """
        return {"scribbles": [s.to_json() for s in prompt.scribbles]}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``scribbles`` from :meth:`json_sections`.

        Args:
            data: The parsed JSON of a prompt, with ``scribbles``.

        Returns:
            The ``Prompt`` keyword ``scribbles``: a tuple of :class:`Scribble`.
        """
        return {"scribbles": tuple(cls.from_json(s) for s in data["scribbles"])}

    @classmethod
    def summary_counts(cls, prompt: Prompt) -> dict[str, Any]:
        """``n_scribbles``.

        Args:
            prompt: The prompt.

        Returns:
            ``{"n_scribbles": number of scribbles}`` for a results row's prompt summary.
        """
        return {"n_scribbles": len(prompt.scribbles)}


@dataclass(frozen=True, eq=False)
class Lasso(_StoredAsTuple, PromptElement):
    """A closed freehand contour drawn on axial slice ``z``: ``contour`` (K, 2) int (y, x)
    vertices in drawing order, the last joined back to the first; ``label`` 1 = the enclosed
    region is the target's, 0 = it is not (nnInteractive's lasso)."""

    kind: ClassVar[str] = "lasso"
    interaction: ClassVar[str] = "lasso"
    cost: ClassVar[int] = 3  # one freehand stroke, as a scribble
    seconds: ClassVar[float] = 10.9
    z: int
    contour: np.ndarray
    field: ClassVar[str | None] = "lassos"
    label: int = 1

    def slices(self) -> set[int]:
        """The axial slices it lies on: its slice z.

        Returns:
            ``{z}``.
        """
        return {int(self.z)}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a closed stroke mark along its contour on its slice, with its label
        (canonical voxel coordinates).

        Returns:
            One :class:`~intrabench.prompt_elements.Stroke` of its vertices as (K, 3) int64 voxels
            (z, y, x), ``closed=True``.
        """
        contour = np.asarray(self.contour, dtype=np.int64).reshape(-1, 2)
        voxels = np.column_stack([np.full(len(contour), int(self.z)), contour])
        return [Stroke(voxels, int(self.label), closed=True)]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"z": z, "label": 0 or 1, "contour": [[y, x],
        ...]}``.

        Returns:
            That dict; vertices in drawing order, voxel indices on slice z.
        """
        contour = np.asarray(self.contour).reshape(-1, 2).tolist()
        return {"z": int(self.z), "label": int(self.label), "contour": contour}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lasso:
        """The Lasso written by :meth:`to_json`.

        Args:
            data: ``{"z": z, "label": 0 or 1, "contour": [[y, x], ...]}`` (voxel indices).

        Returns:
            The lasso, its contour a (K, 2) int64 array.
        """
        contour = np.asarray(data["contour"], dtype=np.int64).reshape(-1, 2)
        return cls(int(data["z"]), contour, int(data["label"]))

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """``lasso <index> on slice z`` when its slice is off the grid, else None.

        Args:
            shape: The image grid's size (z, y, x) in voxels; only z is checked (a contour may run
                past the slice's edge: :meth:`region` clips it).
            key: Its index among the prompt's lassos, named in the message.

        Returns:
            The description when z is negative or not below ``shape[0]``; None otherwise.
        """
        return None if 0 <= int(self.z) < int(shape[0]) else f"lasso {key} on slice {self.z}"

    @classmethod
    def json_sections(cls, prompt: Prompt) -> dict[str, Any]:
        """``"lassos": [{"z": z, "label": 1, "contour": [[y, x], ...]}]``, only when there are
        any (prompts saved before lassos existed have no such section).

        Args:
            prompt: The prompt.

        Returns:
            The ``lassos`` section of :meth:`Prompt.to_json` (each lasso's :meth:`to_json`), or {}
            when the prompt has no lasso.
        """
        return {"lassos": [lasso.to_json() for lasso in prompt.lassos]} if prompt.lassos else {}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """``lassos`` from :meth:`json_sections` (none when the section is absent).

        Args:
            data: The parsed JSON of a prompt, with or without ``lassos``.

        Returns:
            The ``Prompt`` keyword ``lassos``: a tuple of :class:`Lasso`, empty without the section.
        """
        return {"lassos": tuple(cls.from_json(lasso) for lasso in data.get("lassos", []))}

    @classmethod
    def summary_counts(cls, prompt: Prompt) -> dict[str, Any]:
        """``n_lassos``.

        Args:
            prompt: The prompt.

        Returns:
            ``{"n_lassos": number of lassos}`` for a results row's prompt summary.
        """
        return {"n_lassos": len(prompt.lassos)}

    def region(self, shape_yx: tuple[int, int]) -> np.ndarray:
        """Boolean (Y, X) mask of the slice: the pixels inside the contour or on it.

        Args:
            shape_yx: The slice's size (Y, X) in voxels; the parts of the contour outside it are
                clipped.

        Returns:
            A bool array of ``shape_yx``: the filled polygon plus the pixels of its edges (the last
            vertex joined to the first); all False for an empty contour.
        """
        from skimage.draw import line, polygon

        contour = np.asarray(self.contour, dtype=np.int64).reshape(-1, 2)
        region = np.zeros(shape_yx, dtype=bool)
        if len(contour) == 0:
            return region
        region[polygon(contour[:, 0], contour[:, 1], shape=shape_yx)] = True
        for (y0, x0), (y1, x1) in zip(contour, np.roll(contour, -1, axis=0)):  # the loop itself
            ys, xs = line(int(y0), int(x0), int(y1), int(x1))
            inside = (ys >= 0) & (ys < shape_yx[0]) & (xs >= 0) & (xs < shape_yx[1])
            region[ys[inside], xs[inside]] = True
        return region


for _element in (Point, SliceBox, Box3D, Scribble):
    register_element(_element)
register_interaction("boundary_slice", cost=1, seconds=3.0)
register_element(Lasso)

#: the element kinds a :class:`Prompt` stores in their own fields (the accessors models read):
#: those whose class names a ``field``; any other registered kind is kept in ``Prompt.extras``
BUILT_IN_KINDS = tuple(kind_class.kind for kind_class in prompt_elements.stored_kinds())


@dataclass(frozen=True, eq=False)
class SlicePrompt:
    """What a 2D model receives on one axial slice: points (N, 2) as (y, x), an optional box,
    and the prompt's extras (elements of added kinds) that lie on the slice."""

    z: int
    points: np.ndarray
    labels: np.ndarray
    box: Box2D | None
    extras: tuple[PromptElement, ...] = ()

    @property
    def is_empty(self) -> bool:
        """Whether the slice prompt has neither points nor a box."""
        return len(self.points) == 0 and self.box is None and not self.extras

    def key(self) -> tuple:
        """Hashable identity of the prompt content (for caching model outputs).

        Returns:
            A tuple of the slice z, the points' and labels' bytes (as int64 / int8), the box's
            corners (or None) and each extra's kind and JSON form; equal for equal content.
        """
        return (
            self.z,
            self.points.astype(np.int64).tobytes(),
            self.labels.astype(np.int8).tobytes(),
            None if self.box is None else self.box.as_tuple(),
        ) + tuple((e.kind, repr(sorted(e.to_json().items()))) for e in self.extras)


def _as_points(points: Any) -> np.ndarray:
    given = np.asarray(points)
    if (
        given.dtype.kind == "f"
        and given.size
        and not (np.isfinite(given).all() and (given == np.floor(given)).all())
    ):
        raise ValueError(
            f"points are voxel indices (whole numbers); got {given.reshape(-1)[:6]}"
            " (round them where they are made: int() truncates 2.7 to 2)"
        )
    return np.asarray(given, dtype=np.int64).reshape(-1, 3)


def _as_labels(labels: Any, n: int) -> np.ndarray:
    array = np.asarray(labels, dtype=np.int8).reshape(-1)
    if len(array) != n:
        raise ValueError(f"{n} points but {len(array)} labels")
    return array


@dataclass(frozen=True, eq=False)
class Prompt:
    """A prompt in canonical voxel space, with the interactions that produced it.

    * ``points``: (N, 3) int (z, y, x); ``point_labels``: (N,) 1 = positive, 0 = negative.
    * ``boxes``: axial slice index z -> :class:`Box2D` on that slice.
    * ``box3d``: one :class:`Box3D` or None.
    * ``scribbles``: ordered voxel polylines; models without native scribble support receive
      their voxels as points (see :meth:`model_points`).
    * ``lassos``: closed contours on axial slices (:class:`Lasso`); only models that accept
      the ``lasso`` kind receive them (they never become points).
    * ``interactions``: what the simulated user actually did; effort is computed from these,
      never hard-coded. Derived prompts (interpolated points, propagated boxes) cost nothing.
    * ``effort_label``: the paper's label for the scheme ("1X" = one interaction per slice, "7"...).
    * ``order``: the order in which the user gave the elements, as (kind, key) pairs: kind
      ``point`` / ``scribble`` / ``lasso`` with the element's index, ``box2d`` with its slice,
      ``box3d`` with 0. Empty means the default order (:meth:`element_order`). A model whose
      result depends on the order (nnInteractive decays older interactions) replays
      :meth:`elements`; :meth:`merged_with` keeps the user's order across steps.
    """

    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    point_labels: np.ndarray = field(default_factory=lambda: np.zeros((0,), dtype=np.int8))
    boxes: Mapping[int, Box2D] = field(default_factory=dict)
    box3d: Box3D | None = None
    scribbles: tuple[Scribble, ...] = ()
    interactions: tuple[Interaction, ...] = ()
    effort_label: str = ""
    lassos: tuple[Lasso, ...] = ()
    order: tuple[tuple[str, int], ...] = ()
    #: in a robustness run, the clickability maps this step's clicks were drawn from:
    #: (source, click regions) pairs, ``fallback:<name>`` where a map handed a region on
    #: (``recorded`` without clicks there)
    click_maps: tuple[tuple[str, int], ...] = ()
    #: elements of registered kinds other than the built-in five (:data:`BUILT_IN_KINDS`), in
    #: the order given; ``order`` keys them by kind and index among that kind's extras
    extras: tuple[PromptElement, ...] = ()

    def __post_init__(self) -> None:
        for kind_class in prompt_elements.stored_kinds():
            for name, value in kind_class.normalised(self).items():
                object.__setattr__(self, name, value)
        object.__setattr__(self, "interactions", tuple(self.interactions))
        object.__setattr__(self, "extras", _checked_extras(self.extras))
        order = tuple((str(kind), int(key)) for kind, key in self.order)
        if order and sorted(order) != sorted(self._default_order()):
            raise ValueError(f"prompt order {order} does not list each element once")
        object.__setattr__(self, "order", order)

    @classmethod
    def from_elements(cls, elements: Iterable[PromptElement], **keywords: Any) -> Prompt:
        """The prompt of typed ``elements`` given in this order (the user's order).

        Args:
            elements: Elements of registered kinds; each kind's field keeps them in this order
                (a later 2D box on the same slice is refused as a second element there).
            **keywords: The other ``Prompt`` keywords (``interactions``, ``effort_label``...).

        Returns:
            The prompt, its ``order`` the order of ``elements``.
        """
        groups: dict[str, list[PromptElement]] = {}
        order: list[tuple[str, int]] = []
        extras: list[PromptElement] = []
        for element in elements:
            group = groups.setdefault(element.kind, [])
            order.append((element.kind, element.order_key(len(group))))
            group.append(element)
            if prompt_elements.element_class(element.kind).field is None:
                extras.append(element)
        stored: dict[str, Any] = {}
        for kind_class in prompt_elements.stored_kinds():
            stored.update(kind_class.fields(tuple(groups.get(kind_class.kind, ()))))
        return cls(**stored, **keywords, order=tuple(order), extras=tuple(extras))

    def outside(self, shape: tuple[int, ...]) -> str | None:
        """The first element of the prompt that is not on the (z, y, x) grid ``shape``
        (a point, a box corner, a scribble voxel or a lasso's slice), described, or None
        when all are on it. A negative index would count from the grid's far end in numpy.

        Args:
            shape: The image grid's size (z, y, x) in voxels, e.g. ``case.label.shape``.

        Returns:
            One line naming the element, in the default element order (e.g. ``point 2 at (40, 3,
            -1)``, ``the box on slice 7 (...)``; an inverted box counts as off the grid), or None.
        """
        grid = tuple(int(v) for v in shape)
        for (_, key), element in self._keyed_elements():
            if (where := element.describe_outside(grid, key)) is not None:
                return where
        return None

    # -- the user's order ---------------------------------------------------------------
    def _keyed_elements(self) -> list[tuple[tuple[str, int], PromptElement]]:
        """((kind, key), element) of every element in the default order: the kinds with a
        field of their own in registration order, then the extras as given."""
        keyed: list[tuple[tuple[str, int], PromptElement]] = []
        for kind_class in prompt_elements.stored_kinds():
            keyed += [
                ((kind_class.kind, element.order_key(index)), element)
                for index, element in enumerate(kind_class.stored(self))
            ]
        keyed += list(zip(_extra_keys(self.extras), self.extras))
        return keyed

    def _default_order(self) -> tuple[tuple[str, int], ...]:
        order = [
            (kind_class.kind, key)
            for kind_class in prompt_elements.stored_kinds()
            for key in kind_class.keys(self)
        ]
        return tuple(order + _extra_keys(self.extras))

    def element_order(self) -> tuple[tuple[str, int], ...]:
        """(kind, key) of every element in the user's order; without an explicit ``order``:
        points, 2D boxes by slice, the 3D box, scribbles, lassos, extras.

        Returns:
            The pairs: kind ``point`` / ``scribble`` / ``lasso`` / an added kind with the element's
            index among its kind, ``box2d`` with its slice z, ``box3d`` with 0.
        """
        return self.order or self._default_order()

    def elements(self) -> list[tuple[str, Any]]:
        """The elements in the user's order: ('point', ((z, y, x), label)), ('box2d', (z,
        Box2D)), ('box3d', Box3D), ('scribble', Scribble), ('lasso', Lasso), (kind, element)
        for the extras (each element's :meth:`~intrabench.prompt_elements.PromptElement.value`).

        Returns:
            One (kind, value) pair per element, in :meth:`element_order`.
        """
        by_key = dict(self._keyed_elements())
        return [(kind, by_key[(kind, key)].value()) for kind, key in self.element_order()]

    def typed_elements(self) -> list[PromptElement]:
        """The elements in the user's order, as :class:`~intrabench.prompt_elements.PromptElement`
        objects (:class:`Point`, :class:`SliceBox`, :class:`Box3D`, :class:`Scribble`,
        :class:`Lasso` and the extras).

        Returns:
            One element object per element, in :meth:`element_order`.
        """
        by_key = dict(self._keyed_elements())
        return [by_key[key] for key in self.element_order()]

    def marks(self) -> list[prompt_elements.Mark]:
        """How the prompt is drawn: its elements' marks (:mod:`intrabench.prompt_elements`) in
        the default order (points, 2D boxes by slice, the 3D box, scribbles, lassos, extras),
        whatever the user's order.

        Returns:
            The :class:`~intrabench.prompt_elements.Click`, ``BoxMark`` and ``Stroke`` marks, in
            canonical voxel coordinates (z, y, x).
        """
        return prompt_elements.marks_of(element for _, element in self._keyed_elements())

    def elements_of(self, kind: str) -> tuple[PromptElement, ...]:
        """The elements of ``kind`` in the order its field keeps them (an added kind's: the
        extras of that kind, in order); () for a kind not registered.

        Args:
            kind: A prompt element kind (``point``, ``box2d``, ``box3d``, ``scribble``, ``lasso`` or
                a registered one).

        Returns:
            The kind's :class:`~intrabench.prompt_elements.PromptElement` objects (2D boxes by
            ascending slice).
        """
        kind_class = prompt_elements.ELEMENT_KINDS.get(kind)
        return () if kind_class is None else kind_class.stored(self)

    # -- what the prompt contains -------------------------------------------------------
    @property
    def kinds(self) -> frozenset[str]:
        """The prompt kinds present (``point``, ``box2d``, ``box3d``, ``scribble``, ``lasso`` and
        added kinds), to match against a model's ``accepts``."""
        kinds = {k.kind for k in prompt_elements.stored_kinds() if k.count(self)}
        kinds.update(element.kind for element in self.extras)
        return frozenset(kinds)

    @property
    def is_empty(self) -> bool:
        """Whether the prompt carries nothing."""
        return not self.kinds

    @property
    def effort(self) -> int:
        """Number of human interactions (paper section 2.3)."""
        return sum(interaction.cost for interaction in self.interactions)

    def model_points(self) -> tuple[np.ndarray, np.ndarray]:
        """All points a point-only model should receive: clicks plus scribble voxels (each
        kind's :meth:`~intrabench.prompt_elements.PromptElement.points_in`, in registration
        order): (points (N, 3) int64 (z, y, x), labels (N,) int8).

        Returns:
            ``points`` (N, 3) int64 voxel indices (z, y, x) and ``labels`` (N,) int8 (1 positive,
            0 negative): the clicks first, then each scribble's voxels; (0, 3) and (0,) when there
            are none. Lassos and boxes never become points.
        """
        parts = [
            part
            for kind_class in prompt_elements.stored_kinds()
            if (part := kind_class.points_in(self)) is not None
        ]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.zeros((0, 3), dtype=np.int64), np.zeros((0,), dtype=np.int8)
        points = np.concatenate([points for points, _ in parts]).astype(np.int64)
        return points, np.concatenate([labels for _, labels in parts]).astype(np.int8)

    def slices(self) -> list[int]:
        """Axial slices that carry any prompt (points, scribbles, 2D boxes, lassos, 3D box,
        extras), ascending.

        Returns:
            The slice indices z, each once (a 3D box counts every slice of its z-range).
        """
        zs: set[int] = set()
        for kind_class in prompt_elements.stored_kinds():
            zs |= kind_class.slices_in(self)
        for element in self.extras:
            zs |= element.slices()
        return sorted(zs)

    def visited_slices(self) -> list[int]:
        """The axial slices a user visits to give the prompt, ascending: every element's
        :meth:`~intrabench.prompt_elements.PromptElement.visited_slices` (a 3D box's slices
        are not visited one by one).

        Returns:
            The slice indices z, each once.
        """
        zs: set[int] = set()
        for kind_class in prompt_elements.stored_kinds():
            zs |= kind_class.visited_in(self)
        for element in self.extras:
            zs |= {int(z) for z in element.visited_slices()}
        return sorted(zs)

    def on_slice(self, z: int) -> SlicePrompt:
        """The 2D prompt on axial slice ``z``: the model points there, the first kind's box
        there (a 2D box on the slice, else a 3D box's xy box on its z-range), and the extras
        that lie on it.

        Args:
            z: The axial slice index.

        Returns:
            The slice prompt: points (N, 2) int64 (y, x) of :meth:`model_points` on slice z with
            their (N,) int8 labels, the inclusive :class:`Box2D` or None, and the extras on z.
        """
        points, labels = self.model_points()
        on = points[:, 0] == z
        box = None
        for kind_class in prompt_elements.stored_kinds():
            if (box := kind_class.box_on_slice(self, z)) is not None:
                break
        extras = tuple(e for e in self.extras if z in e.slices())
        return SlicePrompt(z=z, points=points[on][:, 1:], labels=labels[on], box=box, extras=extras)

    # -- combining ----------------------------------------------------------------------
    def merged_with(self, other: Prompt) -> Prompt:
        """This prompt plus ``other`` (other's boxes win on shared slices), in the user's order:
        this prompt's elements, then ``other``'s (a box that ``other`` replaces leaves its old
        place).

        Args:
            other: The later prompt (e.g. the next refinement step's).

        Returns:
            A new prompt: the elements of both, ``other``'s 2D boxes replacing this prompt's on the
            same slice and its 3D box replacing this one's, the interactions of both (effort adds
            up), ``other``'s effort label unless empty, the click maps' counts summed by source.
        """
        stored: dict[str, Any] = {}
        shift: dict[str, int] = {}
        replaced: set[tuple[str, int]] = set()
        for kind_class in prompt_elements.stored_kinds():
            if kind_class.replaced_by_key:
                replaced |= {(kind_class.kind, key) for key in kind_class.keys(other)}
            else:
                shift[kind_class.kind] = kind_class.count(self)
            stored.update(kind_class.merged(self, other))
        for kind, _ in _extra_keys(self.extras):
            shift[kind] = shift.get(kind, 0) + 1
        order = tuple(element for element in self.element_order() if element not in replaced)
        order += tuple((kind, key + shift.get(kind, 0)) for kind, key in other.element_order())
        return Prompt(
            **stored,
            interactions=self.interactions + other.interactions,
            effort_label=other.effort_label or self.effort_label,
            order=order,
            click_maps=_summed(self.click_maps + other.click_maps),
            extras=self.extras + other.extras,
        )

    def to_json(self) -> str:
        """The prompt's geometry as compact JSON (voxel indices (z, y, x), boxes inclusive):
        ``{"points": [[z, y, x], ...], "labels": [1, 0, ...], "boxes": {"z": [y0, x0, y1, x1]},
        "box3d": [z0, y0, x0, z1, y1, x1] | null, "scribbles": [{"label": 1, "points": [...]}]}``,
        plus ``"lassos": [{"z": z, "label": 1, "contour": [[y, x], ...]}]`` when there are any
        (each built-in kind's :meth:`~intrabench.prompt_elements.PromptElement.json_sections`,
        in registration order), ``"elements": [{"kind": k, ...}]`` (each extra's ``to_json``)
        when there are any, and ``"order"`` when it is not the default.
        Interactions and the effort label are not part of it (rows carry them).

        Returns:
            The JSON text, without spaces (the ``prompt_json`` of a results row); :meth:`from_json`
            reads it back.
        """
        import json

        data: dict[str, Any] = {}
        for kind_class in prompt_elements.stored_kinds():
            data.update(kind_class.json_sections(self))
        if self.extras:
            data["elements"] = [{"kind": e.kind, **e.to_json()} for e in self.extras]
        if self.order and self.order != self._default_order():
            data["order"] = [[kind, key] for kind, key in self.order]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Prompt:
        """The prompt geometry written by :meth:`to_json` (no interactions).

        Args:
            text: The JSON text, e.g. a results row's ``prompt_json`` (sections missing from older
                files, ``lassos``, ``elements`` and ``order``, read as empty).

        Returns:
            The prompt with its elements and order; no interactions, empty effort label and click
            maps.

        Raises:
            ValueError: An ``elements`` entry's kind is not registered.
        """
        import json

        data = json.loads(text)
        stored: dict[str, Any] = {}
        for kind_class in prompt_elements.stored_kinds():
            stored.update(kind_class.from_json_sections(data))
        return cls(
            **stored,
            order=tuple((kind, int(key)) for kind, key in data.get("order", [])),
            extras=tuple(
                prompt_elements.element_class(e["kind"]).from_json(e)
                for e in data.get("elements", [])
            ),
        )

    def summary(self) -> dict[str, Any]:
        """A small JSON-able description for results rows: each built-in kind's counts
        (``n_points``, ``n_positive``, ``n_negative``, ``n_boxes2d``, ``has_box3d``,
        ``n_scribbles``, ``n_lassos``) and ``n_prompted_slices``.

        Returns:
            Those keys with int (``has_box3d``: bool) values; ``n_prompted_slices`` is the number of
            :meth:`slices`.
        """
        counts: dict[str, Any] = {}
        for kind_class in prompt_elements.stored_kinds():
            counts.update(kind_class.summary_counts(self))
        counts["n_prompted_slices"] = len(self.slices())
        return counts


def _checked_extras(extras: Iterable[PromptElement]) -> tuple[PromptElement, ...]:
    extras = tuple(extras)
    for element in extras:
        if not isinstance(element, PromptElement) or element.kind in BUILT_IN_KINDS:
            raise ValueError(
                f"a prompt's extras are elements of registered kinds other than "
                f"{', '.join(BUILT_IN_KINDS)} (those have their own fields); got {element!r}"
            )
        prompt_elements.element_class(element.kind)  # registered
    return extras


def _first_off(shape: tuple[int, ...], voxels: Any) -> tuple[int, tuple[int, ...]] | None:
    """(index, (z, y, x)) of the first of ``voxels`` off the grid ``shape``, or None."""
    voxels = np.asarray(voxels, dtype=np.int64).reshape(-1, 3)
    upper = np.array([int(v) for v in shape])
    bad = np.flatnonzero(((voxels < 0) | (voxels >= upper)).any(axis=1))
    return None if not len(bad) else (int(bad[0]), tuple(voxels[bad[0]].tolist()))


def _bad_box(shape: tuple[int, ...], low: tuple[int, ...], high: tuple[int, ...]) -> bool:
    """Whether an inclusive box has a corner off the grid ``shape`` or is inverted."""
    return _first_off(shape, [low, high]) is not None or any(a > b for a, b in zip(low, high))


def _extra_keys(extras: tuple[PromptElement, ...]) -> list[tuple[str, int]]:
    """(kind, index among that kind's extras) of each extra, in order."""
    seen: dict[str, int] = {}
    keys = []
    for element in extras:
        keys.append((element.kind, seen.get(element.kind, 0)))
        seen[element.kind] = seen.get(element.kind, 0) + 1
    return keys


def _summed(pairs: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """(name, count) pairs with each name once, counts summed, names sorted."""
    totals: dict[str, int] = {}
    for name, count in pairs:
        totals[name] = totals.get(name, 0) + int(count)
    return tuple(sorted(totals.items()))


def concatenate_points(parts: Iterable[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Stack (points (N, 3), label) pairs into one points array and one labels array.

    Args:
        parts: (points, label) pairs: points (N, 3) voxel indices (z, y, x), whole numbers, and
            the label (1 positive, 0 negative) they all take.

    Returns:
        ``points`` (M, 3) int64 and ``labels`` (M,) int8, the parts in order; (0, 3) and (0,)
        for no parts.

    Raises:
        ValueError: A coordinate is a float that is not a whole number.
    """
    points, labels = [], []
    for array, label in parts:
        array = _as_points(array)
        points.append(array)
        labels.append(np.full(len(array), label, dtype=np.int8))
    if not points:
        return np.zeros((0, 3), dtype=np.int64), np.zeros((0,), dtype=np.int8)
    return np.concatenate(points), np.concatenate(labels)


@dataclass(eq=False)
class Prediction:
    """A model output: a boolean (z, y, x) mask plus model-specific feedback state.

    ``feedback`` is what the model wants back at the next refinement step (e.g. low-resolution
    logits per slice for 2D models, the 3D low-resolution logits and crop for 3D models).
    ``box``: the mask's bounding box when the model knows it (a :data:`intrabench.masks.Box`,
    None for an empty mask), e.g. it wrote the mask inside a crop; the mask is then made
    read-only and carries it (:func:`intrabench.masks.with_box`), so the engine never scans
    the volume to find it. Left out, the box is measured when first asked for.
    """

    mask: np.ndarray
    feedback: Any = None
    box: InitVar[Any] = UNKNOWN

    def __post_init__(self, box: Any) -> None:
        if box is not UNKNOWN:
            self.mask = with_box(self.mask, box)

    @property
    def bounding_box(self) -> Box | None:
        """The mask's bounding box (half-open slices; None: empty), carried or measured."""
        return bounding_box(self.mask)


@dataclass(frozen=True)
class Target:
    """One thing to segment in a case: an instance (e.g. one lesion) or an organ class.

    Attributes:
        target_id: Its identifier within the case.
        label_value: Its value in the case's label map (the target map the dataset builds:
            1, 2, ... in order, classes in ascending file value).
        class_name: The class it belongs to; targets are grouped by it for aggregation (a
            dataset's score is the mean over its classes).
        kind: ``instance`` (one lesion, one component) or ``organ`` (a whole class).
        file_value: The value of its voxels in the label *file* (its class's value, or its
            instance id when the file stores instance ids); None when it is ``label_value``.
    """

    target_id: str
    label_value: int
    class_name: str
    kind: Literal["instance", "organ"] = "instance"
    file_value: int | None = None

    @property
    def value_in_file(self) -> int:
        """The value of the target's voxels in the label file."""
        return int(self.label_value if self.file_value is None else self.file_value)


@dataclass(eq=False)
class Case:
    """One image with its label map and its targets.

    Attributes:
        dataset: The dataset's name.
        case_id: The case's identifier.
        image: The image, canonical (z, y, x), spacing in mm.
        label: The target map, integer (z, y, x) on the image's grid (0 background, each
            target's ``label_value``).
        targets: The targets to segment.
        attributes: Each target's attributes by target id (see :mod:`intrabench.attributes`),
            once the engine has measured them; None before.
    """

    dataset: str
    case_id: str
    image: Volume
    label: np.ndarray
    targets: tuple[Target, ...]
    attributes: dict[str, dict[str, Any]] | None = None

    def target_box(self, target: Target) -> tuple[slice, ...] | None:
        """Bounding box (slices, (z, y, x)) of ``target`` in the label map, None if absent.

        The boxes of all label values are found in one pass over the label map, at the first
        call, and kept with the case.

        Args:
            target: One of the case's targets; its ``label_value`` is looked up in ``label``.

        Returns:
            Three half-open slices (z, y, x) (:data:`intrabench.masks.Box`), or None when no voxel
            of the map has the target's value.
        """
        boxes = self.__dict__.get("_label_boxes")
        if boxes is None:
            from scipy import ndimage

            label = np.asarray(self.label)
            found = (
                ndimage.find_objects(label)  # values <= 0 are ignored
                if np.issubdtype(label.dtype, np.integer) and label.size
                else None
            )
            boxes = self.__dict__["_label_boxes"] = found
        if boxes is None:  # e.g. a float label map: the slow way
            return bounding_box(self.label == target.label_value)
        value = int(target.label_value)
        return boxes[value - 1] if 0 < value <= len(boxes) else None

    def set_label_boxes(self, boxes: list[tuple[slice, ...] | None]) -> None:
        """Give the exact bounding boxes of label values 1..len(boxes) (None for an absent
        value), as ``scipy.ndimage.find_objects`` would find them; for code that built the
        label map and knows them, so that :meth:`target_box` does not search the map.

        Args:
            boxes: Entry ``v - 1`` is the half-open (z, y, x) slices of label value ``v``, or None
                when no voxel has it. Not checked against the map: a wrong box gives a wrong mask.
        """
        self.__dict__["_label_boxes"] = list(boxes)

    def target_mask(self, target: Target) -> np.ndarray:
        """Boolean (z, y, x) mask of ``target``; reads only the target's bounding box.

        Args:
            target: One of the case's targets.

        Returns:
            A new bool array of the label map's shape: True where the map holds the target's
            ``label_value``; all False when the target is absent.
        """
        mask = np.zeros(np.shape(self.label), dtype=bool)
        box = self.target_box(target)
        if box is not None:
            mask[box] = self.label[box] == target.label_value
        return mask


def prompt_until(prompt_jsons: list[str], keep_previous: bool) -> Prompt:
    """The prompt the model saw at the last of these steps (``prompt_json`` of steps 0..k):
    all of them merged, or only the last when the run did not keep previous prompts.

    Args:
        prompt_jsons: The ``prompt_json`` of steps 0..k of one episode, in step order; empty
            strings (steps without a prompt) are skipped.
        keep_previous: Whether the run kept previous prompts (``keep_previous_prompts``):
            True merges all steps (:meth:`Prompt.merged_with`), False takes the last.

    Returns:
        That prompt's geometry (no interactions); an empty prompt when no step has one.
    """
    prompts = [Prompt.from_json(text) for text in prompt_jsons if text]
    if not prompts:
        return Prompt()
    if not keep_previous:
        return prompts[-1]
    merged = prompts[0]
    for later in prompts[1:]:
        merged = merged.merged_with(later)
    return merged
