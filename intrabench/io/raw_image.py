"""An image as read, before reorientation, and the byte-level checks of NIfTI data.

:class:`RawImage` (the file's (k, j, i) array and its grid), :func:`all_finite`, the blocks of
a NIfTI file's data stream (:func:`file_blocks`) and the truncation error. Lives apart from
:mod:`intrabench.io.volume` so that :mod:`intrabench.io.nifti_read` needs no import of it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from intrabench.errors import DataError
from intrabench.io.geometry import ImageGeometry

if TYPE_CHECKING:
    import SimpleITK as sitk


class _PixelBuffer:
    """A SimpleITK image's pixel buffer seen as a NumPy array that keeps the image alive.

    Only for an image nothing else holds (just read): then no one else writes the buffer, and
    the array may be written like an owned one."""

    def __init__(self, image: sitk.Image) -> None:
        import SimpleITK as sitk

        self._image = image
        interface = dict(sitk.GetArrayViewFromImage(image).__array_interface__)
        interface["data"] = (interface["data"][0], False)  # (address, read-only flag)
        self.__array_interface__ = interface


def all_finite(array: np.ndarray) -> bool:
    """Whether no value of a floating-point ``array`` is NaN or infinite, without a temporary
    of the array's size.

    A float64 sum is finite exactly when every float32/float16 value is (NaN and infinity
    propagate, and 2**31 float32 values cannot overflow a float64); a sum that is not finite
    (float64 data can overflow) is checked value by value, in blocks of 4 Mi values.

    Args:
        array: A floating-point array of any shape.

    Returns:
        True when every value is finite (also for an empty array).
    """
    if array.size == 0:
        return True
    if array.dtype.itemsize <= 4 and bool(np.isfinite(array.sum(dtype=np.float64))):
        return True
    flat = array.reshape(-1)
    block = 1 << 22
    return all(
        bool(np.isfinite(flat[start : start + block]).all()) for start in range(0, flat.size, block)
    )


@dataclass(eq=False)
class RawImage:
    """An image as read, before reorientation: ``array`` in the file's own voxel order
    (k, j, i), SimpleITK's array order, owned and writable (given away to the volume made from
    it); ``geometry`` its grid."""

    array: np.ndarray
    geometry: ImageGeometry
    #: every value of ``array`` is known to be finite (checked when read)
    finite: bool = False

    @classmethod
    def from_sitk(cls, image: sitk.Image, name: str = "image") -> RawImage:
        """The pixel buffer of ``image`` (just read, used by nothing else) without a copy;
        rejects 2D, 4D and vector images.

        Args:
            image: A SimpleITK image; the array returned shares its memory.
            name: What the error messages call the image (usually its path).

        Returns:
            The image as read: ``array`` (k, j, i) and its grid.

        Raises:
            DataError: The image is not 3D or has more than one value per voxel.
        """
        if image.GetDimension() != 3:
            raise DataError(f"{name}: expected a 3D image, got {image.GetDimension()}D")
        if image.GetNumberOfComponentsPerPixel() != 1:
            raise DataError(
                f"{name}: expected one value per voxel, got "
                f"{image.GetNumberOfComponentsPerPixel()} (4D/vector/RGB images are not "
                "supported; split the channels first)"
            )
        return cls(array=np.asarray(_PixelBuffer(image)), geometry=ImageGeometry.from_sitk(image))


def _file_blocks(path: Path, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a NIfTI file's data stream in blocks: decompressed for ``.gz`` (DataError
    if the gzip stream is cut or corrupt), as stored otherwise."""
    if not path.name.endswith(".gz"):
        with open(path, "rb") as handle:
            while block := handle.read(chunk):
                yield block
        return
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
    total = 0
    try:
        with open(path, "rb") as handle:
            while block := handle.read(chunk):
                out = inflater.decompress(block)
                while inflater.unused_data and inflater.eof:  # concatenated gzip members
                    rest = inflater.unused_data
                    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    out += inflater.decompress(rest)
                total += len(out)
                yield out
            tail = inflater.flush()
            total += len(tail)
            yield tail
    except zlib.error as error:
        raise DataError(
            f"{path}: the gzip data is corrupt ({error}); re-download or re-convert the file"
        ) from None
    if not inflater.eof:
        raise DataError(
            f"{path}: truncated (the gzip stream ends after {total} bytes of data); "
            "re-download or re-convert the file"
        )


def inflated_size(
    path: Path,
    offset: int,
    length: int,
    enough: int,
    chunk: int = 1 << 20,
) -> tuple[int, bool]:
    """(bytes the zlib or gzip stream of ``length`` bytes at ``offset`` in ``path`` inflates
    to, counted up to ``enough``; whether the stream ended there) without keeping them.

    At most ``chunk`` bytes of output are held at a time, so a stream of zeros that inflates
    1000-fold allocates no more.

    Args:
        path: The file holding the compressed stream.
        offset: Where the stream starts, in bytes from the file's start.
        length: The stream's compressed length in bytes (the reading stops there or at the
            file's end).
        enough: Stop counting once this many inflated bytes are reached.
        chunk: The most bytes read or inflated at a time.

    Returns:
        ``(inflated bytes counted, whether the stream ended)``.

    Raises:
        zlib.error: The stream is corrupt.
    """
    inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # a zlib or gzip header, as MetaIO
    total = 0
    with open(path, "rb") as handle:
        handle.seek(offset)
        while total < enough and not inflater.eof:
            read = min(chunk, length)
            length -= read
            pending = inflater.unconsumed_tail or handle.read(read)
            if not pending:  # the file ends: what the inflater holds back (a few bytes)
                total += len(inflater.flush())
                break
            total += len(inflater.decompress(pending, chunk))
    return total, inflater.eof


def truncated_error(path: Path, size: int, needed: int) -> DataError:
    """The error for a NIfTI file whose data stops at ``size`` bytes (decompressed) where its
    header announces ``needed``.

    Args:
        path: The file.
        size: The bytes its (decompressed) data stream holds.
        needed: The bytes the header announces (data offset + voxels x item size).

    Returns:
        The DataError to raise, its message saying what to do.
    """
    return DataError(
        f"{path}: truncated: {size} bytes where the header announces {needed} "
        "(missing voxels would be read as zeros); re-download or re-convert the "
        "file"
    )
