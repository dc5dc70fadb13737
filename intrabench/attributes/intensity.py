"""Intensity attributes: a target's contrast with its surroundings, its heterogeneity, and the
image's noise and body.

Array conventions: ``image`` is a float (z, y, x) array (CT in HU, MR in scanner units), masks
boolean (z, y, x) arrays of the same grid, ``spacing`` in mm (z, y, x). Values in image units
are comparable within a dataset (the stratified tables group by each dataset's tertiles), not
across modalities; the contrast-to-noise ratio has no unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from intrabench.masks.distance import distance_transform
from intrabench.modality import looks_like_ct

Box = tuple[slice, slice, slice]

#: Width of the shell around a target that serves as its background, in mm.
SHELL_MM = 3.0
#: CT voxels above this value (HU) are the body: soft tissue, bone, and the lungs' walls.
CT_BODY_HU = -500.0
#: Axial slices, evenly spaced, on which the image noise is estimated.
NOISE_SLICES = 16


@dataclass(frozen=True)
class Contrast:
    """Statistics of a target's intensities against a shell around it (image units).

    Attributes:
        inside_mean: The mean intensity of the target's voxels.
        shell_mean: The mean intensity of the shell's voxels.
        shell_std: Their standard deviation.
        inside_std: The standard deviation of the target's voxels.
    """

    inside_mean: float
    shell_mean: float
    shell_std: float
    inside_std: float

    @property
    def contrast(self) -> float:
        """Mean inside minus mean in the shell (image units; negative: darker than around)."""
        return self.inside_mean - self.shell_mean

    @property
    def cnr(self) -> float:
        """Contrast-to-noise ratio |mean inside - mean shell| / standard deviation in the shell;
        NaN when the shell is empty or uniform (the ratio is undefined)."""
        if not math.isfinite(self.shell_std) or self.shell_std <= 0:
            return float("nan")
        return abs(self.contrast) / self.shell_std


def shell_box(
    box: Box, shape: tuple[int, ...], spacing: tuple[float, float, float], width_mm: float
) -> Box:
    """``box`` grown by ``width_mm`` (in voxels per axis, rounded up), clipped to the image.

    Args:
        box: Half-open slices, (z, y, x), with explicit starts and stops.
        shape: The image's shape, (z, y, x).
        spacing: Voxel spacing in mm, (z, y, x).
        width_mm: The margin, in mm.

    Returns:
        The grown box, (z, y, x) slices.
    """
    grown = []
    for part, size, step in zip(box, shape, spacing):
        margin = int(math.ceil(width_mm / step))
        grown.append(slice(max(0, part.start - margin), min(size, part.stop + margin)))
    return tuple(grown)  # type: ignore[return-value]


def contrast(
    image: np.ndarray,
    label: np.ndarray,
    label_value: int,
    box: Box,
    spacing: tuple[float, float, float],
    width_mm: float = SHELL_MM,
) -> Contrast:
    """The intensities of a target against a shell of background around it.

    The shell is the voxels within ``width_mm`` of the target (distance in mm, the target
    excluded) that belong to no labelled structure (``label != 0``): other lesions and organs
    are not background. Reads only the target's box grown by the shell width.

    Args:
        image: The case's image, (z, y, x), in its units (HU for CT).
        label: The case's integer target map, (z, y, x) on the same grid.
        label_value: The target's value in ``label``.
        box: The target's bounding box (half-open slices, (z, y, x)).
        spacing: Voxel spacing in mm, (z, y, x).
        width_mm: The shell's width, in mm.

    Returns:
        The means and standard deviations inside and in the shell, in image units.
    """
    region = shell_box(box, image.shape, spacing, width_mm)
    labels = np.asarray(label[region])
    inside = labels == label_value
    distances = distance_transform(~inside, spacing)
    shell = (distances > 0) & (distances <= width_mm) & (labels == 0)
    values = np.asarray(image[region], dtype=np.float64)
    inner, outer = values[inside], values[shell]
    return Contrast(
        inside_mean=float(inner.mean()) if inner.size else float("nan"),
        shell_mean=float(outer.mean()) if outer.size else float("nan"),
        shell_std=float(outer.std()) if outer.size > 1 else float("nan"),
        inside_std=float(inner.std()) if inner.size > 1 else float("nan"),
    )


def noise_sigma(image: np.ndarray, slices: int = NOISE_SLICES) -> float:
    """The image's noise standard deviation (image units), by Immerkaer's method (J. Immerkaer,
    "Fast noise variance estimation", CVIU 1996): the mean absolute response to the difference
    of two Laplacians, which cancels smooth structure, scaled by sqrt(pi/2) / 6; the median over
    ``slices`` evenly spaced axial slices (robust to a few slices of air or metal).

    Args:
        image: The image, (z, y, x), in its units.
        slices: How many axial slices to estimate on (all of them when the image has fewer).

    Returns:
        The standard deviation in image units; NaN for slices under 3 x 3 voxels.
    """
    kernel = np.array([[1.0, -2.0, 1.0], [-2.0, 4.0, -2.0], [1.0, -2.0, 1.0]])
    depth, height, width = image.shape
    if height < 3 or width < 3:
        return float("nan")
    chosen = np.unique(np.linspace(0, depth - 1, min(slices, depth)).round().astype(int))
    estimates = []
    for z in chosen:
        plane = np.asarray(image[z], dtype=np.float64)
        response = ndimage.convolve(plane, kernel, mode="nearest")[1:-1, 1:-1]
        estimates.append(math.sqrt(math.pi / 2.0) * np.abs(response).mean() / 6.0)
    return float(np.median(estimates))


def body_voxels(image: np.ndarray, modality: str = "") -> int | None:
    """Voxels of the patient's body, where a body mask is cheap: CT only (see
    :func:`looks_like_ct`; HU above :data:`CT_BODY_HU`, largest connected region, holes filled
    slice by slice, so the lungs and bowel gas count as body). Measured on every second voxel
    in-plane and scaled by 4. None otherwise (MR intensities have no fixed air level).

    Args:
        image: The image, (z, y, x) (HU for CT).
        modality: The declared modality (``"MR"``: None at once); empty: guessed.

    Returns:
        The body's voxel count on the full grid (an estimate), or None.
    """
    import cc3d

    if not looks_like_ct(image, modality):
        return None
    sampled = np.asarray(image[:, ::2, ::2]) > CT_BODY_HU
    if not sampled.any():
        return None
    body = cc3d.largest_k(sampled, k=1, connectivity=6) > 0
    filled = sum(int(ndimage.binary_fill_holes(plane).sum()) for plane in body)
    scale = (image.shape[1] / sampled.shape[1]) * (image.shape[2] / sampled.shape[2])
    return int(round(filled * scale))


def spacing_anisotropy(spacing: tuple[float, float, float]) -> float:
    """Largest over smallest voxel side (1 for isotropic voxels).

    Args:
        spacing: Voxel spacing in mm, (z, y, x).

    Returns:
        The ratio, at least 1.
    """
    return float(max(spacing) / min(spacing))
