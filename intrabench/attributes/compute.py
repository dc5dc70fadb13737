"""All attributes of every target of one case (see :mod:`intrabench.attributes.catalogue`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from intrabench.attributes import intensity, shape
from intrabench.attributes.catalogue import ATTRIBUTES
from intrabench.types import Case, Target

#: Bump when a definition changes: cached attributes of another version are computed again.
VERSION = 1


def image_attributes(case: Case, modality: str = "") -> dict[str, Any]:
    """Attributes of the image itself (shared by its targets), plus ``body_voxels``.

    Args:
        case: The loaded case; its image array is (z, y, x), spacing in mm.
        modality: The dataset's modality (``"MR"``: no body mask); empty: guessed from the
            intensities.

    Returns:
        ``spacing_anisotropy`` (largest over smallest voxel side), ``noise`` (image units) and
        ``body_voxels`` (an int, or None where no body mask is measured).
    """
    image = np.asarray(case.image.array)
    return {
        "spacing_anisotropy": intensity.spacing_anisotropy(case.image.spacing),
        "noise": intensity.noise_sigma(image),
        "body_voxels": intensity.body_voxels(image, modality),
    }


def empty_target() -> dict[str, Any]:
    """The attributes of a target absent from the label map: volume 0, the rest missing.

    Returns:
        Every attribute of the catalogue: counts and flags 0 / False, volume and coverage 0,
        the rest NaN.
    """
    values: dict[str, Any] = {spec.name: float("nan") for spec in ATTRIBUTES}
    values.update(
        volume_ml=0.0,
        coverage_image=0.0,
        coverage_body=0.0,
        components=0,
        cavities=0,
        slices_with_holes=0,
        multiple_regions=False,
        has_holes=False,
        touches_border=False,
        extent_slices=0,
    )
    return values


def target_attributes(case: Case, target: Target, image: dict[str, Any]) -> dict[str, Any]:
    """Every per-target attribute of ``target`` (``image``: :func:`image_attributes`).

    Args:
        case: The loaded case (image and integer label map, (z, y, x), spacing in mm).
        target: One of its targets (its ``label_value`` in the label map).
        image: The case's :func:`image_attributes`.

    Returns:
        Attribute name -> value for every attribute of the catalogue (:func:`empty_target`'s
        values for a target with no voxel).
    """
    values = empty_target()
    values.update(spacing_anisotropy=image["spacing_anisotropy"], noise=image["noise"])
    box = case.target_box(target)
    if box is None:
        return values
    spacing = tuple(float(s) for s in case.image.spacing)
    full_shape = tuple(int(n) for n in np.shape(case.label))
    cropped = np.asarray(case.label[box]) == target.label_value
    voxels = int(cropped.sum())
    if voxels == 0:
        return values
    volume_mm3 = voxels * float(np.prod(spacing))
    area = shape.surface_area_mm2(cropped, spacing)
    components = shape.count_components(cropped)
    holes = shape.slices_with_holes(cropped)
    com = shape.centre_of_mass(cropped, box, full_shape)
    body = image["body_voxels"]
    stats = intensity.contrast(
        np.asarray(case.image.array), case.label, target.label_value, box, spacing
    )
    values.update(
        volume_ml=shape.volume_ml(voxels, spacing),
        coverage_image=voxels / float(np.prod(full_shape)),
        coverage_body=voxels / body if body else float("nan"),
        components=components,
        multiple_regions=components > 1,
        cavities=shape.count_cavities(cropped),
        slices_with_holes=holes,
        has_holes=holes > 0,
        com_z=com[0],
        com_y=com[1],
        com_x=com[2],
        surface_mm2=area,
        sphericity=shape.sphericity(volume_mm3, area),
        elongation=shape.elongation(cropped, spacing),
        extent_slices=shape.extent_slices(box),
        contrast=stats.contrast,
        cnr=stats.cnr,
        heterogeneity=stats.inside_std,
        touches_border=shape.touches_border(box, full_shape),
    )
    return values


def case_attributes(case: Case, modality: str = "") -> dict[str, dict[str, Any]]:
    """Attributes of every target of ``case``, by target id (plain Python values, JSON-able;
    missing values are NaN).

    Args:
        case: The loaded case.
        modality: The dataset's modality (see :func:`image_attributes`).

    Returns:
        Target id -> attribute name -> value (bool, int or float).
    """
    image = image_attributes(case, modality)
    found = {}
    for target in case.targets:
        values = target_attributes(case, target, image)
        found[target.target_id] = {name: _plain(value) for name, value in values.items()}
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else float("nan")
