"""A plain NIfTI file's voxels in one pass, the file's checks included.

SimpleITK reads a NIfTI file's voxels into one buffer and copies them into the image's, and
:func:`intrabench.io.volume.check_nifti` then reads the file a second time (decompressing a
``.nii.gz`` again) to find missing and NaN voxels that SimpleITK hides.
:func:`read_nifti_directly` reads the data once into the array the volume keeps (several
times faster for a ``.nii``, about twice for a ``.nii.gz``: docs/performance.md), with SimpleITK reading only the header's geometry, so the grid is
SimpleITK's to the last digit.

It reads only what it can read exactly as SimpleITK does: a single-file NIfTI-1/2 with a 3D
grid, one scalar value per voxel in the machine's byte order, no intensity scaling, and a
voxel type SimpleITK agrees on. Anything else returns None, and the caller reads the file with
SimpleITK (and checks it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from intrabench.errors import DataError
from intrabench.io.declared_size import check_declared_size
from intrabench.io.geometry import ImageGeometry
from intrabench.io.nifti_header import DataLayout, data_layout
from intrabench.io.raw_image import RawImage, _file_blocks, all_finite, truncated_error

#: voxel type -> SimpleITK pixel type name (``sitk.sitk<Name>``)
_SITK_PIXEL_TYPES = {
    "u1": "UInt8",
    "i1": "Int8",
    "u2": "UInt16",
    "i2": "Int16",
    "u4": "UInt32",
    "i4": "Int32",
    "u8": "UInt64",
    "i8": "Int64",
    "f4": "Float32",
    "f8": "Float64",
}


def read_nifti_directly(path: str | Path) -> RawImage | None:
    """``path``'s voxels in the file's order (k, j, i) and its grid, or None when the file is
    not one this reader takes (see the module docstring).

    Args:
        path: An image file; anything but a plain 3D ``.nii``/``.nii.gz`` file gives None.

    Returns:
        The image as read, its values checked finite, or None (the caller reads it with
        SimpleITK).

    Raises:
        DataError: The data is cut short, its gzip stream is corrupt, a float voxel is NaN or
            infinite, or the header leaves a voxel size unset (any NIfTI file:
            :func:`check_voxel_size`).
    """
    path = Path(path)
    if not path.name.endswith((".nii", ".nii.gz")) or not path.is_file():
        return None
    layout = data_layout(path)
    check_voxel_size(path, layout)
    if layout is None or len(layout.shape) != 3 or layout.scaled or not layout.dtype.isnative:
        return None
    check_declared_size(path, layout)  # before the array of the declared size is allocated
    geometry = _sitk_geometry(path, layout)
    if geometry is None:
        return None
    array = np.empty(layout.shape[::-1], dtype=layout.dtype)  # x varies fastest on disk
    if path.name.endswith(".gz"):
        _inflate_into(path, layout, memoryview(array).cast("B"))
    else:
        _read_into(path, layout, memoryview(array).cast("B"))
    if array.dtype.kind == "f" and not all_finite(array):  # as check_nifti reports it
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        raise DataError(
            f"{path}: {bad} voxels are NaN or infinite; clean the image before benchmarking"
        )
    return RawImage(array=array, geometry=geometry, finite=True)


def check_voxel_size(path: Path, layout: DataLayout | None) -> None:
    """DataError when the header leaves a voxel size unset (``pixdim`` 0 or NaN, no qform or
    sform): ITK reads 1 mm there, and every number in mm (NSD's tolerance, HD95, volumes,
    the 3D models' resampling) would rest on a size nobody gave.

    Args:
        path: The NIfTI file, for the message.
        layout: Its header's layout (:func:`~intrabench.io.nifti_header.data_layout`); None
            (not a plain header) passes.

    Raises:
        DataError: Naming the axes (i, j, k) without a voxel size.
    """
    if layout is None or not layout.unset_voxel_size:
        return
    axes = ", ".join("ijk"[axis] for axis in layout.unset_voxel_size)
    raise DataError(
        f"{path}: the header gives no voxel size along {axes} (pixdim 0 or NaN, "
        "and no qform or sform); ITK would read 1 mm and every measure in mm would "
        "rest on it: set the voxel size in the header"
    )


def _sitk_geometry(path: Path, layout: DataLayout) -> ImageGeometry | None:
    """The grid as SimpleITK reads it from the header (it reads no voxel), if SimpleITK sees
    the same 3D scalar image of the same voxel type; None otherwise."""
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return None  # the full read reports it
    expected = getattr(sitk, "sitk" + _SITK_PIXEL_TYPES[layout.dtype.str[1:]])
    if (
        reader.GetDimension() != 3
        or reader.GetNumberOfComponents() != 1
        or tuple(reader.GetSize()) != layout.shape
        or reader.GetPixelID() != expected
    ):
        return None
    if not all(np.isfinite(v) and v > 0 for v in reader.GetSpacing()):
        # A negative pixdim (qform and sform codes 0): ITK's header pass keeps the sign, its
        # full read turns it into a flipped direction with a positive spacing; the full read
        # is the reference (and it refuses what is left unusable, see volume_from_raw).
        return None
    return ImageGeometry(
        size=tuple(int(v) for v in reader.GetSize()),
        spacing=tuple(float(v) for v in reader.GetSpacing()),
        origin=tuple(float(v) for v in reader.GetOrigin()),
        direction=tuple(float(v) for v in reader.GetDirection()),
    )


def _read_into(path: Path, layout: DataLayout, out: memoryview) -> None:
    size = path.stat().st_size
    if size < layout.end:
        raise truncated_error(path, size, layout.end)
    with open(path, "rb", buffering=0) as handle:
        handle.seek(layout.offset)
        filled = 0
        while filled < len(out):  # one read() returns at most 2 GB on Linux
            count = handle.readinto(out[filled:])
            if not count:
                raise truncated_error(path, layout.offset + filled, layout.end)
            filled += count


def _inflate_into(path: Path, layout: DataLayout, out: memoryview) -> None:
    position = -layout.offset  # bytes of voxel data seen so far (negative: still the header)
    for block in _file_blocks(path):  # DataError when the stream is cut or corrupt
        if position < 0:
            skipped = min(-position, len(block))
            block = block[skipped:]
            position += skipped
        if block and position < len(out):
            take = min(len(block), len(out) - position)
            out[position : position + take] = block[:take]
            position += len(block)
        elif block:
            position += len(block)
    if position < len(out):
        raise truncated_error(path, layout.offset + position, layout.end)
