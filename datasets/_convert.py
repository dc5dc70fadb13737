"""Conversions used by the dataset recipes: DICOM-SEG to SimpleITK images (DICOM series and
RTSTRUCT: :mod:`.dicom`, the public readers, named here too), rigid multi-modal registration,
label helpers and atomic NIfTI writing.

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
from typing import Any

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError
from intrabench.io.volume import read_sitk
from intrabench.masks import connected_components

from .dicom import (  # noqa: F401 - the public DICOM readers, named here for the recipes
    _direction_matrix,
    _read_dicom_object,
    dicom_header,
    read_dicom_series,
    read_rtstruct,
)


# -- DICOM-SEG ------------------------------------------------------------------------------
def read_seg(path: str | Path, reference: sitk.Image) -> dict[int, tuple[str, np.ndarray]]:
    """Segments of a DICOM-SEG resampled (nearest neighbour) onto ``reference``'s grid.

    Returns ``{segment number: (segment label, bool mask (k, j, i))}``. BINARY and FRACTIONAL
    (threshold at half the maximum fractional value) segmentations are supported; frames may
    cover any subset of slices and segments.
    """
    ds = _read_dicom_object(path, "SEG", "DICOM-SEG")
    try:
        pixels = np.asarray(ds.pixel_array)
    except Exception as error:  # noqa: BLE001
        raise DataError(f"{Path(path).name}: cannot decode SEG pixel data ({error})") from None
    frames = int(getattr(ds, "NumberOfFrames", 1))
    pixels = pixels.reshape(frames, int(ds.Rows), int(ds.Columns))
    if str(getattr(ds, "SegmentationType", "BINARY")) == "FRACTIONAL":
        pixels = pixels > float(getattr(ds, "MaximumFractionalValue", 255)) / 2
    pixels = pixels.astype(bool)
    labels = {
        int(s.SegmentNumber): str(getattr(s, "SegmentLabel", s.SegmentNumber))
        for s in ds.SegmentSequence
    }
    shared = (
        ds.SharedFunctionalGroupsSequence[0] if "SharedFunctionalGroupsSequence" in ds else None
    )
    per_frame = ds.PerFrameFunctionalGroupsSequence

    def item(frame_group, name):
        if name in frame_group:
            return getattr(frame_group, name)[0]
        if shared is not None and name in shared:
            return getattr(shared, name)[0]
        raise DataError(f"{Path(path).name}: SEG lacks {name}")

    orientation = np.asarray(
        item(per_frame[0], "PlaneOrientationSequence").ImageOrientationPatient, dtype=float
    )
    measures = item(per_frame[0], "PixelMeasuresSequence")
    row_spacing, col_spacing = (float(v) for v in measures.PixelSpacing)
    row_cos, col_cos = orientation[:3], orientation[3:]
    normal = np.cross(row_cos, col_cos)
    positions = np.asarray(
        [item(g, "PlanePositionSequence").ImagePositionPatient for g in per_frame], dtype=float
    )
    segments = np.asarray(
        [int(item(g, "SegmentIdentificationSequence").ReferencedSegmentNumber) for g in per_frame]
    )
    distance = positions @ normal
    slice_spacing = _slice_spacing(distance, normal, measures, reference)
    first = positions[int(np.argmin(distance))]
    in_plane = positions - first - np.outer(distance - distance.min(), normal)
    if np.abs(in_plane).max(initial=0.0) > 0.01 * min(row_spacing, col_spacing) + 1e-3:
        raise DataError(
            f"{Path(path).name}: SEG frames do not share one in-plane origin (unsupported layout)"
        )
    _check_frames_on_image(Path(path), distance, normal, slice_spacing, reference)
    n_slices = int(round((distance.max() - distance.min()) / slice_spacing)) + 1
    _check_seg_grid(
        Path(path), n_slices * int(ds.Rows) * int(ds.Columns), slice_spacing, reference, pixels.size
    )
    k_index = np.rint((distance - distance.min()) / slice_spacing).astype(int)
    direction = np.column_stack([row_cos, col_cos, normal])
    result: dict[int, tuple[str, np.ndarray]] = {}
    for number, label in sorted(labels.items()):
        volume = np.zeros((n_slices, int(ds.Rows), int(ds.Columns)), dtype=np.uint8)
        for frame in np.flatnonzero(segments == number):
            volume[k_index[frame]] |= pixels[frame]
        seg_image = sitk.GetImageFromArray(volume)
        seg_image.SetSpacing((col_spacing, row_spacing, slice_spacing))
        seg_image.SetOrigin(tuple(float(v) for v in first))
        seg_image.SetDirection(tuple(float(v) for v in direction.flatten()))
        resampled = sitk.Resample(
            seg_image, reference, sitk.Transform(), sitk.sitkNearestNeighbor, 0, sitk.sitkUInt8
        )
        result[number] = (label, sitk.GetArrayFromImage(resampled).astype(bool))
    return result


def _image_extent(reference: sitk.Image, normal: np.ndarray) -> tuple[float, float]:
    """(lowest, highest) position along ``normal`` (mm) of ``reference``'s voxels' outer
    faces: the extent of its grid seen along a SEG's frame normal."""
    size = reference.GetSize()
    corners = [
        reference.TransformContinuousIndexToPhysicalPoint(
            [(-0.5 if low else n - 0.5) for low, n in zip(choice, size)]
        )
        for choice in np.ndindex(2, 2, 2)
    ]
    along = np.asarray(corners, dtype=float) @ normal
    return float(along.min()), float(along.max())


