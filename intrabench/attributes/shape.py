"""Shape attributes of one target mask (VizWiz-SalientObject's object characterisation, in 3D).

Array conventions: ``mask`` is a boolean (z, y, x) array of the whole image (canonical
orientation, :mod:`intrabench.io.volume`), ``spacing`` its voxel size in mm (z, y, x). Every
function reads only the mask's bounding box (``box``, slices in (z, y, x), when known).

Connectivity: a target's voxels are connected through faces, edges and corners (26), as the
datasets split instances; background regions, for holes, through faces only (6 in 3D, 4 in a
slice), the dual of 26, so a hole is never "connected" to the outside through a corner.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage, sparse

from intrabench.masks import bounding_box
from intrabench.masks.components import connected_components

Box = tuple[slice, slice, slice]

#: Taubin smoothing of the marching-cubes mesh: iterations, shrink and inflate factors.
#: Marching cubes on a binary mask follows its voxel staircase, which inflates the area of a
#: curved surface (a voxelised sphere reads sphericity 0.92); 20 lambda/mu passes remove the
#: staircase without shrinking the mesh (its volume stays within 1% of the voxel volume).
TAUBIN_ITERATIONS = 20
TAUBIN_LAMBDA = 0.5
TAUBIN_MU = -0.53

#: pi^(1/3) * 6^(2/3): Wadell's sphericity constant (sphericity = K V^(2/3) / A; its cube is the isoperimetric quotient).
_SPHERICITY_CONSTANT = math.pi ** (1.0 / 3.0) * 6.0 ** (2.0 / 3.0)


def crop(mask: np.ndarray, box: Box | None = None) -> tuple[np.ndarray, Box | None]:
    """The mask's bounding box (given or measured) and the mask cut to it.

    Args:
        mask: The target's boolean mask of the whole image, (z, y, x).
        box: Its bounding box if known (half-open slices, (z, y, x)); None: measured.

    Returns:
        The mask cut to the box (bool) and the box; an empty (0, 0, 0) array and None for an
        empty mask.
    """
    box = bounding_box(mask) if box is None else box
    if box is None:
        return np.zeros((0, 0, 0), dtype=bool), None
    return np.asarray(mask[box], dtype=bool), box


def volume_ml(voxels: int, spacing: tuple[float, float, float]) -> float:
    """Volume in millilitres (1 ml = 1000 mm^3) of ``voxels`` voxels of ``spacing`` mm.

    Args:
        voxels: The number of voxels.
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The volume in ml.
    """
    return float(voxels) * float(np.prod(spacing)) / 1000.0


def count_components(cropped: np.ndarray) -> int:
    """Connected regions of the target (26-connectivity).

    Args:
        cropped: The target's boolean mask (cut to its box or not), (z, y, x).

    Returns:
        The number of regions (0 for an empty mask).
    """
    if not cropped.any():
        return 0
    return int(connected_components(cropped, connectivity=26, return_N=True)[1])


def count_cavities(cropped: np.ndarray) -> int:
    """Enclosed cavities in 3D: background regions (6-connected) that do not reach the
    outside of the target's bounding box. A hollow sphere has 1, a torus 0 (its hole is a
    tunnel, open to the outside).

    Args:
        cropped: The target's boolean mask cut to its bounding box, (z, y, x).

    Returns:
        The number of cavities.
    """
    if not cropped.any():
        return 0
    padded = np.pad(cropped, 1)
    filled = ndimage.binary_fill_holes(padded, structure=ndimage.generate_binary_structure(3, 1))
    inside = filled & ~padded
    if not inside.any():
        return 0
    return int(connected_components(inside, connectivity=6, return_N=True)[1])


def slices_with_holes(cropped: np.ndarray) -> int:
    """Axial slices (z) on which the target encloses background (4-connected) in 2D: what a
    reader scrolling the slices sees as a ring. A torus lying in the axial plane has them.

    Args:
        cropped: The target's boolean mask, (z, y, x).

    Returns:
        The number of such slices.
    """
    count = 0
    for plane in cropped:
        if plane.any() and (ndimage.binary_fill_holes(plane) & ~plane).any():
            count += 1
    return count


def centre_of_mass(
    cropped: np.ndarray, box: Box, shape: tuple[int, int, int]
) -> tuple[float, float, float]:
    """Centre of mass (z, y, x) as a fraction of the image's extent along each axis.

    Args:
        cropped: The target's bool mask cropped to ``box``.
        box: The crop's place in the image (half-open slices, (z, y, x)).
        shape: The image's shape (z, y, x).

    Returns:
        Per axis voxel index / (size - 1): 0 at the first voxel and 1 at the last (0.5 on an
        axis of size 1).
    """
    local = ndimage.center_of_mass(cropped)
    fractions = []
    for value, part, size in zip(local, box, shape):
        index = float(value) + part.start
        fractions.append(index / (size - 1) if size > 1 else 0.5)
    return tuple(fractions)  # type: ignore[return-value]


def _taubin(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Taubin lambda/mu smoothing (G. Taubin, SIGGRAPH 1995) with umbrella weights."""
    n = len(vertices)
    i = np.concatenate(
        [faces[:, 0], faces[:, 1], faces[:, 2], faces[:, 1], faces[:, 2], faces[:, 0]]
    )
    j = np.concatenate(
        [faces[:, 1], faces[:, 2], faces[:, 0], faces[:, 0], faces[:, 1], faces[:, 2]]
    )
    adjacency = sparse.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)).tocsr()
    adjacency.data[:] = 1.0  # an edge shared by two faces counts once
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    average = sparse.diags(1.0 / np.maximum(degree, 1.0)) @ adjacency
    smoothed = vertices.astype(np.float64)
    for _ in range(TAUBIN_ITERATIONS):
        smoothed = smoothed + TAUBIN_LAMBDA * (average @ smoothed - smoothed)
        smoothed = smoothed + TAUBIN_MU * (average @ smoothed - smoothed)
    return smoothed


