"""Deterministic synthetic CT-like phantoms with lesions of varied size, shape and contrast.

Each case is a function of (seed, case index) only, so any number of cases can be generated
reproducibly without files. Volumes are (z, y, x) in canonical orientation, values in HU-like
units, anisotropic spacing (z coarser than y, x), like clinical CT.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy import ndimage

from intrabench.interfaces import Dataset
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.registry import datasets
from intrabench.seeding import derive_rng
from intrabench.types import Case, Target

#: lesions keep this many voxels (6-connected steps) apart
_SEPARATION = 2

#: SimpleITK direction (LPS) whose closest canonical orientation is RAS: canonical == array.
_RAS_DIRECTION = (-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0)


def _ellipsoid(shape, center, radii_vox, rotation: float) -> tuple[tuple[slice, ...], np.ndarray]:
    """A rotated ellipsoid (rotation in the y-x plane) as (its box, its mask within the box).

    The box holds every voxel the full-volume test ``(dz/rz)^2 + (ry/ry_)^2 + (rx/rx_)^2 <= 1``
    can accept, and a voxel margin more (outside it the sum is >= (1 + 1/r)^2, far from 1):
    the mask equals that test on the whole volume, computed per voxel with the same operations
    on the same numbers, at the cost of the box alone.
    """
    box = _ellipsoid_box(shape, center, radii_vox)
    z, y, x = np.ogrid[box[0], box[1], box[2]]
    dz, dy, dx = z - center[0], y - center[1], x - center[2]
    cos, sin = np.cos(rotation), np.sin(rotation)
    ry = dy * cos - dx * sin
    rx = dy * sin + dx * cos
    inside = (dz / radii_vox[0]) ** 2 + (ry / radii_vox[1]) ** 2 + (rx / radii_vox[2]) ** 2 <= 1.0
    return box, inside


def _ellipsoid_box(shape, center, radii_vox) -> tuple[slice, ...]:
    """The (z, y, x) box around an ellipsoid of these radii (voxels; any rotation in the y-x
    plane), one voxel wider than its reach on each side, within the volume."""
    in_plane = max(abs(float(radii_vox[1])), abs(float(radii_vox[2])))
    reach = (abs(float(radii_vox[0])), in_plane, in_plane)
    return tuple(
        slice(
            max(0, int(center[a]) - int(np.ceil(reach[a])) - 1),
            min(shape[a], int(center[a]) + int(np.ceil(reach[a])) + 2),
        )
        for a in range(3)
    )


def _union_box(boxes, shape, margin: int) -> tuple[slice, ...]:
    """The smallest box holding ``boxes``, grown by ``margin`` voxels, within the volume."""
    return tuple(
        slice(
            max(0, min(b[a].start for b in boxes) - margin),
            min(shape[a], max(b[a].stop for b in boxes) + margin),
        )
        for a in range(3)
    )


def _paste(box, inside, region) -> np.ndarray:
    """``inside`` (the mask of ``box``) on the grid of the larger box ``region``."""
    canvas = np.zeros(tuple(s.stop - s.start for s in region), dtype=bool)
    canvas[
        tuple(
            slice(box[a].start - region[a].start, box[a].stop - region[a].start) for a in range(3)
        )
    ] = inside
    return canvas


def make_phantom(
    seed: int,
    index: int,
    shape: tuple[int, int, int] = (32, 96, 96),
    spacing: tuple[float, float, float] = (2.5, 0.8, 0.8),
    n_lesions: tuple[int, int] = (2, 4),
) -> tuple[Volume, np.ndarray]:
    """One phantom: (image Volume, instance label map with ids 1..K), both (z, y, x).

    Args:
        seed: The run's seed; with ``index`` it seeds the phantom's generator.
        index: The phantom's number in its dataset.
        shape: The volume's (z, y, x) shape, in voxels.
        spacing: Voxel spacing in mm, (z, y, x).
        n_lesions: The fewest and most lesions to place (inclusive).

    Returns:
        (the CT-like image Volume in HU, float32; the int32 instance label map, 0 background).
    """
    rng = derive_rng(seed, "phantom", index)
    nz, ny, nx = shape
    z, y, x = np.ogrid[:nz, :ny, :nx]
    body = ((y - ny / 2) / (0.42 * ny)) ** 2 + ((x - nx / 2) / (0.46 * nx)) ** 2 <= 1.0
    image = np.full(shape, -1000.0, dtype=np.float32)
    image[np.broadcast_to(body, shape)] = 40.0
    # two "lungs": low-density lobes, lesions like to sit there (high contrast) or in soft tissue
    lungs = np.zeros(shape, dtype=bool)
    for side in (-1, 1):
        lungs |= np.broadcast_to(
            ((y - ny / 2) / (0.28 * ny)) ** 2 + ((x - nx / 2 - side * 0.2 * nx) / (0.15 * nx)) ** 2
            <= 1.0,
            shape,
        )
    image[lungs] = -820.0
    label = np.zeros(shape, dtype=np.int32)
    wanted = int(rng.integers(n_lesions[0], n_lesions[1] + 1))
    placed = 0
    for _attempt in range(200):
        if placed == wanted:
            break
        radius_mm = float(rng.uniform(3.0, 11.0))
        radii = np.array([radius_mm / spacing[0], radius_mm / spacing[1], radius_mm / spacing[2]])
        radii *= rng.uniform(0.7, 1.3, size=3)
        radii[0] = max(radii[0], 0.8)
        radii = np.minimum(radii, np.array(shape) / 2.0 - 3.5)  # small volumes: lesions still fit
        margin = np.ceil(radii).astype(int) + 2
        center = [int(rng.integers(margin[a], shape[a] - margin[a])) for a in range(3)]
        if not body[0, center[1], center[2]]:
            continue
        boxes = [_ellipsoid(shape, center, radii, float(rng.uniform(0, np.pi)))]
        # irregular shapes: union with a smaller offset lobe
        if rng.random() < 0.6:
            offset = rng.normal(0, 0.6, size=3) * radii
            lobe_center = [int(np.clip(center[a] + offset[a], 1, shape[a] - 2)) for a in range(3)]
            boxes.append(
                _ellipsoid(
                    shape, lobe_center, radii * rng.uniform(0.4, 0.7), float(rng.uniform(0, np.pi))
                )
            )
        # the lesion and its dilation live in this box: nothing outside it is touched
        region = _union_box([box for box, _ in boxes], shape, margin=_SEPARATION)
        lesion = np.zeros(tuple(s.stop - s.start for s in region), dtype=bool)
        for box, inside in boxes:
            lesion |= _paste(box, inside, region)
        lesion &= np.broadcast_to(body[:, region[1], region[2]], lesion.shape)
        dilated = ndimage.binary_dilation(lesion, iterations=_SEPARATION)
        if lesion.sum() < 4 or (label[region][dilated] > 0).any():
            continue
        placed += 1
        label[region][lesion] = placed
        near = image[region]  # a view: assignments below reach the image
        background = np.median(near[lesion])
        contrast = float(rng.uniform(60.0, 220.0)) * (1 if rng.random() < 0.8 else -0.5)
        near[lesion] = background + 800.0 if background < -500 else background + contrast
        near[lesion] = np.minimum(near[lesion], 200.0) if background < -500 else near[lesion]
    image = ndimage.gaussian_filter(image, sigma=(0.5, 0.8, 0.8))
    image += rng.normal(0.0, 12.0, size=shape).astype(np.float32)
    size_xyz = (nx, ny, nz)
    spacing_xyz = (spacing[2], spacing[1], spacing[0])
    geometry = ImageGeometry(
        size=size_xyz, spacing=spacing_xyz, origin=(0.0, 0.0, 0.0), direction=_RAS_DIRECTION
    )
    return Volume(image.astype(np.float32), spacing, geometry, modality="CT"), label


#: the most phantoms and the longest side one dataset may generate (n_cases: 100000000 grew
#: to 7.5 GB under --dry-run)
MAX_PHANTOMS = 10_000
MAX_PHANTOM_SIDE = 2048


@datasets.register
class Phantoms(Dataset):
    """Synthetic CT-like phantoms with lesions (any number of cases, deterministic)."""

    name: ClassVar[str] = "demo-phantoms"
    modality: ClassVar[str] = "CT (synthetic)"
    description: ClassVar[str] = "built-in: synthetic CT-like volumes with 2-4 lesions each"

    def __init__(
        self,
        n_cases: int = 4,
        seed: int = 0,
        shape: tuple[int, int, int] = (32, 96, 96),
        spacing: tuple[float, float, float] = (2.5, 0.8, 0.8),
        n_lesions: tuple[int, int] = (2, 4),
    ) -> None:
        if not 1 <= n_cases <= MAX_PHANTOMS:
            raise ValueError(
                f"n_cases must be from 1 to {MAX_PHANTOMS:,} (generated cases: "
                f"each is a volume), not {str(n_cases)[:20]}"
            )
        if len(shape) != 3 or not all(1 <= int(s) <= MAX_PHANTOM_SIDE for s in shape):
            raise ValueError(
                f"shape must be 3 sides of 1 to {MAX_PHANTOM_SIDE} voxels, not "
                f"{str(list(shape))[:40]}"
            )
        self.n_cases = int(n_cases)
        self.seed = int(seed)
        self.shape = tuple(int(s) for s in shape)
        self.spacing = tuple(float(s) for s in spacing)
        self.n_lesions = (int(n_lesions[0]), int(n_lesions[1]))

    def case_ids(self) -> list[str]:
        """``phantom_000`` .. ``phantom_<n_cases - 1>``."""
        return [f"phantom_{i:03d}" for i in range(self.n_cases)]

    def declared_modality(self, case_id: str) -> str:
        """Phantoms are synthetic CT (intensities in HU)."""
        return "CT"

    def load(self, case_id: str) -> Case:
        """Generate one phantom from the seed and its index: float32 (z, y, x) HU image, one
        instance target per lesion."""
        index = int(case_id.rsplit("_", 1)[1])
        image, label = make_phantom(self.seed, index, self.shape, self.spacing, self.n_lesions)
        targets = tuple(
            Target(f"lesion_{i}", i, "lesion", "instance") for i in range(1, int(label.max()) + 1)
        )
        return Case(self.name, case_id, image, label, targets)
