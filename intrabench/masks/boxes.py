"""Bounding boxes of masks: one box type, one convention, its conversions.

Convention: a :data:`Box` is a tuple of ``slice`` objects, one per axis ((z, y, x) for a volume,
(y, x) for a slice), each **half-open** ``[start, stop)`` with explicit integer starts and stops,
so that ``mask[box]`` is the crop. ``None`` stands for the box of an empty mask.

Conversions: :func:`inclusive_corners` gives the inclusive (low, high) corner arrays that
geometry code (and the prompt boxes ``Box2D``/``Box3D`` of :mod:`intrabench.types`, inclusive on
both ends as the paper draws them) uses; :func:`box_from_inclusive` goes back.

Known boxes travel with their mask: :func:`with_box` returns a read-only
:class:`KnownBoxMask` (a numpy array that carries its box as an attribute), and
:func:`bounding_box` answers from it without reading the mask. Any array derived from it (a
view, a copy, an operation's result) no longer carries the box and is measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

#: Half-open slices, one per axis; ``None``: the box of an empty mask.
Box = tuple[slice, ...]


class _Unknown:
    """The box of a mask nobody has vouched for."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class KnownBoxMask(np.ndarray):
    """A read-only boolean array that carries its bounding box (``known_box``: a :data:`Box`,
    ``None`` when empty). Made by :func:`with_box`; arrays derived from it forget the box."""

    known_box: Box | None | _Unknown = UNKNOWN

    def __array_finalize__(self, obj: object) -> None:
        self.known_box = UNKNOWN

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """Results of operations (``mask & other``, ``mask.sum()``) are plain arrays and
        numpy scalars, as they would be for an ndarray."""
        plain = np.asarray(array).view(np.ndarray)
        return plain[()] if return_scalar else plain

    def astype(self, *args, **kwargs) -> np.ndarray:
        """A plain array, as for an ndarray.

        Args:
            *args: As for :meth:`numpy.ndarray.astype` (the dtype, ...).
            **kwargs: As for :meth:`numpy.ndarray.astype`.

        Returns:
            A plain ``np.ndarray`` (no carried box).
        """
        return self.view(np.ndarray).astype(*args, **kwargs)

    def copy(self, *args, **kwargs) -> np.ndarray:
        """A plain, writable copy.

        Args:
            *args: As for :meth:`numpy.ndarray.copy` (the memory order).
            **kwargs: As for :meth:`numpy.ndarray.copy`.

        Returns:
            A plain, writable ``np.ndarray`` (no carried box).
        """
        return self.view(np.ndarray).copy(*args, **kwargs)

    def __reduce__(self):
        constructor, arguments, state = super().__reduce__()
        known = None if self.known_box is UNKNOWN else (self.known_box,)
        return constructor, arguments, (state, known, self.flags.writeable)

    def __setstate__(self, state) -> None:
        array_state, known, writeable = state
        super().__setstate__(array_state)
        if known is not None and not writeable:
            self.setflags(write=False)
            self.known_box = known[0]


def with_box(mask: np.ndarray, box: Box | None) -> np.ndarray:
    """``mask`` (boolean (z, y, x) or any shape) made read-only, carrying ``box`` (its bounding
    box, ``None`` when empty), so that :func:`bounding_box` answers without reading it. The
    caller vouches for the box (e.g. the mask was just filled inside it). A mask that does not
    own its data (a view) is only made read-only: its owner could still change it.

    Args:
        mask: The mask; it is made read-only in place.
        box: Its bounding box as half-open slices, one per axis, or None when it is empty.

    Returns:
        A read-only :class:`KnownBoxMask` view of ``mask`` for a bool array that owns its data,
        else ``mask`` itself (read-only, no carried box).
    """
    mask.setflags(write=False)
    if not (isinstance(mask, np.ndarray) and mask.dtype == bool and mask.base is None):
        return mask
    carrier = mask.view(KnownBoxMask)
    carrier.setflags(write=False)
    carrier.known_box = None if box is None else tuple(slice(s.start, s.stop) for s in box)
    return carrier


def known_box(mask: object) -> Box | None | _Unknown:
    """The box ``mask`` carries (see :func:`with_box`), or :data:`UNKNOWN`.

    Args:
        mask: Any object; only a read-only :class:`KnownBoxMask` carries a box.

    Returns:
        The carried :data:`Box`, None (carried: empty), or :data:`UNKNOWN` (nothing carried).
    """
    if isinstance(mask, KnownBoxMask) and not mask.flags.writeable:
        return mask.known_box
    return UNKNOWN


def _first_axis_extent(mask: np.ndarray, chunk: int = 8) -> tuple[int, int] | None:
    """[low, high) of the non-empty range along axis 0 of a C-contiguous mask, or None.

    The low end comes from ``argmax`` on the flat array (stops at the first True voxel), the high
    end from a backward scan in chunks of slices, so only the empty margins are read.
    """
    flat = mask.reshape(-1)
    first = int(flat.argmax())
    if not flat[first]:
        return None
    plane = flat.size // mask.shape[0]
    low = first // plane
    rows = mask.reshape(mask.shape[0], plane)
    for stop in range(mask.shape[0], low, -chunk):
        start = max(low, stop - chunk)
        block = rows[start:stop]
        if block.any():
            return low, start + int(np.flatnonzero(block.any(axis=1))[-1]) + 1
    return low, low + 1  # unreachable: row ``low`` holds the first True voxel


