"""DICOM in: image series, RTSTRUCT and DICOM-SEG, read with checks (the public readers).

The one place IntraBench reads DICOM: a ``folder`` spec whose images are series folders and
whose labels are RTSTRUCT or DICOM-SEG files (:mod:`.folder`), and the TCIA recipes
(:mod:`._dicom_recipe`) use these functions.

Conventions
-----------
* An image series: pydicom reads every slice's header once; slices are ordered by their
  position along the slice normal and checked for mixed orientations, duplicated and missing
  slices and uneven spacing; the voxels are read by numpy (:mod:`._dicom_pixels`, uncompressed
  slices) or SimpleITK's series reader (GDCM), the same image either way: a
  ``SimpleITK.Image`` in LPS physical space.
* DICOM-SEG: one reader (:func:`read_seg`) for own data and the recipes; frames placed by
  their positions on the reference grid.
* Masks are numpy bool arrays in SimpleITK array order ``(k, j, i)`` on the series' grid, so
  ``sitk.GetImageFromArray(mask)`` + ``CopyInformation(series.image)`` gives the label image.
* A label is matched to its series by Frame of Reference UID and by the series and instances
  it references; a mismatch is a :class:`intrabench.errors.DataError` (one line, what to do).
* Hostile files are refused before they cost memory or time: cut files, pixel data shorter
  than declared, more frames than a SEG over the series can hold, contours of more than
  :data:`MAX_CONTOUR_POINTS` points, coordinates that are not finite numbers.
* pydicom is imported lazily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._decimals import parse_decimals
from ._dicom_pixels import decode_series

#: DICOM modalities that hold labels, not images
LABEL_MODALITIES = ("SEG", "RTSTRUCT")
#: the most points one RTSTRUCT contour may have (a traced outline has hundreds to thousands)
MAX_CONTOUR_POINTS = 200_000
#: the most contour points of one RTSTRUCT in all
MAX_RTSTRUCT_POINTS = 5_000_000
#: values larger than this are left on disk while a header is read (pixel data, big contours)
_DEFER = 1 << 16


def _pydicom():
    try:
        import pydicom
    except ImportError:  # pragma: no cover - dependency problem
        raise DataError("reading DICOM needs pydicom: pip install pydicom highdicom") from None
    return pydicom


def shortened(items: list[str], limit: int = 5) -> str:
    """``"a, b, c ... and 7 more"``: a list for a message, saying when it is cut.

    Args:
        items: The names to list.
        limit: How many are shown before the count of the rest.

    Returns:
        The comma-separated names (``""`` for none).
    """
    shown = ", ".join(items[:limit])
    return shown + (f" ... and {len(items) - limit} more" if len(items) > limit else "")


def normal_name(name: str) -> str:
    """A ROI or segment name as matched: lower case, runs of spaces, ``-`` and ``_`` one ``_``
    (``"GTV-1"``, ``"gtv_1"`` and ``"GTV 1"`` are all ``"gtv_1"``).

    Args:
        name: A ROI name, segment label or class name (anything ``str`` accepts).

    Returns:
        The normalised name, without leading or trailing ``_``.
    """
    return re.sub(r"[\s_-]+", "_", str(name)).strip("_").lower()


# -- headers --------------------------------------------------------------------------------
def dicom_header(path: str | Path) -> Any:
    """pydicom dataset without pixel data; DataError when the file is not readable DICOM.

    Args:
        path: A DICOM file.

    Returns:
        Its header as a ``pydicom.Dataset`` (large values read on access).

    Raises:
        DataError: The file cannot be read as DICOM.
    """
    try:
        return _pydicom().dcmread(str(path), stop_before_pixels=True, defer_size=_DEFER)
    except Exception as error:  # noqa: BLE001
        raise DataError(f"{Path(path).name}: not a readable DICOM file ({error})") from None


def is_dicom_file(path: str | Path) -> bool:
    """Whether ``path`` is a file with the DICOM preamble (``DICM`` at byte 128).

    Args:
        path: Any path (a folder or a missing file is not DICOM).

    Returns:
        True when bytes 128-131 are ``DICM``.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(128)
            return handle.read(4) == b"DICM"
    except OSError:
        return False


