"""DICOM-SEG in: the segments of a DICOM-SEG on an image's grid, with checks (one reader, for
the ``folder`` route's own data and the TCIA recipes alike).

Conventions
-----------
* The reference is a ``SimpleITK.Image`` (LPS) or a :class:`.dicom.DicomSeries`; masks are
  numpy bool arrays in SimpleITK array order ``(k, j, i)`` on its grid, the SEG's frames
  placed by their positions and resampled (nearest neighbour) when they lie on another grid.
* Refused in one line (:class:`intrabench.errors.DataError`), before anything large is
  decoded or allocated: a header declaring more frames than segments x slices can hold or
  other frames than it describes, pixel data shorter than declared, frames far outside the
  image or on a slice spacing far too small; with a :class:`.dicom.DicomSeries`, a SEG of
  another frame of reference or series, or referencing instances the series lacks.
* Overlapping segments are the caller's to judge (a label map holds one class per voxel:
  :mod:`.dicom_pairs` refuses chosen segments that overlap).
* pydicom decodes the frames (BINARY bit-packed or FRACTIONAL bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from .dicom import (
    DicomSeries,
    _check_instances,
    _check_pixel_data,
    _check_same_scan,
    _direction_matrix,
    _read_dicom_object,
)


def read_seg(
    path: str | Path, reference: sitk.Image | DicomSeries
) -> dict[int, tuple[str, np.ndarray]]:
    """Segments of a DICOM-SEG on ``reference``'s grid (nearest neighbour when its frames lie
    on another grid).

    BINARY and FRACTIONAL (above half the maximum fractional value) segmentations; frames may
    cover any subset of slices and segments. The declared frames are checked against the pixel
    data before anything is decoded; with a :class:`DicomSeries` the SEG must share its frame
    of reference, name it (when it names a series) and reference only its instances.

    Args:
        path: the SEG file.
        reference: the image (or series) whose grid the masks are on.

    Returns:
        ``{segment number: (segment label, bool mask (k, j, i))}``.
    """
    path = Path(path)
    series = reference if isinstance(reference, DicomSeries) else None
    reference = series.image if series is not None else reference
    ds = _read_dicom_object(path, "SEG", "DICOM-SEG")
    _check_seg_frames(path, ds, reference)
    if series is not None:
        frames = [str(ds.FrameOfReferenceUID)] if "FrameOfReferenceUID" in ds else []
        _check_same_scan(path, ds, frames, series)
        _check_instances(path, _seg_sources(ds), series, "its frames reference")
    try:
        pixels = np.asarray(ds.pixel_array)
    except Exception as error:  # noqa: BLE001
        raise DataError(f"{path.name}: cannot decode SEG pixel data ({error})") from None
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
        raise DataError(f"{path.name}: SEG lacks {name}")

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
            f"{path.name}: SEG frames do not share one in-plane origin (unsupported layout)"
        )
    _check_frames_on_image(path, distance, normal, slice_spacing, reference)
    n_slices = int(round((distance.max() - distance.min()) / slice_spacing)) + 1
    _check_seg_grid(
        path, n_slices * int(ds.Rows) * int(ds.Columns), slice_spacing, reference, pixels.size
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


def _check_seg_frames(path: Path, ds: Any, image: sitk.Image) -> None:
    """DataError for a SEG whose declared frames are not its pixel data's or more than one
    frame per segment and slice of the reference (a header that would allocate gigabytes)."""
    try:
        frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
        segments = len(ds.SegmentSequence)
        per_frame = ds.get_item("PerFrameFunctionalGroupsSequence")
    except (AttributeError, TypeError, ValueError) as error:
        raise DataError(f"{path.name}: malformed DICOM-SEG header ({str(error)[:120]})") from None
    most = max(segments, 1) * 4 * max(image.GetSize())  # any slicing of the reference's extent
    if frames < 1 or frames > most:
        raise DataError(
            f"{path.name}: declares {frames:,} frames; {segments} segment(s) over a "
            f"{' x '.join(str(v) for v in image.GetSize())} series hold at most "
            f"{most:,}: a damaged or hostile file; re-export the SEG"
        )
    if per_frame is not None and len(ds.PerFrameFunctionalGroupsSequence) != frames:
        raise DataError(
            f"{path.name}: declares {frames:,} frames but describes "
            f"{len(ds.PerFrameFunctionalGroupsSequence):,}; re-export the SEG"
        )
    _check_pixel_data(path, ds, slice_of_series=False)


def _seg_sources(ds: Any) -> list[str]:
    """The SOP instance UIDs a SEG's frames (or its ReferencedSeriesSequence) reference."""
    uids: list[str] = []
    for group in getattr(ds, "PerFrameFunctionalGroupsSequence", []):
        for derivation in getattr(group, "DerivationImageSequence", []):
            for source in getattr(derivation, "SourceImageSequence", []):
                uids.append(str(source.ReferencedSOPInstanceUID))
    if not uids:
        for item in getattr(ds, "ReferencedSeriesSequence", []):
            uids += [
                str(i.ReferencedSOPInstanceUID)
                for i in getattr(item, "ReferencedInstanceSequence", [])
            ]
    return uids