def bounding_box(mask: np.ndarray) -> Box | None:
    """Bounding box of a boolean mask (any number of axes) as half-open slices, or None if it
    is empty.

    A mask that carries its box (:func:`with_box`) answers at once. Otherwise the axis-0 range
    is found first (reading only the empty margins of a contiguous mask), then the remaining
    axes are projected on that slab, so a small object in a large volume costs about one pass
    over the volume at memory speed.

    Args:
        mask: Boolean array ((z, y, x), (y, x) or any number of axes).

    Returns:
        One half-open ``slice`` per axis, or None when ``mask`` has no True voxel.
    """
    carried = known_box(mask)
    if carried is not UNKNOWN:
        return carried  # type: ignore[return-value]
    return measure_box(mask)


def measure_box(mask: np.ndarray) -> Box | None:
    """The bounding box of ``mask``, always measured (a carried box is ignored).

    Args:
        mask: An array of any number of axes, read as bool.

    Returns:
        One half-open ``slice`` per axis, or None for an empty (or 0-d, or size-0) mask.
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim == 0 or mask.size == 0:
        return None
    if mask.flags.c_contiguous:
        extent = _first_axis_extent(mask)
        if extent is None:
            return None
        bounds = [slice(*extent)]
        block = mask[bounds[0]]
        first_axis = 1
    else:
        bounds, block, first_axis = [], mask, 0
    for axis in range(first_axis, mask.ndim):
        other = tuple(a for a in range(block.ndim) if a != axis)
        present = np.flatnonzero(block.any(axis=other))
        if present.size == 0:
            return None
        low, high = int(present[0]), int(present[-1]) + 1
        bounds.append(slice(low, high))
        index = [slice(None)] * block.ndim
        index[axis] = slice(low, high)
        block = block[tuple(index)]
    return tuple(bounds)


def bounding_box_within(mask: np.ndarray, region: Box | None) -> Box | None:
    """Bounding box of ``mask`` when all its True voxels lie in ``region`` (a :data:`Box`;
    None: the mask is empty): reads the region only.

    Args:
        mask: Boolean array whose True voxels all lie inside ``region``.
        region: A half-open box enclosing them, one slice per axis; None when it is empty.

    Returns:
        The exact bounding box in ``mask``'s coordinates, or None when it is empty.
    """
    inner = None if region is None else measure_box(mask[region])
    if inner is None:
        return None
    return tuple(slice(r.start + i.start, r.start + i.stop) for r, i in zip(region, inner))


def union_of_boxes(boxes: Iterable[Box | None]) -> Box | None:
    """The smallest box holding every given box (``None``: an empty mask's box, skipped);
    None when no box is given. ``union_of_boxes(bounding_box(m) for m in masks)`` is the box of
    the union of ``masks``.

    Args:
        boxes: Half-open boxes of one number of axes; None entries are skipped.

    Returns:
        The enclosing half-open box, or None when no box is given.
    """
    present = [b for b in boxes if b is not None]
    if not present:
        return None
    return tuple(
        slice(min(b[a].start for b in present), max(b[a].stop for b in present))
        for a in range(len(present[0]))
    )


def masks_equal(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two boolean masks of one shape are equal, reading only their bounding boxes
    (``np.array_equal`` reads both volumes whole).

    Args:
        first: Boolean array.
        second: Boolean array of the same shape.

    Returns:
        True when they have the same True voxels.
    """
    box = bounding_box(first)
    if box != bounding_box(second):
        return False
    return box is None or bool(np.array_equal(first[box], second[box]))


# -- conversions --------------------------------------------------------------------------


def inclusive_corners(box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) int64 corner arrays of ``box``, inclusive on both ends (``high = stop - 1``).

    Args:
        box: Half-open slices with explicit starts and stops, one per axis.

    Returns:
        ``low`` and ``high``, each int64 of one entry per axis (e.g. (z, y, x)).
    """
    low = np.array([int(s.start) for s in box], dtype=np.int64)
    high = np.array([int(s.stop) - 1 for s in box], dtype=np.int64)
    return low, high


def box_from_inclusive(low: Sequence[int], high: Sequence[int]) -> Box:
    """The :data:`Box` of the inclusive corners ``low``..``high`` (``stop = high + 1``).

    Args:
        low: The first index on each axis (e.g. (z, y, x)).
        high: The last index on each axis, inclusive.

    Returns:
        Half-open slices, one per axis.
    """
    return tuple(slice(int(lo), int(hi) + 1) for lo, hi in zip(low, high))


def mask_corners(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive (low, high) corner arrays of a non-empty mask; ValueError for an empty one.

    Args:
        mask: Boolean array with at least one True voxel.

    Returns:
        ``low`` and ``high``, int64, one entry per axis, both inclusive.

    Raises:
        ValueError: The mask is empty.
    """
    box = bounding_box(mask)
    if box is None:
        raise ValueError("bounding box of an empty mask")
    return inclusive_corners(box)