def describe_dicom_file(path: str | Path) -> str:
    """What a DICOM file holds, for a message: ``"an RTSTRUCT (ROIs: GTV-1, BODY)"``,
    ``"one CT slice of series 1.2.3"``.

    Args:
        path: A DICOM file.

    Returns:
        A phrase naming an RTSTRUCT's ROIs, a SEG's segments, or an image slice's modality and
        series.

    Raises:
        DataError: The file cannot be read as DICOM.
    """
    header = dicom_header(path)
    modality = str(getattr(header, "Modality", "") or "?")
    if modality == "RTSTRUCT":
        names = [str(r.ROIName) for r in getattr(header, "StructureSetROISequence", [])]
        return f"an RTSTRUCT (ROIs: {shortened(names) or 'none'})"
    if modality == "SEG":
        names = [str(s.SegmentLabel) for s in getattr(header, "SegmentSequence", [])]
        return f"a DICOM-SEG (segments: {shortened(names) or 'none'})"
    return f"one {modality} slice of series {getattr(header, 'SeriesInstanceUID', '?')}"


# -- image series ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DicomSeries:
    """One image series as read: ``image`` (SimpleITK, LPS), the UIDs labels are matched by,
    ``sop_uids`` in slice order (``k`` of the image's array), ``files`` in the same order."""

    image: sitk.Image
    series_uid: str
    frame_of_reference_uid: str
    modality: str
    sop_uids: tuple[str, ...]
    files: tuple[Path, ...]


