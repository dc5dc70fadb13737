"""Conversions used by the dataset recipes: DICOM series, DICOM-SEG and RTSTRUCT to SimpleITK
images, rigid multi-modal registration, label helpers and atomic NIfTI writing.

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

from intrabench.components import connected_components
from intrabench.errors import DataError
from intrabench.io.volume import read_sitk


def _pydicom():
    try:
        import pydicom
    except ImportError:  # pragma: no cover - dependency problem
        raise DataError("reading DICOM needs pydicom: pip install pydicom highdicom") from None
    return pydicom


# -- DICOM image series ---------------------------------------------------------------------
def read_dicom_series(folder: str | Path, series_uid: str | None = None) -> sitk.Image:
    """Read one DICOM image series (CT/MR) from ``folder`` with SimpleITK.

    Checks that the slices are equally spaced along the slice normal (a missing or duplicated
    slice would silently distort the geometry) and that the pixel data can be decoded.
    """
    folder = Path(folder)
    reader = sitk.ImageSeriesReader()
    uids = reader.GetGDCMSeriesIDs(str(folder))
    if not uids:
        raise DataError(f"{folder.name}: no readable DICOM series")
    if series_uid is None:
        if len(uids) > 1:
            raise DataError(f"{folder.name}: {len(uids)} series in one folder; name one")
        series_uid = uids[0]
    elif series_uid not in uids:
        raise DataError(f"{folder.name}: series {series_uid} not found")
    files = reader.GetGDCMSeriesFileNames(str(folder), series_uid)
    if len(files) < 2:
        raise DataError(f"{folder.name}: series has {len(files)} slice(s); need a 3D volume")
    pydicom = _pydicom()
    positions = []
    for name in files:
        try:  # values over 1 KiB (the pixel data) are not read, only their place and size
            header = pydicom.dcmread(name, defer_size=1024)
            orientation = np.asarray(header.ImageOrientationPatient, dtype=float)
            positions.append(np.asarray(header.ImagePositionPatient, dtype=float))
        except Exception as error:  # noqa: BLE001 - any unreadable header is a bad case
            raise DataError(f"{folder.name}: unreadable DICOM header in {Path(name).name}: "
                            f"{error}") from None
        _check_pixel_data(Path(name), header)
    normal = np.cross(orientation[:3], orientation[3:])
    distances = np.sort(np.asarray(positions) @ normal)
    steps = np.diff(distances)
    if steps.size and (steps.min() <= 1e-4 or (steps.max() - steps.min()) > 0.01 * steps.max() + 1e-3):
        raise DataError(f"{folder.name}: slices are not equally spaced (steps "
                        f"{steps.min():.3f}..{steps.max():.3f} mm): missing or duplicate slices")
    _check_every_slice_listed(folder, series_uid, files)  # a cut first or last slice
    reader.SetFileNames(files)
    try:
        image = reader.Execute()
    except RuntimeError as error:
        last = str(error).strip().splitlines()[-1] if str(error).strip() else "unknown error"
        raise DataError(f"{folder.name}: cannot decode the DICOM series: {last}") from None
    return image


def _check_pixel_data(path: Path, header: Any) -> None:
    """DataError when a slice's uncompressed pixel data is shorter than its rows x columns x
    samples x bits (x frames) need, or runs past the end of its file: GDCM decoded such a
    slice with its missing pixels as 0 (0 HU in a CT). Compressed (encapsulated) pixel data
    is left to the decoder."""
    try:
        element = header.get_item("PixelData", keep_deferred=True)
        rows, columns = int(header.Rows), int(header.Columns)
        bits = int(header.BitsAllocated)
        samples = int(getattr(header, "SamplesPerPixel", 1) or 1)
        frames = int(getattr(header, "NumberOfFrames", 1) or 1)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise DataError(f"{path.parent.name}: {path.name} lacks its image description "
                        f"({error}); re-download the series") from None
    if element is None:
        raise DataError(f"{path.parent.name}: {path.name} holds no pixel data; re-download "
                        "the series")
    length = getattr(element, "length", None)
    if length is None:  # a value already read: its bytes
        length = len(element.value or b"")
    if length == 0xFFFFFFFF:  # undefined length: encapsulated (compressed) fragments
        return
    needed = (rows * columns * samples * frames * bits + 7) // 8
    tell = getattr(element, "value_tell", None)
    size = path.stat().st_size
    if length < needed or (tell is not None and tell + length > size):
        present = min(length, size - tell) if tell is not None else length
        raise DataError(f"{path.parent.name}: {path.name}: truncated pixel data: {present} "
                        f"bytes where {rows} x {columns} pixels of {bits} bits need {needed} "
                        "(the missing pixels would be read as 0); re-download the series")


def _check_every_slice_listed(folder: Path, series_uid: str, files: Any) -> None:
    """DataError when a file of the series in ``folder`` is not among the ``files`` GDCM
    lists (a cut file: GDCM leaves it out, and a cut first or last slice made the volume one
    slice shorter without a word)."""
    pydicom = _pydicom()
    listed = {Path(name).resolve() for name in files}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file() or path.resolve() in listed:
            continue
        try:
            uid = str(pydicom.dcmread(str(path), stop_before_pixels=True).SeriesInstanceUID)
        except Exception:  # noqa: BLE001 - not a DICOM file of this series: not ours
            continue
        if uid == series_uid:
            raise DataError(f"{folder.name}: {path.name} belongs to the series but cannot be "
                            "read as a slice (a cut or damaged file); re-download the series")


def dicom_header(path: str | Path) -> Any:
    """pydicom dataset without pixel data."""
    try:
        return _pydicom().dcmread(str(path), stop_before_pixels=True)
    except Exception as error:  # noqa: BLE001
        raise DataError(f"{Path(path).name}: not a readable DICOM file ({error})") from None


def _read_dicom_object(path: str | Path, modality: str, what: str) -> Any:
    """The full pydicom dataset at ``path``; DataError unless it reads and has ``modality``."""
    try:
        ds = _pydicom().dcmread(str(path))
    except Exception as error:  # noqa: BLE001
        raise DataError(f"{Path(path).name}: not a readable {what} ({error})") from None
    if getattr(ds, "Modality", "") != modality:
        raise DataError(f"{Path(path).name}: modality {getattr(ds, 'Modality', '?')}, not {modality}")
    return ds


# -- DICOM-SEG ------------------------------------------------------------------------------
def _direction_matrix(image: sitk.Image) -> np.ndarray:
    return np.asarray(image.GetDirection(), dtype=float).reshape(3, 3)


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
    labels = {int(s.SegmentNumber): str(getattr(s, "SegmentLabel", s.SegmentNumber))
              for s in ds.SegmentSequence}
    shared = ds.SharedFunctionalGroupsSequence[0] if "SharedFunctionalGroupsSequence" in ds else None
    per_frame = ds.PerFrameFunctionalGroupsSequence

    def item(frame_group, name):
        if name in frame_group:
            return getattr(frame_group, name)[0]
        if shared is not None and name in shared:
            return getattr(shared, name)[0]
        raise DataError(f"{Path(path).name}: SEG lacks {name}")

    orientation = np.asarray(item(per_frame[0], "PlaneOrientationSequence").ImageOrientationPatient,
                             dtype=float)
    measures = item(per_frame[0], "PixelMeasuresSequence")
    row_spacing, col_spacing = (float(v) for v in measures.PixelSpacing)
    row_cos, col_cos = orientation[:3], orientation[3:]
    normal = np.cross(row_cos, col_cos)
    positions = np.asarray([item(g, "PlanePositionSequence").ImagePositionPatient
                            for g in per_frame], dtype=float)
    segments = np.asarray([int(item(g, "SegmentIdentificationSequence").ReferencedSegmentNumber)
                           for g in per_frame])
    distance = positions @ normal
    slice_spacing = _slice_spacing(distance, normal, measures, reference)
    first = positions[int(np.argmin(distance))]
    in_plane = positions - first - np.outer(distance - distance.min(), normal)
    if np.abs(in_plane).max(initial=0.0) > 0.01 * min(row_spacing, col_spacing) + 1e-3:
        raise DataError(f"{Path(path).name}: SEG frames do not share one in-plane origin "
                        "(unsupported layout)")
    _check_frames_on_image(Path(path), distance, normal, slice_spacing, reference)
    n_slices = int(round((distance.max() - distance.min()) / slice_spacing)) + 1
    _check_seg_grid(Path(path), n_slices * int(ds.Rows) * int(ds.Columns), slice_spacing,
                    reference, pixels.size)
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
        resampled = sitk.Resample(seg_image, reference, sitk.Transform(),
                                  sitk.sitkNearestNeighbor, 0, sitk.sitkUInt8)
        result[number] = (label, sitk.GetArrayFromImage(resampled).astype(bool))
    return result


def _image_extent(reference: sitk.Image, normal: np.ndarray) -> tuple[float, float]:
    """(lowest, highest) position along ``normal`` (mm) of ``reference``'s voxels' outer
    faces: the extent of its grid seen along a SEG's frame normal."""
    size = reference.GetSize()
    corners = [reference.TransformContinuousIndexToPhysicalPoint(
        [(-0.5 if low else n - 0.5) for low, n in zip(choice, size)])
        for choice in np.ndindex(2, 2, 2)]
    along = np.asarray(corners, dtype=float) @ normal
    return float(along.min()), float(along.max())


