"""Masks and their geometry, below everything that uses them.

Boolean numpy masks indexed (z, y, x) (2D: (y, x)), in the canonical space of
:mod:`intrabench.io.volume`:

* :mod:`intrabench.masks.boxes`: bounding boxes, one convention (half-open slices, ``Box``)
  with its conversions to inclusive corners, the union of boxes, masks that carry their known
  box (:func:`with_box`);
* :mod:`intrabench.masks.components`: connected components (cc3d's, safe on every layout);
* :mod:`intrabench.masks.distance`: Euclidean distance transforms on the CPU or a CUDA GPU.

This package imports numpy, SciPy, cc3d, edt and :mod:`intrabench.errors` only: types,
protocols, evaluation, the engine and the components import it, never the other way round.
"""

from intrabench.masks.boxes import (
    UNKNOWN,
    Box,
    KnownBoxMask,
    bounding_box,
    bounding_box_within,
    box_from_inclusive,
    inclusive_corners,
    known_box,
    mask_corners,
    masks_equal,
    measure_box,
    union_of_boxes,
    with_box,
)
from intrabench.masks.components import connected_components

__all__ = [
    "UNKNOWN",
    "Box",
    "KnownBoxMask",
    "bounding_box",
    "bounding_box_within",
    "box_from_inclusive",
    "connected_components",
    "inclusive_corners",
    "known_box",
    "mask_corners",
    "masks_equal",
    "measure_box",
    "union_of_boxes",
    "with_box",
]
