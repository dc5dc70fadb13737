"""The data model shared by datasets, prompters, models and the engine.

Array conventions: every mask is a boolean numpy array indexed (z, y, x) in the canonical
orientation of :mod:`intrabench.io.volume`; every prompt coordinate is an integer voxel index
(z, y, x) in that same space. The prompt boxes (:class:`Box2D`, :class:`Box3D`) are inclusive on
both ends, as a user draws them; a mask's bounding box is a :data:`intrabench.masks.Box`
(half-open slices); ``from_box`` and ``to_box`` convert.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass, field, replace
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
    """``count`` interactions of one kind."""
    return tuple(Interaction(kind) for _ in range(int(count)))


@dataclass(frozen=True)
class Box2D:
    """An axis-aligned box on one axial slice: inclusive (y_min, x_min, y_max, x_max)."""

    y_min: int
    x_min: int
    y_max: int
    x_max: int

    def as_tuple(self) -> tuple[int, int, int, int]:
        """``(y_min, x_min, y_max, x_max)``, inclusive voxel indices."""
        return (self.y_min, self.x_min, self.y_max, self.x_max)

    @classmethod
    def from_box(cls, box: Box) -> Box2D:
        """The prompt box of a (y, x) :data:`intrabench.masks.Box` (half-open slices)."""
        (y_min, x_min), (y_max, x_max) = inclusive_corners(box)
        return cls(int(y_min), int(x_min), int(y_max), int(x_max))

    def to_box(self) -> Box:
        """This box as (y, x) half-open slices (:data:`intrabench.masks.Box`)."""
        return box_from_inclusive((self.y_min, self.x_min), (self.y_max, self.x_max))


@dataclass(frozen=True)
class Point(PromptElement):
    """A click at voxel ``zyx`` (z, y, x); ``label`` 1 = positive, 0 = negative."""

    kind: ClassVar[str] = "point"
    interaction: ClassVar[str] = "click"
    cost: ClassVar[int] = 1
    seconds: ClassVar[float] = 2.4
    zyx: tuple[int, int, int]
    label: int = 1

    def slices(self) -> set[int]:
        """The axial slices it lies on: the click's slice z."""
        return {int(self.zyx[0])}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a click mark at its voxel with its label (canonical voxel
        coordinates).
        """
        return [Click(tuple(int(v) for v in self.zyx), int(self.label))]  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"zyx": [z, y, x], "label": 0 or 1}``."""
        return {"zyx": [int(v) for v in self.zyx], "label": int(self.label)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Point:
        """The Point written by :meth:`to_json`."""
        return cls(tuple(int(v) for v in data["zyx"]), int(data["label"]))  # type: ignore[arg-type]


@dataclass(frozen=True)
class SliceBox(PromptElement):
    """A 2D ``box`` (:class:`Box2D`, inclusive) drawn on axial slice ``z``."""

    kind: ClassVar[str] = "box2d"
    interaction: ClassVar[str] = "box2d"
    cost: ClassVar[int] = 2
    seconds: ClassVar[float] = 7.0
    z: int
    box: Box2D

    def slices(self) -> set[int]:
        """The axial slices it lies on: its slice z."""
        return {int(self.z)}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a box mark from its (z, y_min, x_min) to (z, y_max, x_max) corner
        (canonical voxel coordinates).
        """
        b = self.box
        return [BoxMark((int(self.z), b.y_min, b.x_min), (int(self.z), b.y_max, b.x_max))]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"z": z, "box": [y_min, x_min, y_max, x_max]}``."""
        return {"z": int(self.z), "box": list(self.box.as_tuple())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SliceBox:
        """The SliceBox written by :meth:`to_json`."""
        return cls(int(data["z"]), Box2D(*(int(v) for v in data["box"])))


@dataclass(frozen=True)
class Box3D(PromptElement):
    """An axis-aligned 3D box: inclusive (z_min, y_min, x_min) to (z_max, y_max, x_max)."""

    kind: ClassVar[str] = "box3d"
    interaction: ClassVar[str] = "box3d"
    cost: ClassVar[int] = 3
    seconds: ClassVar[float] = 13.0

    z_min: int
    y_min: int
    x_min: int
    z_max: int
    y_max: int
    x_max: int

    def slice_box(self) -> Box2D:
        """The box's in-plane extent as a :class:`Box2D` (inclusive)."""
        return Box2D(self.y_min, self.x_min, self.y_max, self.x_max)

    def as_tuple(self) -> tuple[int, int, int, int, int, int]:
        """``(z_min, y_min, x_min, z_max, y_max, x_max)``, inclusive voxel indices."""
        return (self.z_min, self.y_min, self.x_min, self.z_max, self.y_max, self.x_max)

    @classmethod
    def from_box(cls, box: Box) -> Box3D:
        """The prompt box of a (z, y, x) :data:`intrabench.masks.Box` (half-open slices)."""
        low, high = inclusive_corners(box)
        return cls(*(int(v) for v in low), *(int(v) for v in high))

    def to_box(self) -> Box:
        """This box as (z, y, x) half-open slices (:data:`intrabench.masks.Box`)."""
        return box_from_inclusive(self.as_tuple()[:3], self.as_tuple()[3:])

    def slices(self) -> set[int]:
        """The axial slices it lies on: every slice of its inclusive z-range."""
        return set(range(self.z_min, self.z_max + 1))

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a box mark between its inclusive corners (canonical voxel
        coordinates).
        """
        t = self.as_tuple()
        return [BoxMark(t[:3], t[3:], volume=True)]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"box": [z_min, y_min, x_min, z_max, y_max,
        x_max]}``.
        """
        return {"box": list(self.as_tuple())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Box3D:
        """The Box3D written by :meth:`to_json`."""
        return cls(*(int(v) for v in data["box"]))


@dataclass(frozen=True, eq=False)
class Scribble(PromptElement):
    """An ordered polyline of voxels (M, 3) in (z, y, x), all positive (1) or negative (0)."""

    kind: ClassVar[str] = "scribble"
    interaction: ClassVar[str] = "scribble"
    cost: ClassVar[int] = 3
    seconds: ClassVar[float] = 10.9
    points: np.ndarray
    label: int

    def slices(self) -> set[int]:
        """The axial slices it lies on: the slices its voxels lie on."""
        return {int(z) for z in np.asarray(self.points).reshape(-1, 3)[:, 0]}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a stroke mark along its voxels with its label (canonical voxel
        coordinates).
        """
        return [Stroke(np.asarray(self.points, dtype=np.int64).reshape(-1, 3), int(self.label))]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"label": 0 or 1, "points": [[z, y, x], ...]}``."""
        return {"label": int(self.label), "points": np.asarray(self.points).reshape(-1, 3).tolist()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scribble:
        """The Scribble written by :meth:`to_json`."""
        return cls(np.asarray(data["points"], dtype=np.int64).reshape(-1, 3), int(data["label"]))


@dataclass(frozen=True, eq=False)
class Lasso(PromptElement):
    """A closed freehand contour drawn on axial slice ``z``: ``contour`` (K, 2) int (y, x)
    vertices in drawing order, the last joined back to the first; ``label`` 1 = the enclosed
    region is the target's, 0 = it is not (nnInteractive's lasso)."""

    kind: ClassVar[str] = "lasso"
    interaction: ClassVar[str] = "lasso"
    cost: ClassVar[int] = 3  # one freehand stroke, as a scribble
    seconds: ClassVar[float] = 10.9
    z: int
    contour: np.ndarray
    label: int = 1

    def slices(self) -> set[int]:
        """The axial slices it lies on: its slice z."""
        return {int(self.z)}

    def marks(self) -> list[prompt_elements.Mark]:
        """How it is drawn: a closed stroke mark along its contour on its slice, with its label
        (canonical voxel coordinates).
        """
        contour = np.asarray(self.contour, dtype=np.int64).reshape(-1, 2)
        voxels = np.column_stack([np.full(len(contour), int(self.z)), contour])
        return [Stroke(voxels, int(self.label), closed=True)]

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (without its kind): ``{"z": z, "label": 0 or 1, "contour": [[y, x],
        ...]}``.
        """
        contour = np.asarray(self.contour).reshape(-1, 2).tolist()
        return {"z": int(self.z), "label": int(self.label), "contour": contour}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lasso:
        """The Lasso written by :meth:`to_json`."""
        contour = np.asarray(data["contour"], dtype=np.int64).reshape(-1, 2)
        return cls(int(data["z"]), contour, int(data["label"]))

    def region(self, shape_yx: tuple[int, int]) -> np.ndarray:
        """Boolean (Y, X) mask of the slice: the pixels inside the contour or on it."""
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

#: the element kinds a :class:`Prompt` stores in their own fields (the accessors models read);
#: any other registered kind is kept in ``Prompt.extras``
BUILT_IN_KINDS = ("point", "box2d", "box3d", "scribble", "lasso")


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
        """Hashable identity of the prompt content (for caching model outputs)."""
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
        points = _as_points(self.points)
        object.__setattr__(self, "points", points)
        object.__setattr__(self, "point_labels", _as_labels(self.point_labels, len(points)))
        object.__setattr__(self, "boxes", {int(z): b for z, b in sorted(self.boxes.items())})
        object.__setattr__(self, "scribbles", tuple(self.scribbles))
        object.__setattr__(self, "interactions", tuple(self.interactions))
        object.__setattr__(self, "lassos", tuple(self.lassos))
        object.__setattr__(self, "extras", _checked_extras(self.extras))
        order = tuple((str(kind), int(key)) for kind, key in self.order)
        if order and sorted(order) != sorted(self._default_order()):
            raise ValueError(f"prompt order {order} does not list each element once")
        object.__setattr__(self, "order", order)

    def outside(self, shape: tuple[int, ...]) -> str | None:
        """The first element of the prompt that is not on the (z, y, x) grid ``shape``
        (a point, a box corner, a scribble voxel or a lasso's slice), described, or None
        when all are on it. A negative index would count from the grid's far end in numpy."""
        upper = np.array([int(v) for v in shape])

        def first_off(voxels: Any) -> tuple[int, tuple[int, ...]] | None:
            voxels = np.asarray(voxels, dtype=np.int64).reshape(-1, 3)
            bad = np.flatnonzero(((voxels < 0) | (voxels >= upper)).any(axis=1))
            return None if not len(bad) else (int(bad[0]), tuple(voxels[bad[0]].tolist()))

        def bad_box(low: tuple[int, ...], high: tuple[int, ...]) -> bool:
            return first_off([low, high]) is not None or any(a > b for a, b in zip(low, high))

        if (found := first_off(self.points)) is not None:
            return f"point {found[0]} at {found[1]}"
        for z, box in self.boxes.items():
            if bad_box((z, box.y_min, box.x_min), (z, box.y_max, box.x_max)):
                return f"the box on slice {z} ({box.as_tuple()})"
        if self.box3d is not None and bad_box(self.box3d.as_tuple()[:3], self.box3d.as_tuple()[3:]):
            return f"the 3D box {self.box3d.as_tuple()}"
        for index, scribble in enumerate(self.scribbles):
            if (found := first_off(scribble.points)) is not None:
                return f"scribble {index}'s voxel {found[1]}"
        for index, lasso in enumerate(self.lassos):
            if not 0 <= int(lasso.z) < upper[0]:
                return f"lasso {index} on slice {lasso.z}"
        for element in self.extras:
            if (where := element.outside(tuple(int(v) for v in shape))) is not None:
                return f"{element.kind} {where}"
        return None

    # -- the user's order ---------------------------------------------------------------
    def _default_order(self) -> tuple[tuple[str, int], ...]:
        return (
            tuple(("point", i) for i in range(len(self.points)))
            + tuple(("box2d", z) for z in self.boxes)
            + ((("box3d", 0),) if self.box3d is not None else ())
            + tuple(("scribble", i) for i in range(len(self.scribbles)))
            + tuple(("lasso", i) for i in range(len(self.lassos)))
            + tuple(_extra_keys(self.extras))
        )

    def element_order(self) -> tuple[tuple[str, int], ...]:
        """(kind, key) of every element in the user's order; without an explicit ``order``:
        points, 2D boxes by slice, the 3D box, scribbles, lassos."""
        return self.order or self._default_order()

    def elements(self) -> list[tuple[str, Any]]:
        """The elements in the user's order: ('point', ((z, y, x), label)), ('box2d', (z,
        Box2D)), ('box3d', Box3D), ('scribble', Scribble), ('lasso', Lasso)."""
        out: list[tuple[str, Any]] = []
        for kind, key in self.element_order():
            if kind == "point":
                out.append(
                    (kind, (tuple(int(v) for v in self.points[key]), int(self.point_labels[key])))
                )
            elif kind == "box2d":
                out.append((kind, (key, self.boxes[key])))
            elif kind == "box3d":
                out.append((kind, self.box3d))
            elif kind == "scribble":
                out.append((kind, self.scribbles[key]))
            elif kind == "lasso":
                out.append((kind, self.lassos[key]))
            else:
                out.append((kind, self.elements_of(kind)[key]))
        return out

    def typed_elements(self) -> list[PromptElement]:
        """The elements in the user's order, as :class:`~intrabench.prompt_elements.PromptElement`
        objects (:class:`Point`, :class:`SliceBox`, :class:`Box3D`, :class:`Scribble`,
        :class:`Lasso` and the extras)."""
        out: list[PromptElement] = []
        for kind, value in self.elements():
            if kind == "point":
                out.append(Point(value[0], value[1]))
            elif kind == "box2d":
                out.append(SliceBox(*value))
            else:
                out.append(value)
        return out

    def marks(self) -> list[prompt_elements.Mark]:
        """How the prompt is drawn: its elements' marks (:mod:`intrabench.prompt_elements`) in
        the default order (points, 2D boxes by slice, the 3D box, scribbles, lassos, extras),
        whatever the user's order."""
        return prompt_elements.marks_of(replace(self, order=()).typed_elements())

    def elements_of(self, kind: str) -> tuple[PromptElement, ...]:
        """The extras of ``kind`` (a registered kind other than the built-in five), in order."""
        return tuple(e for e in self.extras if e.kind == kind)

    # -- what the prompt contains -------------------------------------------------------
    @property
    def kinds(self) -> frozenset[str]:
        """The prompt kinds present (``point``, ``box2d``, ``box3d``, ``scribble``, ``lasso``), to
        match against a model's ``accepts``."""
        kinds = set()
        if len(self.points):
            kinds.add("point")
        if self.boxes:
            kinds.add("box2d")
        if self.box3d is not None:
            kinds.add("box3d")
        if self.scribbles:
            kinds.add("scribble")
        if self.lassos:
            kinds.add("lasso")
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
        """All points a point-only model should receive: clicks plus scribble voxels."""
        if not self.scribbles:
            return self.points, self.point_labels
        points = [self.points] + [s.points.reshape(-1, 3) for s in self.scribbles]
        labels = [self.point_labels] + [
            np.full(len(s.points), s.label, dtype=np.int8) for s in self.scribbles
        ]
        return np.concatenate(points).astype(np.int64), np.concatenate(labels).astype(np.int8)

    def slices(self) -> list[int]:
        """Axial slices that carry any prompt (points, scribbles, 2D boxes, lassos, 3D box)."""
        points, _ = self.model_points()
        zs = set(int(z) for z in points[:, 0]) | set(self.boxes)
        zs |= {int(lasso.z) for lasso in self.lassos}
        if self.box3d is not None:
            zs |= set(range(self.box3d.z_min, self.box3d.z_max + 1))
        for element in self.extras:
            zs |= element.slices()
        return sorted(zs)

    def on_slice(self, z: int) -> SlicePrompt:
        """The 2D prompt on axial slice ``z``; a 3D box contributes its xy box on its z-range."""
        points, labels = self.model_points()
        on = points[:, 0] == z
        box = self.boxes.get(z)
        if box is None and self.box3d is not None and self.box3d.z_min <= z <= self.box3d.z_max:
            box = self.box3d.slice_box()
        extras = tuple(e for e in self.extras if z in e.slices())
        return SlicePrompt(z=z, points=points[on][:, 1:], labels=labels[on], box=box, extras=extras)

    # -- combining ----------------------------------------------------------------------
    def merged_with(self, other: Prompt) -> Prompt:
        """This prompt plus ``other`` (other's boxes win on shared slices), in the user's order:
        this prompt's elements, then ``other``'s (a box that ``other`` replaces leaves its old
        place)."""
        boxes = dict(self.boxes)
        boxes.update(other.boxes)
        shift = {
            "point": len(self.points),
            "scribble": len(self.scribbles),
            "lasso": len(self.lassos),
            **{kind: len(self.elements_of(kind)) for kind in {e.kind for e in self.extras}},
        }
        replaced = {("box2d", z) for z in other.boxes}
        if other.box3d is not None:
            replaced.add(("box3d", 0))
        order = tuple(element for element in self.element_order() if element not in replaced)
        order += tuple((kind, key + shift.get(kind, 0)) for kind, key in other.element_order())
        return Prompt(
            points=np.concatenate([self.points, other.points]),
            point_labels=np.concatenate([self.point_labels, other.point_labels]),
            boxes=boxes,
            box3d=other.box3d if other.box3d is not None else self.box3d,
            scribbles=self.scribbles + other.scribbles,
            interactions=self.interactions + other.interactions,
            effort_label=other.effort_label or self.effort_label,
            lassos=self.lassos + other.lassos,
            order=order,
            click_maps=_summed(self.click_maps + other.click_maps),
            extras=self.extras + other.extras,
        )

    def to_json(self) -> str:
        """The prompt's geometry as compact JSON (voxel indices (z, y, x), boxes inclusive):
        ``{"points": [[z, y, x], ...], "labels": [1, 0, ...], "boxes": {"z": [y0, x0, y1, x1]},
        "box3d": [z0, y0, x0, z1, y1, x1] | null, "scribbles": [{"label": 1, "points": [...]}]}``,
        plus ``"lassos": [{"z": z, "label": 1, "contour": [[y, x], ...]}]`` when there are any,
        and ``"elements": [{"kind": k, ...}]`` (each extra's :meth:`to_json`) when there are any.
        Interactions and the effort label are not part of it (rows carry them)."""
        import json

        data = {
            "points": self.points.tolist(),
            "labels": self.point_labels.tolist(),
            "boxes": {str(z): list(b.as_tuple()) for z, b in self.boxes.items()},
            "box3d": list(self.box3d.as_tuple()) if self.box3d is not None else None,
            "scribbles": [
                {"label": int(s.label), "points": np.asarray(s.points).reshape(-1, 3).tolist()}
                for s in self.scribbles
            ],
        }
        if self.lassos:
            data["lassos"] = [
                {
                    "z": int(lasso.z),
                    "label": int(lasso.label),
                    "contour": np.asarray(lasso.contour).reshape(-1, 2).tolist(),
                }
                for lasso in self.lassos
            ]
        if self.extras:
            data["elements"] = [{"kind": e.kind, **e.to_json()} for e in self.extras]
        if self.order and self.order != self._default_order():
            data["order"] = [[kind, key] for kind, key in self.order]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Prompt:
        """The prompt geometry written by :meth:`to_json` (no interactions)."""
        import json

        data = json.loads(text)
        return cls(
            points=data["points"],
            point_labels=data["labels"],
            boxes={int(z): Box2D(*b) for z, b in data["boxes"].items()},
            box3d=Box3D(*data["box3d"]) if data["box3d"] is not None else None,
            scribbles=tuple(
                Scribble(np.asarray(s["points"], dtype=np.int64).reshape(-1, 3), int(s["label"]))
                for s in data["scribbles"]
            ),
            lassos=tuple(
                Lasso(
                    int(lasso["z"]),
                    np.asarray(lasso["contour"], dtype=np.int64).reshape(-1, 2),
                    int(lasso["label"]),
                )
                for lasso in data.get("lassos", [])
            ),
            order=tuple((kind, int(key)) for kind, key in data.get("order", [])),
            extras=tuple(
                prompt_elements.element_class(e["kind"]).from_json(e)
                for e in data.get("elements", [])
            ),
        )

    def summary(self) -> dict[str, Any]:
        """A small JSON-able description for results rows."""
        return {
            "n_points": int(len(self.points)),
            "n_positive": int((self.point_labels == 1).sum()),
            "n_negative": int((self.point_labels == 0).sum()),
            "n_boxes2d": len(self.boxes),
            "has_box3d": self.box3d is not None,
            "n_scribbles": len(self.scribbles),
            "n_lassos": len(self.lassos),
            "n_prompted_slices": len(self.slices()),
        }


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
    """Stack (points (N, 3), label) pairs into one points array and one labels array."""
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
        call, and kept with the case."""
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
        label map and knows them, so that :meth:`target_box` does not search the map."""
        self.__dict__["_label_boxes"] = list(boxes)

    def target_mask(self, target: Target) -> np.ndarray:
        """Boolean (z, y, x) mask of ``target``; reads only the target's bounding box."""
        mask = np.zeros(np.shape(self.label), dtype=bool)
        box = self.target_box(target)
        if box is not None:
            mask[box] = self.label[box] == target.label_value
        return mask


def prompt_until(prompt_jsons: list[str], keep_previous: bool) -> Prompt:
    """The prompt the model saw at the last of these steps (``prompt_json`` of steps 0..k):
    all of them merged, or only the last when the run did not keep previous prompts."""
    prompts = [Prompt.from_json(text) for text in prompt_jsons if text]
    if not prompts:
        return Prompt()
    if not keep_previous:
        return prompts[-1]
    merged = prompts[0]
    for later in prompts[1:]:
        merged = merged.merged_with(later)
    return merged