def _check_frames_on_image(path: Path, distance: np.ndarray, normal: np.ndarray,
                           slice_spacing: float, reference: sitk.Image) -> None:
    """DataError when a SEG frame lies outside the image's grid along the frames' normal
    (more than a frame spacing past its outer voxels), before the SEG's own grid is
    allocated: a frame 1 km away made it 1 GB for a 40 KB file (a MemoryError at 256 px)."""
    low, high = _image_extent(reference, normal)
    margin = max(slice_spacing, 1e-3)
    outside = np.flatnonzero((distance < low - margin) | (distance > high + margin))
    if outside.size:
        frame = int(outside[0])
        away = float(max(low - distance[frame], distance[frame] - high))
        raise DataError(f"{path.name}: SEG frame {frame + 1} lies {away:.1f} mm outside the "
                        f"image's slices ({outside.size} frame(s) outside its grid): a SEG of "
                        "another image, or a damaged frame position")


#: how many times the image's voxels a SEG's own grid may hold before it is refused
SEG_GRID_FACTOR = 8


def _check_seg_grid(path: Path, voxels: int, slice_spacing: float,
                    reference: sitk.Image, decoded: int) -> None:
    """DataError when the SEG's own grid (frames' extent over ``slice_spacing``, by rows and
    columns) would hold more than :data:`SEG_GRID_FACTOR` times the image's voxels or the
    ``decoded`` frame pixels (a slice spacing that is far too small), before it is
    allocated."""
    image_voxels = int(np.prod(reference.GetSize(), dtype=np.int64))
    if voxels > SEG_GRID_FACTOR * max(image_voxels, decoded, 1):
        raise DataError(f"{path.name}: the SEG's frames span {voxels:,} voxels at a slice "
                        f"spacing of {slice_spacing:g} mm, more than {SEG_GRID_FACTOR} times "
                        f"the image's {image_voxels:,}: a damaged slice spacing")


