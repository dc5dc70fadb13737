"""An image's on-disk grid (SimpleITK conventions) and how its voxel axes map to RAS+.

:class:`ImageGeometry` holds size, spacing, origin and direction in the file's (i, j, k) order
and LPS world coordinates; ``orientation()`` gives nibabel's ornt array (voxel axis -> RAS
axis and sign). Lives apart from :mod:`intrabench.io.volume` so that the readers can use it
without importing the volume module (no import circle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import SimpleITK as sitk

_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])


@dataclass(frozen=True)
class ImageGeometry:
    """On-disk geometry in SimpleITK conventions ((i, j, k) order, LPS physical space)."""

    size: tuple[int, int, int]
    spacing: tuple[float, float, float]
    origin: tuple[float, float, float]
    direction: tuple[float, ...]

    @classmethod
    def from_sitk(cls, image: sitk.Image) -> ImageGeometry:
        """The geometry of a SimpleITK image: size, spacing (mm), origin (mm) and direction, in its
        (x, y, z) order.

        Args:
            image: Any SimpleITK image (only its header fields are read).

        Returns:
            The geometry: size in voxels, spacing and origin in mm (LPS world), the direction
            matrix's nine entries row by row.
        """
        return cls(
            size=tuple(int(v) for v in image.GetSize()),
            spacing=tuple(float(v) for v in image.GetSpacing()),
            origin=tuple(float(v) for v in image.GetOrigin()),
            direction=tuple(float(v) for v in image.GetDirection()),
        )

    def ras_affine(self) -> np.ndarray:
        """4x4 voxel (i, j, k) to RAS world affine, as nibabel would report it.

        Returns:
            A (4, 4) float array mapping homogeneous voxel indices (i, j, k, 1) to RAS+ world
            coordinates in mm.
        """
        direction = np.asarray(self.direction, dtype=float).reshape(3, 3)
        affine = np.eye(4)
        affine[:3, :3] = _LPS_TO_RAS @ direction @ np.diag(self.spacing)
        affine[:3, 3] = _LPS_TO_RAS @ np.asarray(self.origin)
        return affine

    def orientation(self) -> np.ndarray:
        """nibabel ornt array mapping voxel axes (i, j, k) to the closest RAS axes.

        Returns:
            A (3, 2) float array: row ``a`` is (RAS axis 0/1/2, +1 or -1) for voxel axis ``a``.
        """
        aligned = _axis_aligned_orientation(self.ras_affine())
        if aligned is not None:  # most files: no nibabel import (docs/performance.md)
            return aligned
        import nibabel as nib

        return nib.orientations.io_orientation(self.ras_affine())

    def _in_canonical_order(self, per_voxel_axis: tuple) -> tuple:
        """Values given per voxel axis (x, y, z of the file), reordered to canonical (z, y, x):
        each goes to the RAS axis its voxel axis is closest to."""
        by_ras_axis: list = [None, None, None]
        for voxel_axis, (ras_axis, _flip) in enumerate(self.orientation()):
            by_ras_axis[int(ras_axis)] = per_voxel_axis[voxel_axis]
        return (by_ras_axis[2], by_ras_axis[1], by_ras_axis[0])

    def canonical_spacing(self) -> tuple[float, float, float]:
        """Spacing in canonical (z, y, x) order, in mm.

        Returns:
            The voxel spacing along canonical z, y and x, in mm.
        """
        return self._in_canonical_order(tuple(self.spacing))

    def canonical_shape(self) -> tuple[int, int, int]:
        """Size in canonical (z, y, x) order, in voxels.

        Returns:
            The shape a canonical array of this grid has: (z, y, x) in voxels.
        """
        return self._in_canonical_order(tuple(self.size))

    def same_grid(self, other: ImageGeometry, tolerance: float = 1e-3) -> bool:
        """Whether ``other`` is the same voxel grid within ``tolerance``.

        Args:
            other: The geometry to compare with.
            tolerance: Relative and absolute tolerance of spacing (mm) and direction; origins may
                differ by ten times it (mm).

        Returns:
            True when the sizes are equal and spacing, origin and direction agree within the
            tolerances.
        """
        return (
            self.size == other.size
            and np.allclose(self.spacing, other.spacing, rtol=tolerance, atol=tolerance)
            and np.allclose(self.origin, other.origin, rtol=tolerance, atol=tolerance * 10)
            and np.allclose(self.direction, other.direction, atol=tolerance)
        )


def _axis_aligned_orientation(affine: np.ndarray, tolerance: float = 1e-6) -> np.ndarray | None:
    """nibabel's ``io_orientation(affine)`` when every voxel axis runs along one world axis
    (each column of the 3x3 part, scaled to unit length, within ``tolerance`` of a signed
    unit vector, the columns on distinct axes): then the closest axes cannot be in doubt.
    None otherwise (oblique or degenerate grids are left to nibabel)."""
    columns = np.asarray(affine, dtype=float)[:3, :3]
    norms = np.linalg.norm(columns, axis=0)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        return None
    unit = columns / norms
    axes = np.argmax(np.abs(unit), axis=0)
    if len(set(axes.tolist())) != 3:
        return None
    signs = np.sign(unit[axes, [0, 1, 2]])
    aligned = np.zeros((3, 3))
    aligned[axes, [0, 1, 2]] = signs
    if np.max(np.abs(unit - aligned)) > tolerance:
        return None
    return np.column_stack([axes, signs]).astype(float)


def _inverse_orientation(ornt: np.ndarray) -> np.ndarray:
    inverse = np.zeros_like(ornt)
    for voxel_axis, (ras_axis, flip) in enumerate(ornt):
        inverse[int(ras_axis)] = (voxel_axis, flip)
    return inverse
