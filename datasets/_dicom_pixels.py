"""A DICOM series' voxels decoded by numpy, giving the very image SimpleITK's series reader gives.

:func:`datasets.dicom.read_series` reads every slice's header once with pydicom. For the common
case (uncompressed little-endian, one frame of 8 or 16 bits per file, one sample, MONOCHROME2,
integer rescale shared by all slices) the voxels are then read straight from the files at the
pixel data's offset, here, instead of GDCM reading and parsing every file a second time.
:func:`decode_series` returns None for any other series, and the caller hands the sorted files
to SimpleITK's ``ImageSeriesReader`` as before.

The image equals SimpleITK's (GDCM's) in every voxel, pixel type, origin, spacing and
direction (``tests/datasets/test_dicom_pixels.py`` compares them): the pixel type and the
in-plane geometry are taken from SimpleITK's own header read of the first slice, the slice
spacing is ITK's (first to last slice position over ``n - 1``), values are rescaled as GDCM
does (``slope * stored + intercept``, stored values cut to ``BitsStored`` bits).
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

#: uncompressed little-endian transfer syntaxes: Implicit and Explicit VR Little Endian
_RAW_LITTLE_ENDIAN = ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1")
#: SimpleITK integer pixel types and the numpy types that hold them
_INTEGER_TYPES = {
    sitk.sitkUInt8: np.uint8,
    sitk.sitkInt8: np.int8,
    sitk.sitkUInt16: np.uint16,
    sitk.sitkInt16: np.int16,
    sitk.sitkUInt32: np.uint32,
    sitk.sitkInt32: np.int32,
}


def _layout(header: Any) -> tuple | None:
    """What decides how a slice's bytes become voxels, or None when numpy does not decode it."""
    try:
        syntax = str(header.file_meta.TransferSyntaxUID)
        bits = int(header.BitsAllocated)
        stored = int(header.BitsStored)
        layout = (
            syntax,
            int(header.Rows),
            int(header.Columns),
            bits,
            stored,
            int(header.HighBit),
            int(header.PixelRepresentation),
            int(getattr(header, "SamplesPerPixel", 1) or 1),
            int(getattr(header, "NumberOfFrames", 1) or 1),
            str(getattr(header, "PhotometricInterpretation", "")).strip(),
            float(header.get("RescaleSlope", 1) or 1),
            float(header.get("RescaleIntercept", 0) or 0),
        )
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    _, _, _, bits, stored, high, sign, samples, frames, photometric, slope, intercept = layout
    usable = (
        syntax in _RAW_LITTLE_ENDIAN
        and bits in (8, 16)
        and 1 <= stored <= bits
        and high == stored - 1
        and sign in (0, 1)
        and samples == 1
        and frames == 1
        and photometric == "MONOCHROME2"
        and slope == int(slope)
        and intercept == int(intercept)
        and slope != 0
    )
    return layout if usable else None


#: the elements :func:`_layout` reads (tags), compared as stored before any is converted
_LAYOUT_TAGS = (
    0x00280010,  # Rows
    0x00280011,  # Columns
    0x00280100,  # BitsAllocated
    0x00280101,  # BitsStored
    0x00280102,  # HighBit
    0x00280103,  # PixelRepresentation
    0x00280002,  # SamplesPerPixel
    0x00280008,  # NumberOfFrames
    0x00280004,  # PhotometricInterpretation
    0x00281053,  # RescaleSlope
    0x00281052,  # RescaleIntercept
)


def _unlike(headers: list[Any]) -> list[Any]:
    """One header per distinct set of stored layout values (and transfer syntax): the slices
    of a series mostly share them, and converting each slice's values took longer than
    reading its voxels."""
    seen: dict[tuple, Any] = {}
    for header in headers:
        key = [str(header.file_meta.get("TransferSyntaxUID", ""))]
        for tag in _LAYOUT_TAGS:
            element = header.get_item(tag, keep_deferred=True)
            key.append(None if element is None else getattr(element, "value", element))
        try:
            seen.setdefault(tuple(key), header)
        except TypeError:  # a value that cannot be compared so: judge this slice by itself
            seen[(id(header),)] = header
    return list(seen.values())


