"""The kinds of things a prompt is made of, registered by kind.

A prompt (:class:`intrabench.types.Prompt`) is an ordered list of typed elements: a point, a 2D
box, a 3D box, a scribble, a lasso, or any kind registered here. Each element class declares
its ``kind`` (the name models list in ``accepts``), the ``interaction`` it costs the user (the
effort table's name), that interaction's ``cost`` (paper section 2.3) and its human
``seconds`` (the time model's default, :mod:`intrabench.timing.human`), and implements:

* :meth:`PromptElement.slices`: the axial slices it lies on;
* :meth:`PromptElement.to_json` / :meth:`PromptElement.from_json`: its JSON form;
* :meth:`PromptElement.marks`: how it is drawn, as :class:`Click`, :class:`BoxMark` and
  :class:`Stroke` marks in canonical voxel coordinates, which the failure gallery and the
  review page draw (neither knows the kinds);
* :meth:`PromptElement.outside`: whether it lies off the image grid.

Array conventions: coordinates are integer voxel indices (z, y, x); boxes are inclusive on both
ends; labels 1 = positive, 0 = negative.

The built-in kinds are registered by :mod:`intrabench.types` (their classes live there, beside
``Prompt``), so the tables here are complete once it is imported.

``Prompt`` itself names no kind: every method of it (its order, elements, slices, model points,
slice prompts, merging, off-grid check, JSON and summary) asks each registered class. The
built-in classes keep their elements in the prompt fields that users and adapters read
(``points``, ``boxes``, ``box3d``, ``scribbles``, ``lassos``: their ``field``) and override the
class methods of :class:`PromptElement` to read them; an added kind's elements are kept in
``Prompt.extras``, where the defaults find them.

A new kind is one class decorated with :func:`register_element` (plus the models that take it:
they list the kind in ``accepts`` and read ``prompt.elements_of(kind)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

#: Human effort of one interaction by kind (paper section 2.3), in registration order.
INTERACTION_COST: dict[str, int] = {}
#: Default seconds a clinician takes per interaction kind (sources: timing/human.py).
HUMAN_SECONDS: dict[str, float] = {}
#: Element class by element kind, in registration order.
ELEMENT_KINDS: dict[str, type[PromptElement]] = {}


@dataclass(frozen=True)
class Click:
    """A click mark at voxel ``zyx`` with its ``label``."""

    zyx: tuple[int, int, int]
    label: int


@dataclass(frozen=True)
class BoxMark:
    """A box mark, inclusive corners ``low``..``high`` (z, y, x); ``volume``: a 3D box (drawn
    on every slice it spans), else a box drawn on one axial slice (``low[0] == high[0]``)."""

    low: tuple[int, int, int]
    high: tuple[int, int, int]
    volume: bool = False


@dataclass(frozen=True, eq=False)
class Stroke:
    """A stroke mark: ``voxels`` (K, 3) int (z, y, x) in drawing order with its ``label``;
    ``closed``: a loop on one axial slice (drawn as a line back to its start), else a freehand
    polyline (drawn as dots where its voxels lie)."""

    voxels: np.ndarray
    label: int
    closed: bool = False


Mark = Click | BoxMark | Stroke


class PromptElement:
    """One element of a prompt. Subclasses set the class attributes and implement the
    methods; see the module's docstring.

    The methods on one element (:meth:`slices`, :meth:`marks`, :meth:`to_json`...) are what an
    added kind implements. The class methods say how a kind's elements sit in a
    :class:`~intrabench.types.Prompt` (its field, its JSON sections, its points for point-only
    models, its box on a slice, its summary counts); their defaults are those of an added kind,
    kept in ``Prompt.extras`` in the order given, and the built-in kinds override them to read
    their own fields. ``Prompt`` itself names no kind: it asks each registered class.
    """

    kind: ClassVar[str]
    interaction: ClassVar[str]
    cost: ClassVar[int]
    seconds: ClassVar[float]
    #: the ``Prompt`` keyword that stores this kind's elements (each built-in kind has its own),
    #: or None: they are kept in ``Prompt.extras``
    field: ClassVar[str | None] = None
    #: whether a later prompt's element with the same :meth:`order_key` replaces this one when
    #: prompts merge (one 2D box per slice, one 3D box) instead of being added after it
    replaced_by_key: ClassVar[bool] = False

    # -- one element ----------------------------------------------------------------------
    def slices(self) -> set[int]:
        """Axial slice indices z the element lies on.

        Returns:
            The z indices (voxels) of the slices it touches.
        """
        raise NotImplementedError

    def visited_slices(self) -> set[int]:
        """The axial slices the user scrolls to in order to give it (its :meth:`slices`).

        Returns:
            The z indices of those slices; by default the same as :meth:`slices`.
        """
        return self.slices()

    def marks(self) -> list[Mark]:
        """How the element is drawn (canonical voxel coordinates).

        Returns:
            Its :class:`Click`, :class:`BoxMark` and :class:`Stroke` marks, in drawing order.
        """
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The element as a JSON-able dict (without its kind).

        Returns:
            A dict of plain lists, numbers and strings that :meth:`from_json` reads back.
        """
        raise NotImplementedError

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PromptElement:
        """The element written by :meth:`to_json`.

        Args:
            data: The dict :meth:`to_json` returned (without the kind).

        Returns:
            An element equal to the one written.
        """
        raise NotImplementedError

    def outside(self, shape: tuple[int, ...]) -> str | None:
        """A description of the part of the element off the (z, y, x) grid ``shape``, or None.

        Args:
            shape: The image grid's size in voxels, (z, y, x).

        Returns:
            Where it leaves the grid (``"on slice 40"``; :meth:`describe_outside` adds the
            kind), or None when the element lies wholly on the grid (the default).
        """
        return None

    def describe_outside(self, shape: tuple[int, ...], key: int) -> str | None:
        """The element's :meth:`outside` named with its kind (``"circle on slice 40"``), or None.

        Args:
            shape: The (z, y, x) grid.
            key: Its :meth:`order_key` in the prompt.

        Returns:
            The description of its part off the grid, or None when it is all on it.
        """
        where = self.outside(shape)
        return None if where is None else f"{self.kind} {where}"

    def order_key(self, index: int) -> int:
        """Its key in a prompt's ``order``: its ``index`` among the prompt's elements of its kind
        (a kind replaced by key has a key of its own, e.g. a 2D box's slice).

        Args:
            index: Its 0-based position among the prompt's elements of its kind.

        Returns:
            The key; by default ``index``.
        """
        return index

    def value(self) -> Any:
        """What :meth:`intrabench.types.Prompt.elements` pairs with its kind.

        Returns:
            The element itself by default (a built-in kind may return a plainer form, such as a
            click's ``((z, y, x), label)``).
        """
        return self

    # -- the kind's elements in a prompt ----------------------------------------------------
    @classmethod
    def stored(cls, prompt: Any) -> tuple[PromptElement, ...]:
        """The kind's elements in ``prompt``, in the order its field keeps them.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            The elements of this kind; by default those in ``prompt.extras``.
        """
        return tuple(element for element in prompt.extras if element.kind == cls.kind)

    @classmethod
    def count(cls, prompt: Any) -> int:
        """How many elements of the kind ``prompt`` has.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            The number of this kind's elements in it (0 when it has none).
        """
        return len(cls.stored(prompt))

    @classmethod
    def keys(cls, prompt: Any) -> list[int]:
        """The :meth:`order_key` of each of the kind's elements in ``prompt``, in field order.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            One key per element of the kind, in the order :meth:`stored` gives them.
        """
        return [element.order_key(index) for index, element in enumerate(cls.stored(prompt))]

    @classmethod
    def merged(cls, first: Any, second: Any) -> dict[str, Any]:
        """The ``Prompt`` keywords that store ``first``'s elements of the kind, then
        ``second``'s; for a kind replaced by key, an element of ``second`` replaces the one of
        ``first`` with the same key.

        Args:
            first: The earlier :class:`~intrabench.types.Prompt`.
            second: The later :class:`~intrabench.types.Prompt`, merged after ``first``.

        Returns:
            The keywords of :meth:`fields` for the merged elements ({} for an added kind, whose
            elements the prompt merges in ``extras``).
        """
        mine, theirs = cls.stored(first), cls.stored(second)
        if cls.replaced_by_key:
            keys = set(cls.keys(second))
            mine = tuple(e for i, e in enumerate(mine) if e.order_key(i) not in keys)
        return cls.fields(mine + theirs)

    @classmethod
    def fields(cls, elements: tuple[PromptElement, ...]) -> dict[str, Any]:
        """The ``Prompt`` keywords that store ``elements`` (the kind's, in field order).

        Args:
            elements: Elements of this kind, in field order.

        Returns:
            Keyword -> value for ``Prompt(...)`` (e.g. ``points`` and ``point_labels``); {} for
            an added kind, whose elements go to ``extras``, which the prompt keeps for all added
            kinds together.
        """
        return {}

    @classmethod
    def normalised(cls, prompt: Any) -> dict[str, Any]:
        """The kind's ``Prompt`` fields in their stored form (arrays, tuples).

        Args:
            prompt: A :class:`~intrabench.types.Prompt` as built (fields maybe lists).

        Returns:
            Field name -> normalised value; {} for an added kind.
        """
        return {}

    @classmethod
    def slices_in(cls, prompt: Any) -> set[int]:
        """The axial slices the kind's elements in ``prompt`` lie on.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            The union of the elements' :meth:`slices` (z indices).
        """
        return {int(z) for element in cls.stored(prompt) for z in element.slices()}

    @classmethod
    def visited_in(cls, prompt: Any) -> set[int]:
        """The axial slices the user scrolls to for the kind's elements in ``prompt``.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            The union of the elements' :meth:`visited_slices` (z indices).
        """
        return {int(z) for element in cls.stored(prompt) for z in element.visited_slices()}

    @classmethod
    def points_in(cls, prompt: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """What a point-only model receives of the kind.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            ``(points, labels)``: points (N, 3) int64 voxel indices (z, y, x) and labels (N,)
            int8 (1 positive, 0 negative); None when the kind does not become points (the
            default).
        """
        return None

    @classmethod
    def box_on_slice(cls, prompt: Any, z: int) -> Any:
        """The ``Box2D`` the kind gives a 2D model on axial slice ``z``.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.
            z: The axial slice index (voxels).

        Returns:
            The :class:`~intrabench.types.Box2D` on that slice, or None (the default: an added
            kind reaches a 2D model as the slice prompt's extras).
        """
        return None

    @classmethod
    def json_sections(cls, prompt: Any) -> dict[str, Any]:
        """The kind's sections of the prompt's JSON.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            Section name -> JSON-able value; {} for an added kind (its elements are in the
            ``elements`` section).
        """
        return {}

    @classmethod
    def from_json_sections(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The ``Prompt`` keywords read back from the kind's :meth:`json_sections`.

        Args:
            data: The prompt's whole JSON dict.

        Returns:
            Keyword -> value for ``Prompt(...)``; {} for an added kind.
        """
        return {}

    @classmethod
    def summary_counts(cls, prompt: Any) -> dict[str, Any]:
        """The kind's counts in a results row's prompt summary.

        Args:
            prompt: A :class:`~intrabench.types.Prompt`.

        Returns:
            Column name -> count (e.g. ``n_points``); {} for an added kind.
        """
        return {}


def register_interaction(name: str, cost: int, seconds: float) -> None:
    """Declare an interaction kind with its effort ``cost`` and default human ``seconds``
    (one not tied to a prompt element, as choosing a boundary slice).

    Args:
        name: The interaction's name in the effort table (``INTERACTION_COST``).
        cost: The effort of one interaction (paper section 2.3), an integer >= 0.
        seconds: The default time a clinician takes for one, in seconds (>= 0); a value
            already in ``HUMAN_SECONDS`` is kept.

    Raises:
        ValueError: When ``cost`` or ``seconds`` is negative, or ``name`` is registered with
            another cost.
    """
    if int(cost) < 0 or float(seconds) < 0:
        raise ValueError(f"interaction '{name}': cost and seconds must be >= 0")
    known = INTERACTION_COST.get(name)
    if known is not None and known != int(cost):
        raise ValueError(f"interaction '{name}' is registered with cost {known}, not {cost}")
    INTERACTION_COST[name] = int(cost)
    HUMAN_SECONDS.setdefault(name, float(seconds))


def register_element(cls: type[PromptElement]) -> type[PromptElement]:
    """Class decorator: register a :class:`PromptElement` subclass under its ``kind``.

    Args:
        cls: The subclass; it must set ``kind``, ``interaction``, ``cost`` and ``seconds``.

    Returns:
        ``cls`` itself, now in ``ELEMENT_KINDS`` (and its interaction registered).

    Raises:
        TypeError: When a class attribute is missing.
        ValueError: When another class is registered under the same kind.
    """
    for attribute in ("kind", "interaction", "cost", "seconds"):
        if not hasattr(cls, attribute):
            raise TypeError(f"prompt element {cls.__name__} has no '{attribute}'")
    if cls.kind in ELEMENT_KINDS and ELEMENT_KINDS[cls.kind] is not cls:
        raise ValueError(f"prompt element kind '{cls.kind}' is already registered")
    register_interaction(cls.interaction, cls.cost, cls.seconds)
    ELEMENT_KINDS[cls.kind] = cls
    return cls


def unregister_element(kind: str) -> None:
    """Remove a registered kind (and its interaction when no other kind uses it); for tests.

    Args:
        kind: A registered element kind.
    """
    cls = ELEMENT_KINDS.pop(kind)
    if all(other.interaction != cls.interaction for other in ELEMENT_KINDS.values()):
        INTERACTION_COST.pop(cls.interaction, None)
        HUMAN_SECONDS.pop(cls.interaction, None)


def element_class(kind: str) -> type[PromptElement]:
    """The class registered for ``kind``.

    Args:
        kind: An element kind (``"point"``, ``"box2d"``... or an added one).

    Returns:
        Its :class:`PromptElement` subclass.

    Raises:
        ValueError: When no class is registered for ``kind`` (the message names those that
            are).
    """
    try:
        return ELEMENT_KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown prompt element kind '{kind}' (registered: {', '.join(ELEMENT_KINDS)})"
        ) from None


def marks_of(elements: Iterable[PromptElement]) -> list[Mark]:
    """Every mark of ``elements``, in order.

    Args:
        elements: Prompt elements of any kinds.

    Returns:
        Their :meth:`PromptElement.marks`, concatenated in the elements' order.
    """
    return [mark for element in elements for mark in element.marks()]


def stored_kinds() -> list[type[PromptElement]]:
    """The registered classes with a ``Prompt`` field of their own (the built-in kinds).

    Returns:
        Those classes, in registration order.
    """
    return [cls for cls in ELEMENT_KINDS.values() if cls.field is not None]
