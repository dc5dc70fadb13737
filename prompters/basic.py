"""Backward-compatible home of the first prompters; they now live in smaller modules.

``box-3d`` is in :mod:`.volume3d`; ``center-point-per-slice`` and ``box-per-slice`` are in
:mod:`.per_slice`; the geometric helpers are in :mod:`._geometry`.
"""

from __future__ import annotations

from ._geometry import (
    bounding_box,
    centroid_point_2d,
    foreground_slices,
    largest_component,
    tight_box_2d,
)
from .per_slice import BoxPerSlice, CenterPointPerSlice
from .volume3d import Box3DPrompter

largest_component_2d = largest_component

__all__ = [
    "Box3DPrompter",
    "BoxPerSlice",
    "CenterPointPerSlice",
    "bounding_box",
    "centroid_point_2d",
    "foreground_slices",
    "largest_component_2d",
    "tight_box_2d",
]