def decode_series(files: list[Path], headers: list[Any]) -> sitk.Image | None:
    """The image of the sorted slice ``files`` (their pydicom ``headers``, pixel data deferred),
    decoded by numpy; None when the series is not one numpy decodes as GDCM would.

    Args:
        files: the slice files in slice order (``k`` of the image's array).
        headers: their pydicom datasets read with the pixel data left on disk.

    Returns:
        A 3D ``SimpleITK.Image`` (LPS) identical to ``ImageSeriesReader`` on ``files``, or None.
    """
    layouts = {_layout(header) for header in _unlike(headers)}
    if len(layouts) != 1 or None in layouts:
        return None
    _, rows, columns, bits, stored, _, sign, _, _, _, slope, intercept = layouts.pop()
    first, last = sitk.ImageFileReader(), sitk.ImageFileReader()
    try:
        first.SetFileName(str(files[0]))
        first.ReadImageInformation()
        last.SetFileName(str(files[-1]))
        last.ReadImageInformation()
    except RuntimeError:
        return None  # SimpleITK's reader, the fallback, says what is wrong
    target = _INTEGER_TYPES.get(first.GetPixelID())
    size = first.GetSize()
    if target is None or size[:2] != (columns, rows) or (len(size) == 3 and size[2] != 1):
        return None
    low, high = (-(1 << (stored - 1)), (1 << (stored - 1)) - 1) if sign else (0, (1 << stored) - 1)
    if not _fits(sorted((slope * low + intercept, slope * high + intercept)), target):
        return None
    raw_type = np.dtype(f"<{'i' if sign else 'u'}{bits // 8}")
    offsets = [
        getattr(header.get_item("PixelData", keep_deferred=True), "value_tell", None)
        for header in headers
    ]
    if None in offsets:
        return None
    image = sitk.Image([columns, rows, len(files)], first.GetPixelID())
    volume = _writable_array(image, np.dtype(target))
    direct = raw_type == np.dtype(target) and stored == bits and slope == 1 and intercept == 0
    buffer = volume[0] if direct else np.empty((rows, columns), dtype=raw_type)
    in_place = _fits(sorted((slope * low, slope * high)), target)
    for k, (path, offset) in enumerate(zip(files, offsets)):
        if direct:
            buffer = volume[k]  # each slice read straight into the image's voxels
        with open(path, "rb") as handle:
            handle.seek(offset)
            if handle.readinto(buffer) != buffer.nbytes:
                return None
        if direct:
            continue
        if stored < bits:  # GDCM keeps the stored bits only (sign-extended when signed)
            unused = bits - stored
            if sign:
                buffer <<= unused
                buffer >>= unused
            else:
                buffer &= (1 << stored) - 1
        if in_place:  # slope x stored + intercept in the image's type: no step overflows
            np.copyto(volume[k], buffer, casting="unsafe")
            if slope != 1:
                volume[k] *= target(int(slope))
            if intercept != 0:
                volume[k] += target(int(intercept))
        else:
            scaled = buffer.astype(np.int64) * int(slope) + int(intercept)
            np.copyto(volume[k], scaled, casting="unsafe")
    image.SetOrigin(first.GetOrigin())
    image.SetDirection(first.GetDirection())
    image.SetSpacing((*first.GetSpacing()[:2], _slice_spacing(first, last, len(files))))
    return image


def _writable_array(image: sitk.Image, dtype: np.dtype) -> np.ndarray:
    """A writable (k, j, i) numpy array over a new image's own voxels, so that slices are read
    straight into it (``GetImageFromArray`` allocated and filled a second volume, then copied).
    The image is made unique first: no other image shares the voxels written."""
    image.MakeUnique()
    address = sitk.GetArrayViewFromImage(image).__array_interface__["data"][0]
    memory = (ctypes.c_byte * (image.GetNumberOfPixels() * dtype.itemsize)).from_address(address)
    return np.frombuffer(memory, dtype=dtype).reshape(image.GetSize()[::-1])


def _fits(ends: list[float], target: type) -> bool:
    """Whether the values from ``ends[0]`` to ``ends[1]`` fit the integer type ``target``."""
    return np.iinfo(target).min <= ends[0] and ends[1] <= np.iinfo(target).max


def _slice_spacing(first: sitk.ImageFileReader, last: sitk.ImageFileReader, count: int) -> float:
    """ITK's series spacing: the distance from the first slice's origin to the last's over
    ``count - 1`` (1 when they coincide), computed in ITK's order of operations."""
    squared = 0.0
    for a, b in zip(first.GetOrigin(), last.GetOrigin()):
        squared += (b - a) * (b - a)
    norm = math.sqrt(squared)
    return 1.0 if abs(norm) < 1e-300 else norm / (count - 1)