def surface_area_mm2(cropped: np.ndarray, spacing: tuple[float, float, float]) -> float:
    """Area in mm^2 of the target's surface: a marching-cubes mesh (level 0.5 of the mask,
    in mm) smoothed with :func:`_taubin` to remove the voxel staircase.

    Args:
        cropped: The target's boolean mask cut to its bounding box, (z, y, x).
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The area in mm^2 (0 for an empty mask).
    """
    from skimage.measure import marching_cubes, mesh_surface_area

    if not cropped.any():
        return 0.0
    padded = np.pad(cropped, 1).astype(np.float32)
    vertices, faces, _normals, _values = marching_cubes(padded, 0.5, spacing=tuple(spacing))
    return float(mesh_surface_area(_taubin(vertices, faces), faces))


def sphericity(volume_mm3: float, area_mm2: float) -> float:
    """Isoperimetric quotient pi^(1/3) (6 V)^(2/3) / A: 1 for a sphere, 0.806 for a cube,
    lower for irregular or spiculated boundaries; NaN without a surface.

    Args:
        volume_mm3: The target's volume in mm^3.
        area_mm2: Its surface area in mm^2 (:func:`surface_area_mm2`).

    Returns:
        The sphericity (no unit), or NaN.
    """
    if area_mm2 <= 0:
        return float("nan")
    return float(_SPHERICITY_CONSTANT * volume_mm3 ** (2.0 / 3.0) / area_mm2)


def elongation(cropped: np.ndarray, spacing: tuple[float, float, float]) -> float:
    """Longest over shortest principal axis (square root of the ratio of the largest to the
    smallest eigenvalue of the voxel coordinates' covariance, in mm): 1 for a sphere or a cube,
    a/c for an ellipsoid of semi-axes a >= b >= c. NaN for fewer than 4 voxels; a flat target
    (one voxel thick) gets the half-voxel thickness as its smallest axis.

    Args:
        cropped: The target's boolean mask, (z, y, x).
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The ratio (at least 1, no unit), or NaN.
    """
    coordinates = np.argwhere(cropped).astype(np.float64) * np.asarray(spacing, dtype=np.float64)
    if len(coordinates) < 4:
        return float("nan")
    covariance = np.cov(coordinates, rowvar=False)
    # a voxel is a box, not a point: its own spread (s^2 / 12 per axis) keeps thin targets finite
    covariance += np.diag(np.asarray(spacing, dtype=np.float64) ** 2 / 12.0)
    eigenvalues = np.linalg.eigvalsh(covariance)
    return float(math.sqrt(eigenvalues[-1] / eigenvalues[0]))


def extent_slices(box: Box) -> int:
    """Axial slices (z) between the target's first and last, both included.

    Args:
        box: The target's bounding box (half-open slices, (z, y, x)).

    Returns:
        The number of slices.
    """
    return int(box[0].stop - box[0].start)


def touches_border(box: Box, shape: tuple[int, int, int]) -> bool:
    """Whether the target reaches a face of the image (it may continue outside the scan).

    Args:
        box: The target's bounding box (half-open slices, (z, y, x)).
        shape: The image's shape, (z, y, x).

    Returns:
        True when the box starts at 0 or ends at the image's size on some axis.
    """
    return any(part.start == 0 or part.stop == size for part, size in zip(box, shape))
