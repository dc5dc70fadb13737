"""Conversions used by the dataset recipes: the DICOM readers (series, RTSTRUCT and DICOM-SEG:
:mod:`.dicom`, the public readers, named here too), rigid multi-modal
registration, label helpers and atomic NIfTI writing.

Conventions
-----------
* Images are ``SimpleITK.Image`` in LPS physical space; masks are returned as numpy arrays in
  SimpleITK array order ``(k, j, i)`` on the *reference* image's grid (the CT or MR series),
  so ``sitk.GetImageFromArray(mask)`` + ``CopyInformation(reference)`` gives the label image.
* Problems with one case raise :class:`intrabench.errors.DataError` with a one-line reason;
  the recipe skips and names that case, the rest of the preparation goes on.
* pydicom is imported lazily (only recipes that read DICOM need it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError
from intrabench.io.volume import read_sitk
from intrabench.masks import connected_components

from .dicom import (  # noqa: F401 - the public DICOM readers, named here for the recipes
    dicom_header,
    read_dicom_series,
    read_rtstruct,
    read_seg,
)


# -- registration ---------------------------------------------------------------------------
def register_rigid(
    fixed: sitk.Image,
    moving: sitk.Image,
    *,
    iterations: int = 200,
    sampling: float = 0.25,
    seed: int = 0,
) -> sitk.Transform:
    """Rigid (Euler 3D) transform mapping ``fixed`` physical points to ``moving`` ones.

    Mattes mutual information (multi-modal, e.g. MR fixed / CT moving), moments (centre of
    gravity) initialisation, regular-step gradient descent, 3-level pyramid. Random metric
    sampling uses ``seed`` so the result is reproducible.
    """
    fixed_f = sitk.Cast(fixed, sitk.sitkFloat32)
    moving_f = sitk.Cast(moving, sitk.sitkFloat32)
    # centre of gravity of intensities shifted to be non-negative (CT air at -1000 weighs 0)
    initial = sitk.CenteredTransformInitializer(
        fixed_f - float(sitk.GetArrayViewFromImage(fixed_f).min()),
        moving_f - float(sitk.GetArrayViewFromImage(moving_f).min()),
        sitk.Euler3DTransform(),
        sitk.CenteredTransformInitializerFilter.MOMENTS,
    )
    method = sitk.ImageRegistrationMethod()
    method.SetMetricAsMattesMutualInformation(numberOfHistogramBins=32)
    method.SetMetricSamplingStrategy(method.RANDOM)
    method.SetMetricSamplingPercentage(sampling, seed)
    method.SetInterpolator(sitk.sitkLinear)
    method.SetOptimizerAsRegularStepGradientDescent(
        learningRate=1.0, minStep=1e-4, numberOfIterations=iterations, relaxationFactor=0.5
    )
    method.SetOptimizerScalesFromPhysicalShift()
    method.SetShrinkFactorsPerLevel([4, 2, 1])
    method.SetSmoothingSigmasPerLevel([2.0, 1.0, 0.0])
    method.SmoothingSigmasAreSpecifiedInPhysicalUnitsOff()
    method.SetInitialTransform(initial, inPlace=False)
    try:
        return method.Execute(fixed_f, moving_f)
    except RuntimeError as error:
        raise DataError(f"registration failed: {str(error).strip().splitlines()[-1]}") from None


def warp_mask(mask: sitk.Image, reference: sitk.Image, transform: sitk.Transform) -> np.ndarray:
    """Resample a mask onto ``reference`` through ``transform`` (nearest neighbour), (k, j, i)."""
    warped = sitk.Resample(mask, reference, transform, sitk.sitkNearestNeighbor, 0, sitk.sitkUInt8)
    return sitk.GetArrayFromImage(warped) > 0


# -- labels ---------------------------------------------------------------------------------
def instances_from_mask(
    mask: np.ndarray, connectivity: int = 26, min_voxels: int = 0, dilation: int = 0
) -> np.ndarray:
    """Instance ids 1..K (uint16) of the connected components of a binary mask.

    ``dilation`` > 0 groups components closer than that many voxels (components are found on
    the dilated mask, then restricted to the original voxels). Components smaller than
    ``min_voxels`` are dropped; ids are consecutive, ordered by first voxel in (k, j, i) order.
    """
    mask = np.asarray(mask, dtype=bool)
    grouped = mask
    if dilation > 0:
        from scipy import ndimage

        structure = ndimage.generate_binary_structure(3, 3)
        grouped = ndimage.binary_dilation(mask, structure, iterations=dilation)
    labelled = connected_components(grouped, connectivity=connectivity)
    labelled = np.where(mask, labelled, 0)
    out = np.zeros(mask.shape, dtype=np.uint16)
    next_id = 1
    values, counts = np.unique(labelled[labelled > 0], return_counts=True)
    keep = {int(v) for v, c in zip(values, counts) if c >= min_voxels}
    flat = labelled.ravel()
    nonzero = flat[flat > 0]
    _, first = np.unique(nonzero, return_index=True)
    order = [int(v) for v in nonzero[np.sort(first)] if int(v) in keep]
    for value in order:
        out[labelled == value] = next_id
        next_id += 1
    return out


def rank_values(label: np.ndarray) -> np.ndarray:
    """Map the distinct non-zero values of a label map to their ranks 1..K (uint16)."""
    values = np.unique(label)
    values = values[values != 0]
    out = np.zeros(label.shape, dtype=np.uint16)
    for rank, value in enumerate(values, start=1):
        out[label == value] = rank
    return out


def paint_smallest_last(
    masks: dict[int, np.ndarray], shape: tuple[int, ...]
) -> tuple[np.ndarray, int]:
    """Combine possibly overlapping masks into one map ``{label value: mask}``.

    Larger structures are painted first and smaller ones on top, so small organs (lens,
    chiasm) are never erased by the large ones that contain them. Returns the map and the
    number of voxels claimed by more than one mask.
    """
    out = np.zeros(shape, dtype=np.uint16)
    count = np.zeros(shape, dtype=np.uint8)
    for value, mask in sorted(masks.items(), key=lambda item: (-int(item[1].sum()), item[0])):
        out[mask] = value
        count += mask.astype(np.uint8)
    return out, int((count > 1).sum())


def label_image(array: np.ndarray, reference: sitk.Image) -> sitk.Image:
    """A label image (uint8 or uint16) with ``reference``'s geometry from a (k, j, i) array."""
    dtype = np.uint8 if array.max(initial=0) < 256 else np.uint16
    image = sitk.GetImageFromArray(np.ascontiguousarray(array, dtype=dtype))
    image.CopyInformation(reference)
    return image


def read_image(path: str | Path) -> sitk.Image:
    """Read a 3D image file (NIfTI, NRRD, MHA...) with SimpleITK; DataError if unreadable."""
    image = read_sitk(path)
    if image.GetDimension() != 3:
        raise DataError(f"{Path(path).name}: expected a 3D image, got {image.GetDimension()}D")
    return image


def same_grid(a: sitk.Image, b: sitk.Image, tolerance: float = 1e-3) -> bool:
    """Same size, and spacing/origin/direction equal within ``tolerance``."""
    return (
        a.GetSize() == b.GetSize()
        and np.allclose(a.GetSpacing(), b.GetSpacing(), atol=tolerance)
        and np.allclose(a.GetOrigin(), b.GetOrigin(), atol=tolerance * 10)
        and np.allclose(a.GetDirection(), b.GetDirection(), atol=tolerance)
    )


def write_image(image: sitk.Image, path: str | Path) -> None:
    """Write atomically (temporary name, then rename), compressed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial.nii.gz")
    sitk.WriteImage(image, str(temporary), useCompression=True)
    temporary.replace(path)