def _slice_spacing(distance: np.ndarray, normal: np.ndarray, measures: Any,
                   reference: sitk.Image) -> float:
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


# -- RTSTRUCT -------------------------------------------------------------------------------
def read_rtstruct(path: str | Path, reference: sitk.Image) -> dict[str, np.ndarray]:
    """ROIs of an RTSTRUCT rasterised on ``reference``'s grid: ``{ROI name: bool (k, j, i)}``.

    Closed planar contours are filled slice by slice (pixel centres inside the polygon);
    contours on the same slice combine by even-odd rule, so inner contours make holes. The
    reference must be an axial-like series whose slices are the contour planes.
    """
    from skimage.draw import polygon

    ds = _read_dicom_object(path, "RTSTRUCT", "RTSTRUCT")
    names = {int(r.ROINumber): str(r.ROIName) for r in ds.StructureSetROISequence}
    size = reference.GetSize()
    matrix = _direction_matrix(reference) @ np.diag(reference.GetSpacing())
    inverse = np.linalg.inv(matrix)
    origin = np.asarray(reference.GetOrigin(), dtype=float)
    result: dict[str, np.ndarray] = {}
    for roi in getattr(ds, "ROIContourSequence", []):
        name = names.get(int(roi.ReferencedROINumber), str(roi.ReferencedROINumber))
        mask = np.zeros((size[2], size[1], size[0]), dtype=bool)
        for contour in getattr(roi, "ContourSequence", []):
            if str(getattr(contour, "ContourGeometricType", "CLOSED_PLANAR")) not in (
                    "CLOSED_PLANAR", "CLOSEDPLANAR"):
                continue
            points = np.asarray(contour.ContourData, dtype=float).reshape(-1, 3)
            index = (points - origin) @ inverse.T
            k = int(np.rint(index[:, 2].mean()))
            if np.abs(index[:, 2] - k).max() > 0.5 or not 0 <= k < size[2]:
                continue  # not on a slice of this grid
            rows, cols = polygon(index[:, 1], index[:, 0], shape=(size[1], size[0]))
            filled = np.zeros((size[1], size[0]), dtype=bool)
            filled[rows, cols] = True
            mask[k] ^= filled
        result[name] = mask
    return result


# -- registration ---------------------------------------------------------------------------
def register_rigid(fixed: sitk.Image, moving: sitk.Image, *, iterations: int = 200,
                   sampling: float = 0.25, seed: int = 0) -> sitk.Transform:
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
        sitk.Euler3DTransform(), sitk.CenteredTransformInitializerFilter.MOMENTS)
    method = sitk.ImageRegistrationMethod()
    method.SetMetricAsMattesMutualInformation(numberOfHistogramBins=32)
    method.SetMetricSamplingStrategy(method.RANDOM)
    method.SetMetricSamplingPercentage(sampling, seed)
    method.SetInterpolator(sitk.sitkLinear)
    method.SetOptimizerAsRegularStepGradientDescent(learningRate=1.0, minStep=1e-4,
                                                    numberOfIterations=iterations,
                                                    relaxationFactor=0.5)
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
def instances_from_mask(mask: np.ndarray, connectivity: int = 26, min_voxels: int = 0,
                        dilation: int = 0) -> np.ndarray:
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


def paint_smallest_last(masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
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
    return (a.GetSize() == b.GetSize()
            and np.allclose(a.GetSpacing(), b.GetSpacing(), atol=tolerance)
            and np.allclose(a.GetOrigin(), b.GetOrigin(), atol=tolerance * 10)
            and np.allclose(a.GetDirection(), b.GetDirection(), atol=tolerance))


def write_image(image: sitk.Image, path: str | Path) -> None:
    """Write atomically (temporary name, then rename), compressed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial.nii.gz")
    sitk.WriteImage(image, str(temporary), useCompression=True)
    temporary.replace(path)