def read_series(folder: str | Path, series_uid: str | None = None) -> DicomSeries:
    """Read one DICOM image series (CT/MR) from ``folder``; DataError (one line) for a folder
    with no series or several, one slice, mixed orientations, a duplicated or missing slice,
    uneven spacing, a cut or undecodable slice.

    Every file's header is read once (pydicom, pixel data left on disk); the slices are sorted
    and checked, then their voxels are read by numpy (:mod:`._dicom_pixels`, the common
    uncompressed case) or, for any other encoding, by SimpleITK's series reader (GDCM) given
    the sorted files. Either way the image is SimpleITK's.

    Args:
        folder: the series folder (its other files, not DICOM or of other series, are named).
        series_uid: the series to read when the folder holds several.

    Returns:
        The :class:`DicomSeries` (image, UIDs, slice files in slice order).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; an image series is a folder of DICOM slices")
    by_series: dict[str, list[tuple[Path, Any]]] = {}
    unreadable: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        header = _slice_header(path)
        if header is _NOT_DICOM:
            continue
        if header is None:
            unreadable.append(path)
            continue
        uid = _uid(header, 0x0020000E)  # SeriesInstanceUID
        if uid:
            by_series.setdefault(str(uid), []).append((path, header))
    uids = list(by_series)
    if not uids:
        raise DataError(f"{folder.name}: no readable DICOM image series in {folder}")
    if series_uid is None:
        if len(uids) > 1:
            raise DataError(
                f"{folder.name}: {len(uids)} series in one folder ({shortened(uids, 3)});"
                " put each series in its own folder"
            )
        series_uid = uids[0]
    elif series_uid not in uids:
        raise DataError(f"{folder.name}: series {series_uid} not found")
    files = [path for path, _ in by_series[series_uid]]
    headers = [header for _, header in by_series[series_uid]]
    if str(getattr(headers[0], "Modality", "")) in LABEL_MODALITIES:
        raise DataError(
            f"{folder.name}: holds {describe_dicom_file(files[0])}, not an image "
            "series; give it as the label and the series it was drawn on as the image"
        )
    _check_unreadable(folder, series_uid, unreadable)
    for path, header in zip(files, headers):
        if "ImageOrientationPatient" not in header or "ImagePositionPatient" not in header:
            raise DataError(
                f"{folder.name}: unreadable DICOM header in {path.name}: no "
                "ImageOrientationPatient or ImagePositionPatient (not a slice of a 3D series)"
            )
        _check_pixel_data(path, header)
    if len(files) < 2:
        raise DataError(
            f"{folder.name}: the series has {len(files)} slice; a 3D volume needs the "
            "whole series (every slice file of it in this folder)"
        )
    order = _slice_order(folder, files, headers)
    files = [files[i] for i in order]
    headers = [headers[i] for i in order]
    image = decode_series(files, headers)
    if image is None:
        reader = sitk.ImageSeriesReader()
        reader.SetFileNames([str(path) for path in files])
        try:
            image = reader.Execute()
        except RuntimeError as error:
            last = str(error).strip().splitlines()[-1] if str(error).strip() else "unknown error"
            raise DataError(f"{folder.name}: cannot decode the DICOM series: {last}") from None
    first = headers[0]
    return DicomSeries(
        image=image,
        series_uid=str(series_uid),
        frame_of_reference_uid=str(getattr(first, "FrameOfReferenceUID", "")),
        modality=str(getattr(first, "Modality", "")),
        sop_uids=tuple(_uid(h, 0x00080018) or str(h.SOPInstanceUID) for h in headers),
        files=tuple(files),
    )


def read_dicom_series(folder: str | Path, series_uid: str | None = None) -> sitk.Image:
    """The image of :func:`read_series` (what the recipes need).

    Args:
        folder: The series folder.
        series_uid: The series to read when the folder holds several.

    Returns:
        The series' image (SimpleITK, LPS geometry).
    """
    return read_series(folder, series_uid).image


def _uid(header: Any, tag: int) -> str | None:
    """A UID element's value as pydicom gives it (its one NUL padding byte and spaces cut),
    read from its stored bytes (pydicom's conversion, per slice, took longer than the slice);
    None when absent or empty."""
    element = header.get_item(tag, keep_deferred=True)
    raw = getattr(element, "value", None)
    if isinstance(raw, bytes):
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            text = None
        if text is not None and "\\" not in text:
            return text.removesuffix("\0").strip() or None
    value = header.get(tag)
    return str(value.value) if value is not None and value.value else None


#: what :func:`_slice_header` returns for a file that is not DICOM (not a slice of any series)
_NOT_DICOM = object()


def _slice_header(path: Path) -> Any:
    """A file's pydicom header with its pixel data left on disk (values over 64 KiB are not
    read, only their place and size); ``_NOT_DICOM`` for a file without the DICOM preamble,
    None for a DICOM file that cannot be read whole (a cut or damaged file)."""
    if not is_dicom_file(path):
        return _NOT_DICOM
    try:
        return _read_plain_header(path)
    except Exception:  # noqa: BLE001 - pydicom's own reader has the last word
        pass
    try:
        return _pydicom().dcmread(str(path), defer_size=_DEFER)
    except Exception:  # noqa: BLE001 - judged by _check_unreadable once the series is known
        return None


#: Implicit and Explicit VR Little Endian: the encodings :func:`_read_plain_header` reads
_PLAIN_SYNTAXES = {b"1.2.840.10008.1.2": True, b"1.2.840.10008.1.2.1": False}


def _read_plain_header(path: Path) -> Any:
    """A slice's dataset read by pydicom's dataset reader (values over 64 KiB left on disk)
    after its file meta group, taken as stored: ``dcmread`` with its meta checks cost a third
    more. Raises for anything but a little-endian file, which ``dcmread`` then reads."""
    _pydicom()  # installed, or the one line that says so
    from pydicom.dataset import FileMetaDataset
    from pydicom.filereader import read_dataset

    with open(path, "rb") as handle:
        handle.seek(132)  # the preamble and b"DICM"
        meta = read_dataset(handle, False, True, stop_when=lambda tag, vr, length: tag.group != 2)
        syntax = getattr(meta.get_item(0x00020010), "value", b"")
        implicit = _PLAIN_SYNTAXES[bytes(syntax).rstrip(b"\0 ")]
        header = read_dataset(handle, implicit, True, defer_size=_DEFER)
    header.file_meta = FileMetaDataset(meta)
    header.filename = str(path)
    return header


def _check_unreadable(folder: Path, series_uid: str, unreadable: list[Path]) -> None:
    """DataError when a DICOM file of the series ``series_uid`` in ``folder`` cannot be read as
    a slice (a cut file: GDCM had left it out, and a cut first or last slice made the volume
    one slice shorter without a word). Unreadable files of no or another series are not ours."""
    for path in unreadable:
        try:
            uid = str(
                _pydicom()
                .dcmread(str(path), stop_before_pixels=True, defer_size=_DEFER)
                .SeriesInstanceUID
            )
        except Exception:  # noqa: BLE001 - not a DICOM file of this series: not ours
            continue
        if uid == series_uid:
            raise DataError(
                f"{folder.name}: {path.name} belongs to the series but cannot be "
                "read as a slice (a cut or damaged file); re-download the series"
            )


def _slice_order(folder: Path, files: list[Path], headers: list[Any]) -> list[int]:
    """Indices of ``files`` in order along the slice normal, after the checks."""
    orientations = _decimal_rows(headers, 0x00200037, 6)
    positions = _decimal_rows(headers, 0x00200032, 3)
    try:
        if orientations is None:  # parsed value by value: the message
            orientations = np.asarray(
                [[float(v) for v in h.ImageOrientationPatient] for h in headers]
            )
        if positions is None:
            positions = np.asarray([[float(v) for v in h.ImagePositionPatient] for h in headers])
    except (TypeError, ValueError) as error:
        raise DataError(
            f"{folder.name}: a slice's position or orientation is not numbers ({error})"
        ) from None
    if (
        orientations.shape[1:] != (6,)
        or positions.shape[1:] != (3,)
        or not (np.isfinite(orientations).all() and np.isfinite(positions).all())
    ):
        raise DataError(
            f"{folder.name}: slices with malformed ImageOrientationPatient or ImagePositionPatient"
        )
    different = np.flatnonzero(np.abs(orientations - orientations[0]).max(axis=1) > 1e-3)
    if different.size:
        other = int(different[0])
        raise DataError(
            f"{folder.name}: slices in more than one orientation ({files[0].name}: "
            f"{_rounded(orientations[0])}, {files[other].name}: "
            f"{_rounded(orientations[other])}; {different.size} of {len(files)} "
            "differ); a series is one stack: put each orientation in its own folder"
        )
    normal = np.cross(orientations[0][:3], orientations[0][3:])
    distance = positions @ normal
    order = [int(i) for i in np.argsort(distance, kind="stable")]
    steps = np.diff(distance[order])
    _check_steps(folder, steps, [files[i] for i in order], distance[order])
    return order


def _decimal_rows(headers: list[Any], tag: int, width: int) -> np.ndarray | None:
    """The ``width`` decimal values of element ``tag`` of every header, parsed at once from the
    bytes as stored (float()'s values: converting 9 values a slice took pydicom longer than
    reading the slice); None when one is not stored so, or not ``width`` numbers."""
    raws = []
    for header in headers:
        element = header.get_item(tag, keep_deferred=True)
        raw = getattr(element, "value", None)
        if not isinstance(raw, bytes):
            return None
        raw = raw.strip(b" \0")
        if raw.count(b"\\") != width - 1:
            return None
        raws.append(raw)
    values = parse_decimals(b"\\".join(raws))
    return None if values is None else values.reshape(len(headers), width)


def _rounded(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:g}" for v in np.round(values, 3)) + "]"


def _check_steps(folder: Path, steps: np.ndarray, files: list[Path], distance: np.ndarray) -> None:
    """DataError for a duplicated slice (two at one position), a missing one (a gap of about
    twice the usual step) or otherwise uneven spacing."""
    if not steps.size:
        return
    same = np.flatnonzero(steps <= 1e-3)
    if same.size:
        i = int(same[0])
        raise DataError(
            f"{folder.name}: {files[i].name} and {files[i + 1].name} are at the same "
            f"position ({distance[i]:.2f} mm): a duplicated slice; remove one "
            f"({same.size} such pair(s))"
        )
    usual = float(np.median(steps))
    if steps.max() - steps.min() <= 0.01 * steps.max() + 1e-3:
        return
    gaps = np.flatnonzero(steps > 1.5 * usual)
    if gaps.size:
        i = int(gaps[0])
        missing = int(round(steps[i] / usual)) - 1
        raise DataError(
            f"{folder.name}: slices are not equally spaced: {max(missing, 1)} "
            f"slice(s) missing between "
            f"{files[i].name} and {files[i + 1].name} ({distance[i]:.2f} to "
            f"{distance[i + 1]:.2f} mm, {usual:.2f} mm apart elsewhere; "
            f"{gaps.size} gap(s)); copy the whole series"
        )
    raise DataError(
        f"{folder.name}: slices are not equally spaced (steps {steps.min():.3f}.."
        f"{steps.max():.3f} mm); resample the series or give each even part as a "
        "series"
    )


#: the elements that give a slice's pixel data size (tags), compared as stored
_SIZE_TAGS = (0x00280010, 0x00280011, 0x00280100, 0x00280002, 0x00280008)
#: pixel data size by those elements' stored values: one conversion per layout, not per slice
_SIZES: dict[tuple, tuple[int, int, int, int, int]] = {}


def _image_description(header: Any) -> tuple[int, int, int, int, int]:
    """(rows, columns, bits allocated, samples, frames) of a header, converted once per set of
    stored values (and encoding) rather than once per slice."""
    key = (
        getattr(header, "original_encoding", None),
        *(getattr(header.get_item(tag, keep_deferred=True), "value", None) for tag in _SIZE_TAGS),
    )
    stored = all(isinstance(value, bytes) or value is None for value in key[1:])
    if stored and key in _SIZES:
        return _SIZES[key]
    description = (
        int(header.Rows),
        int(header.Columns),
        int(header.BitsAllocated),
        int(getattr(header, "SamplesPerPixel", 1) or 1),
        int(getattr(header, "NumberOfFrames", 1) or 1),
    )
    if stored:
        if len(_SIZES) >= 256:
            _SIZES.clear()
        _SIZES[key] = description
    return description


def _check_pixel_data(path: Path, header: Any, *, slice_of_series: bool = True) -> None:
    """DataError when a slice's uncompressed pixel data is shorter than its rows x columns x
    samples x bits (x frames) need, or runs past the end of its file: GDCM decoded such a
    slice with its missing pixels as 0 (0 HU in a CT). A slice of a series cut short is named
    as such (GDCM left it out of the series). Compressed (encapsulated) pixel data is left to
    the decoder."""
    try:
        element = header.get_item("PixelData", keep_deferred=True)
        rows, columns, bits, samples, frames = _image_description(header)
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise DataError(
            f"{path.parent.name}: {path.name} lacks its image description "
            f"({error}); re-download the series"
        ) from None
    if element is None:
        raise DataError(
            f"{path.parent.name}: {path.name} holds no pixel data; re-download the series"
        )
    length = getattr(element, "length", None)
    if length is None:  # a value already read: its bytes
        length = len(element.value or b"")
    if length == 0xFFFFFFFF:  # undefined length: encapsulated (compressed) fragments
        return
    needed = (rows * columns * samples * frames * bits + 7) // 8
    tell = getattr(element, "value_tell", None)
    size = path.stat().st_size
    if slice_of_series and tell is not None and tell + length > size:
        raise DataError(
            f"{path.parent.name}: {path.name} belongs to the series but cannot be read as a "
            "slice (a cut or damaged file: its pixel data runs past its end); re-download "
            "the series"
        )
    if length < needed or (tell is not None and tell + length > size):
        present = min(length, size - tell) if tell is not None else length
        raise DataError(
            f"{path.parent.name}: {path.name}: truncated pixel data: {present} "
            f"bytes where {rows} x {columns} pixels of {bits} bits need {needed}"
            + (f" for {frames:,} frames" if frames > 1 else "")
            + " (the missing pixels would be read as 0); re-download the file"
        )


def _read_dicom_object(path: str | Path, modality: str, what: str) -> Any:
    """The pydicom dataset at ``path`` (values over 64 KiB left on disk until used);
    DataError unless it reads whole and has ``modality``."""
    path = Path(path)
    try:
        ds = _pydicom().dcmread(str(path), defer_size=_DEFER)
        if "PixelData" not in ds and modality == "SEG":
            raise ValueError("no pixel data (a cut file?)")
    except Exception as error:  # noqa: BLE001
        raise DataError(
            f"{path.name}: not a readable {what} ({str(error)[:160]}); re-export or re-download it"
        ) from None
    if getattr(ds, "Modality", "") != modality:
        raise DataError(f"{path.name}: modality {getattr(ds, 'Modality', '?')}, not {modality}")
    return ds


def _direction_matrix(image: sitk.Image) -> np.ndarray:
    return np.asarray(image.GetDirection(), dtype=float).reshape(3, 3)


# -- references -----------------------------------------------------------------------------
def referenced_series(header: Any) -> str | None:
    """The image series a SEG or RTSTRUCT header references (None if it names none).

    Args:
        header: A pydicom dataset of a SEG (``ReferencedSeriesSequence``) or an RTSTRUCT
            (``ReferencedFrameOfReferenceSequence``).

    Returns:
        The first referenced SeriesInstanceUID, or None.
    """
    if "ReferencedSeriesSequence" in header:
        return str(header.ReferencedSeriesSequence[0].SeriesInstanceUID)
    for frame in getattr(header, "ReferencedFrameOfReferenceSequence", []):
        for study in getattr(frame, "RTReferencedStudySequence", []):
            for series in getattr(study, "RTReferencedSeriesSequence", []):
                return str(series.SeriesInstanceUID)
    return None


def _check_same_scan(path: Path, header: Any, frames: list[str], series: DicomSeries) -> None:
    """DataError when the label at ``path`` is drawn on another frame of reference or names
    another series than ``series``."""
    what = str(getattr(header, "Modality", "label"))
    if series.frame_of_reference_uid and frames and series.frame_of_reference_uid not in frames:
        raise DataError(
            f"{path.name}: this {what} is drawn in frame of reference {frames[0]}, "
            f"the series {series.files[0].parent.name} in "
            f"{series.frame_of_reference_uid}: it belongs to another scan; pair it "
            "with the series it was drawn on"
        )
    named = referenced_series(header)
    if named is not None and named != series.series_uid:
        raise DataError(
            f"{path.name}: this {what} references series {named}, not the series in "
            f"{series.files[0].parent.name} ({series.series_uid}); pair it with "
            "the series it was drawn on"
        )


def _check_instances(path: Path, referenced: list[str], series: DicomSeries, where: str) -> None:
    missing = sorted(set(referenced) - set(series.sop_uids))
    if missing:
        raise DataError(
            f"{path.name}: {where} {len(missing)} image instance(s) not in the series "
            f"{series.files[0].parent.name} ({shortened(missing, 2)}): a slice is "
            "missing from the series folder, or the label belongs to another series"
        )


# -- RTSTRUCT -------------------------------------------------------------------------------
def read_rtstruct(
    path: str | Path,
    reference: sitk.Image | DicomSeries,
) -> dict[str, np.ndarray]:
    """ROIs of an RTSTRUCT rasterised on the reference grid: ``{ROI name: bool (k, j, i)}``.

    Closed planar contours are filled slice by slice (pixel centres inside the polygon);
    contours on the same slice combine by even-odd rule, so inner contours make holes. Each
    contour must lie on a slice of the reference (its planes are the series' slices) and inside
    the image. With a :class:`DicomSeries` the RTSTRUCT must also share its frame of
    reference, name it (when it names a series) and reference only its instances.

    Args:
        path: The RTSTRUCT file.
        reference: The image (or series) whose grid the masks are on.

    Returns:
        ``{ROI name: bool mask (k, j, i)}``, the array order of ``reference``'s image.

    Raises:
        DataError: The file is not a readable RTSTRUCT, refers to another scan, names two
            ROIs alike, or has a contour off the reference's slices or outside the image.
    """
    path = Path(path)
    series = reference if isinstance(reference, DicomSeries) else None
    image = series.image if series is not None else reference
    ds = _read_dicom_object(path, "RTSTRUCT", "RTSTRUCT")
    try:
        names = {int(r.ROINumber): str(r.ROIName) for r in ds.StructureSetROISequence}
        rois = list(getattr(ds, "ROIContourSequence", []))
    except (AttributeError, TypeError, ValueError) as error:
        raise DataError(
            f"{path.name}: not a readable RTSTRUCT: no valid ROI list "
            f"({str(error)[:100]}; a cut file?); re-export or re-download it"
        ) from None
    if series is not None:
        frames = [
            str(f.FrameOfReferenceUID)
            for f in getattr(ds, "ReferencedFrameOfReferenceSequence", [])
            if "FrameOfReferenceUID" in f
        ]
        frames += [
            str(r.ReferencedFrameOfReferenceUID)
            for r in ds.StructureSetROISequence
            if "ReferencedFrameOfReferenceUID" in r
        ]
        _check_same_scan(path, ds, frames, series)
    _check_point_counts(path, rois, names)
    parsed = _parse_contours(rois)
    grid = _Grid(image)
    result: dict[str, np.ndarray] = {}
    for roi in rois:
        name = names.get(int(roi.ReferencedROINumber), str(roi.ReferencedROINumber))
        if name in result:
            raise DataError(f"{path.name}: two ROIs named '{name}'; rename one")
        result[name] = _rasterise_roi(path, name, roi, grid, series, parsed)
    return result


def _parse_contours(rois: list[Any]) -> dict[int, np.ndarray]:
    """Every contour's coordinates parsed at once, by ``id`` of its dataset: ``{}`` when one is
    not all numbers (each contour is then parsed by itself, and the bad one named)."""
    contours, raws = [], []
    for roi in rois:
        for contour in getattr(roi, "ContourSequence", []):
            element = contour.get_item("ContourData", keep_deferred=True)
            raw = getattr(element, "value", None) if element is not None else None
            if isinstance(raw, bytes):
                contours.append(contour)
                raws.append(raw.strip(b" \0"))
    values = parse_decimals(b"\\".join(raws)) if raws else None
    if values is None:
        return {}
    sizes = np.asarray([raw.count(b"\\") + 1 for raw in raws])
    parts = np.split(values, np.cumsum(sizes)[:-1])
    return {id(contour): part for contour, part in zip(contours, parts)}


class _Grid:
    """The reference grid: physical point -> continuous index (i, j, k)."""

    def __init__(self, image: sitk.Image) -> None:
        self.size = image.GetSize()
        matrix = _direction_matrix(image) @ np.diag(image.GetSpacing())
        self.inverse = np.linalg.inv(matrix)
        self.origin = np.asarray(image.GetOrigin(), dtype=float)

    def index(self, points: np.ndarray) -> np.ndarray:
        return (points - self.origin) @ self.inverse.T


def _check_point_counts(path: Path, rois: list[Any], names: dict[int, str]) -> None:
    """DataError for a contour of more than MAX_CONTOUR_POINTS points or more than
    MAX_RTSTRUCT_POINTS in all, judged from the values' sizes before they are parsed."""
    total = 0
    for roi in rois:
        for number, contour in enumerate(getattr(roi, "ContourSequence", []), start=1):
            points = _declared_points(contour)
            if points > MAX_CONTOUR_POINTS:
                name = names.get(int(roi.ReferencedROINumber), "?")
                raise DataError(
                    f"{path.name}: contour {number} of ROI '{name}' has about "
                    f"{points:,} points (at most {MAX_CONTOUR_POINTS:,}); not a "
                    "drawn outline: re-export the RTSTRUCT"
                )
            total += points
    if total > MAX_RTSTRUCT_POINTS:
        raise DataError(
            f"{path.name}: {total:,} contour points in all (at most "
            f"{MAX_RTSTRUCT_POINTS:,}); re-export the RTSTRUCT"
        )


def _stored_text(ds: Any, tag: int) -> str | None:
    """A short text or number element's value as text (spaces and NUL padding cut), from its
    stored bytes when it has not been converted (pydicom's conversion of two values a contour
    cost more than the contour's fill); None when absent."""
    element = ds.get_item(tag, keep_deferred=True)
    if element is None:
        return None
    raw = getattr(element, "value", None)
    if isinstance(raw, bytes):
        try:
            return raw.decode("ascii").strip(" \0")
        except UnicodeDecodeError:
            pass
    value = ds[tag].value
    return None if value is None else str(value)


def _declared_points(contour: Any) -> int:
    """A contour's points as its NumberOfContourPoints says or, at the least, as the size of
    its (unparsed) ContourData implies: a decimal string is at most 16 bytes plus a separator."""
    element = contour.get_item("ContourData", keep_deferred=True)
    length = 0 if element is None else getattr(element, "length", None)
    if length is None:  # already parsed: a small value
        length = len(element.value) * 6
    declared = _stored_text(contour, 0x30060046)  # NumberOfContourPoints
    try:
        declared = int(declared or 0)
    except (TypeError, ValueError):
        declared = 0
    return max(declared, int(length) // (3 * 17))


def _contour_points(
    path: Path, name: str, number: int, contour: Any, parsed: np.ndarray | None = None
) -> np.ndarray:
    """A contour's points (N, 3) in mm: ``parsed`` (its coordinates parsed with the others')
    or its decimal strings parsed by numpy (pydicom's per-value parsing took most of the read
    of a large RTSTRUCT)."""
    try:
        element = contour.get_item("ContourData", keep_deferred=True)
        raw = getattr(element, "value", None) if element is not None else None
        points = parsed
        if points is None and isinstance(raw, bytes):
            points = parse_decimals(raw)
        if points is None and isinstance(raw, bytes):  # parsed value by value: the error
            points = np.array(raw.strip(b" \0").split(b"\\"), dtype=np.bytes_).astype(float)
        elif points is None:
            values = contour.ContourData
            values = (
                values
                if isinstance(values, list | tuple) or hasattr(values, "__len__")
                else [values]
            )
            points = np.asarray([float(v) for v in values], dtype=float)
    except (TypeError, ValueError, AttributeError, OverflowError) as error:
        raise DataError(
            f"{path.name}: contour {number} of ROI '{name}': coordinates are not "
            f"numbers ({str(error)[:80]}); re-export the RTSTRUCT"
        ) from None
    if points.size % 3 or points.size < 9:
        raise DataError(
            f"{path.name}: contour {number} of ROI '{name}' has {points.size} "
            "coordinates, not x, y, z triples of at least 3 points"
        )
    if not np.isfinite(points).all():
        raise DataError(
            f"{path.name}: contour {number} of ROI '{name}' has coordinates that "
            "are not finite (NaN or infinity); re-export the RTSTRUCT"
        )
    return points.reshape(-1, 3)


def fill_polygon(rows: np.ndarray, columns: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Bool (rows, columns) mask of the pixels whose centres lie inside the closed polygon of
    vertices ``(rows, columns)`` (continuous pixel indices), by the even-odd rule.

    A scanline fill: on each pixel row (centre ``c``) an edge from ``(y0, x0)`` to ``(y1, x1)``
    crosses when exactly one of ``y0 <= c``, ``y1 <= c`` holds, at
    ``x = x0 + (c - y0) * (x1 - x0) / (y1 - y0)``; each crossing toggles the pixels from
    ``ceil(x)`` rightwards, within the polygon's bounding box.

    Args:
        rows: the vertices' row indices (float, pixel centres at integers).
        columns: the vertices' column indices, as many as ``rows``.
        shape: the mask's (rows, columns).

    Returns:
        The bool mask of ``shape``.
    """
    mask = np.zeros(shape, dtype=bool)
    box = _polygon_box(rows, columns, shape)
    if box is not None:
        low, left, inside = box
        mask[low : low + inside.shape[0], left : left + inside.shape[1]] = inside
    return mask


def _polygon_box(
    rows: np.ndarray, columns: np.ndarray, shape: tuple[int, int]
) -> tuple[int, int, np.ndarray] | None:
    """The pixels of :func:`fill_polygon` within the polygon's bounding box on the image:
    ``(first row, first column, bool box)``, or None when no pixel centre is inside it.

    Only the crossings are computed (for each edge, the pixel rows it spans); sorted, they cut
    the box, row after row, into runs of outside and inside pixels, which ``np.repeat``
    writes: the work grows with the outline and the box, not with edges times rows."""
    height, width = shape
    low, high = max(int(np.ceil(rows.min())), 0), min(int(np.floor(rows.max())), height - 1)
    left = max(int(np.ceil(columns.min())), 0)
    right = min(int(np.floor(columns.max())), width - 1)
    if high < low or right < left:
        return None
    y0, x0 = rows, columns
    y1, x1 = np.concatenate([rows[1:], rows[:1]]), np.concatenate([columns[1:], columns[:1]])
    # the pixel rows c an edge crosses: min(y0, y1) <= c < max(y0, y1), within low..high
    first = np.maximum(np.ceil(np.minimum(y0, y1)), low)
    last = np.minimum(np.ceil(np.maximum(y0, y1)) - 1, high)
    counts = np.maximum(last - first + 1, 0).astype(np.int64)
    total = int(counts.sum())
    span, box_rows = right - left + 1, high - low + 1
    if total == 0:
        return low, left, np.zeros((box_rows, span), dtype=bool)
    edge = np.repeat(np.arange(rows.size), counts)
    line = first[edge] + (np.arange(total) - (np.cumsum(counts) - counts)[edge])
    with np.errstate(divide="ignore", invalid="ignore"):
        x = x0[edge] + (line - y0[edge]) * (x1[edge] - x0[edge]) / (y1[edge] - y0[edge])
    position = np.clip(np.ceil(x) - left, 0, span).astype(np.int64)
    keep = position < span  # a crossing right of the box toggles nothing in it
    row = line[keep].astype(np.int64) - low
    position = position[keep]
    # a row with an odd number of crossings is closed at its end (the next row's start)
    per_row = np.bincount(row, minlength=box_rows)
    odd = np.flatnonzero(per_row % 2)
    row = np.concatenate([row, odd])
    position = np.concatenate([position, np.full(odd.size, span, dtype=np.int64)])
    order = np.lexsort((row, row * span + position))
    row, start = row[order], (row * span + position)[order]
    rank = np.arange(row.size) - np.searchsorted(row, row)  # a crossing's rank in its row
    values = np.concatenate([[False], rank % 2 == 0])  # inside after an odd number of them
    lengths = np.diff(np.concatenate([[0], start, [box_rows * span]]))
    return low, left, np.repeat(values, lengths).reshape(box_rows, span)


def _rasterise_roi(
    path: Path,
    name: str,
    roi: Any,
    grid: _Grid,
    series: DicomSeries | None,
    parsed: dict[int, np.ndarray],
) -> np.ndarray:
    size = grid.size
    mask = np.zeros((size[2], size[1], size[0]), dtype=bool)
    for number, contour in enumerate(getattr(roi, "ContourSequence", []), start=1):
        kind = _stored_text(contour, 0x30060042) or "CLOSED_PLANAR"  # ContourGeometricType
        if kind not in ("CLOSED_PLANAR", "CLOSEDPLANAR"):
            continue  # points and open lines enclose nothing
        if series is not None:
            images = [
                str(item.ReferencedSOPInstanceUID)
                for item in getattr(contour, "ContourImageSequence", [])
                if "ReferencedSOPInstanceUID" in item
            ]
            _check_instances(path, images, series, f"contour {number} of ROI '{name}' references")
        index = grid.index(_contour_points(path, name, number, contour, parsed.get(id(contour))))
        k = int(np.rint(index[:, 2].mean()))
        if np.abs(index[:, 2] - k).max() > 0.5:
            raise DataError(
                f"{path.name}: contour {number} of ROI '{name}' does not lie on one "
                "slice of the series (drawn in another orientation, or on another "
                "series); pair the RTSTRUCT with the series it was drawn on"
            )
        outside = (
            not 0 <= k < size[2]
            or index[:, 0].max() < -0.5
            or index[:, 1].max() < -0.5
            or index[:, 0].min() > size[0] - 0.5
            or index[:, 1].min() > size[1] - 0.5
        )
        if outside:
            raise DataError(
                f"{path.name}: contour {number} of ROI '{name}' lies outside the "
                f"image (slice {k} of 0..{size[2] - 1}); pair the RTSTRUCT with "
                "the series it was drawn on"
            )
        box = _polygon_box(index[:, 1], index[:, 0], (size[1], size[0]))
        if box is not None:  # contours on one slice combine by the even-odd rule
            low, left, inside = box
            mask[k, low : low + inside.shape[0], left : left + inside.shape[1]] ^= inside
    return mask


# -- DICOM-SEG (one reader: own data and the recipes) ----------------------------------------
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
