"""The in-plane orientation in which a 2D model sees an axial slice.

IntraBench holds every volume in canonical (z, y, x) order, the voxel axes closest to RAS+
(:mod:`intrabench.io.volume`): on a slice, y runs towards anterior and x towards the patient's
right. A 2D network trained on slices cut another way sees, in that frame, a mirrored or
rotated image. Two views are offered to the adapters:

* ``"canonical"``: the slice as IntraBench holds it (RAS+ in-plane).
* ``"stored"``: the slice as the file stores it, ``SimpleITK.GetArrayFromImage(image)[k]``,
  i.e. what MedSAM's and LiteMedSAM's pre-processing (``pre_CT_MR.py``) feeds their
  networks: rows are the file's second voxel axis (j), columns its first (i), each running
  the way the file runs. For the common LPS-stored file (direction = identity) that is
  the canonical slice turned by 180 degrees (rows anterior to posterior, columns right to
  left: the radiological view).

Only the two in-plane axes are re-oriented; the slicing axis stays canonical z (axial), so a
file stored as sagittal slices is still cut axially. A :class:`SliceView` maps image slices,
points and boxes from canonical to view coordinates, and masks back; every map is a flip
and/or a transpose, so the round trip is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intrabench.types import Box2D

#: the views an adapter can ask for
SLICE_VIEWS = ("canonical", "stored")


def check_slice_view(value: str) -> str:
    """``value`` if it names a view; ValueError (a one-line configuration error) otherwise."""
    if value not in SLICE_VIEWS:
        raise ValueError(f"slice_view must be one of {', '.join(SLICE_VIEWS)}, not '{value}'")
    return value


@dataclass(frozen=True)
class SliceView:
    """Canonical (y, x) slice -> view (row, col): flip y, flip x, then transpose."""

    flip_y: bool = False
    flip_x: bool = False
    #: the view's rows are the canonical x axis (the file stores x as its slower axis)
    transpose: bool = False

    @classmethod
    def of(cls, volume, view: str) -> SliceView:
        """The view ``view`` (one of :data:`SLICE_VIEWS`) of ``volume``'s slices."""
        if view not in SLICE_VIEWS:
            raise ValueError(f"slice view must be one of {', '.join(SLICE_VIEWS)}, not '{view}'")
        if view == "canonical":
            return cls()
        # orientation(): per voxel axis (i, j, k) of the file, the RAS axis and its sign
        by_ras = {
            int(ras): (voxel, float(sign))
            for voxel, (ras, sign) in enumerate(volume.geometry.orientation())
        }
        voxel_x, sign_x = by_ras[0]
        voxel_y, sign_y = by_ras[1]
        # SimpleITK's array is (k, j, i): the higher voxel axis is the slower one, the rows
        return cls(flip_y=sign_y < 0, flip_x=sign_x < 0, transpose=voxel_x > voxel_y)

    @property
    def is_identity(self) -> bool:
        """Whether the view shows the slice as stored (no flip, no transpose)."""
        return not (self.flip_y or self.flip_x or self.transpose)

    def shape(self, shape_yx: tuple[int, int]) -> tuple[int, int]:
        """The view's (rows, cols) for a canonical slice of ``shape_yx``."""
        height, width = shape_yx
        return (width, height) if self.transpose else (height, width)

    def image(self, slice_yx: np.ndarray) -> np.ndarray:
        """A canonical (y, x) slice (or a (y, x, ...) stack of channels) in the view (a numpy
        view of it, not contiguous in general)."""
        out = slice_yx
        if self.flip_y:
            out = out[::-1]
        if self.flip_x:
            out = out[:, ::-1]
        if self.transpose:
            out = np.swapaxes(out, 0, 1)
        return out

    def to_canonical(self, view_array: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`image`: a (rows, cols, ...) array back to canonical (y, x)."""
        out = np.swapaxes(view_array, 0, 1) if self.transpose else view_array
        if self.flip_x:
            out = out[:, ::-1]
        if self.flip_y:
            out = out[::-1]
        return out

    def points(self, points_yx: np.ndarray, shape_yx: tuple[int, int]) -> np.ndarray:
        """(N, 2) canonical (y, x) voxel indices -> (N, 2) (row, col) in the view."""
        height, width = shape_yx
        points = np.asarray(points_yx).reshape(-1, 2).copy()
        if self.flip_y:
            points[:, 0] = height - 1 - points[:, 0]
        if self.flip_x:
            points[:, 1] = width - 1 - points[:, 1]
        return points[:, ::-1].copy() if self.transpose else points

    def box(self, box: Box2D, shape_yx: tuple[int, int]) -> Box2D:
        """An inclusive canonical box -> the inclusive box in the view, as (row_min, col_min,
        row_max, col_max) in :class:`Box2D`'s (y_min, x_min, y_max, x_max) fields."""
        corners = self.points(np.array([[box.y_min, box.x_min], [box.y_max, box.x_max]]), shape_yx)
        low, high = corners.min(axis=0), corners.max(axis=0)
        return Box2D(int(low[0]), int(low[1]), int(high[0]), int(high[1]))