def _check_frames_on_image(
    path: Path,
    distance: np.ndarray,
    normal: np.ndarray,
    slice_spacing: float,
    reference: sitk.Image,
) -> None:
    """DataError when a SEG frame lies outside the image's grid along the frames' normal
    (more than a frame spacing past its outer voxels), before the SEG's own grid is
    allocated: a frame 1 km away made it 1 GB for a 40 KB file (a MemoryError at 256 px)."""
    low, high = _image_extent(reference, normal)
    margin = max(slice_spacing, 1e-3)
    outside = np.flatnonzero((distance < low - margin) | (distance > high + margin))
    if outside.size:
        frame = int(outside[0])
        away = float(max(low - distance[frame], distance[frame] - high))
        raise DataError(
            f"{path.name}: SEG frame {frame + 1} lies {away:.1f} mm outside the "
            f"image's slices ({outside.size} frame(s) outside its grid): a SEG of "
            "another image, or a damaged frame position"
        )


#: how many times the image's voxels a SEG's own grid may hold before it is refused
SEG_GRID_FACTOR = 8


def _check_seg_grid(
    path: Path, voxels: int, slice_spacing: float, reference: sitk.Image, decoded: int
) -> None:
    """DataError when the SEG's own grid (frames' extent over ``slice_spacing``, by rows and
    columns) would hold more than :data:`SEG_GRID_FACTOR` times the image's voxels or the
    ``decoded`` frame pixels (a slice spacing that is far too small), before it is
    allocated."""
    image_voxels = int(np.prod(reference.GetSize(), dtype=np.int64))
    if voxels > SEG_GRID_FACTOR * max(image_voxels, decoded, 1):
        raise DataError(
            f"{path.name}: the SEG's frames span {voxels:,} voxels at a slice "
            f"spacing of {slice_spacing:g} mm, more than {SEG_GRID_FACTOR} times "
            f"the image's {image_voxels:,}: a damaged slice spacing"
        )


def _slice_spacing(
    distance: np.ndarray, normal: np.ndarray, measures: Any, reference: sitk.Image
) -> float:
    """Spacing of the SEG's frame planes along their normal.

    Frames without foreground are usually omitted, so the smallest gap between frames can be
    a multiple of the true spacing (a lesion on slices 3 and 5 only). Prefer the declared
    SpacingBetweenSlices, then the reference's slice spacing when its slices are parallel to
    the frames; accept a candidate only if every frame lies on its lattice.
    """
    offsets = distance - distance.min()
    candidates = []
    declared = getattr(measures, "SpacingBetweenSlices", None)
    if declared:
        candidates.append(float(declared))
    reference_normal = _direction_matrix(reference)[:, 2]
    if abs(float(reference_normal @ normal)) > 0.999:
        candidates.append(float(reference.GetSpacing()[2]))
    unique = np.unique(np.round(offsets, 3))
    if unique.size > 1:
        candidates.append(float(np.min(np.diff(unique))))
    for candidate in candidates:
        if candidate > 0:
            steps = offsets / candidate
            if np.abs(steps - np.rint(steps)).max(initial=0.0) < 0.05:
                return candidate
    return candidates[-1] if candidates else float(getattr(measures, "SliceThickness", 1.0))


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
