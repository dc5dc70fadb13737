"""Refuse an image whose header declares more voxels than its file can hold, before anything
allocates (a "header bomb": a 608-byte ``.nii`` declaring 1000^3 voxels made SimpleITK allocate
gigabytes and work for minutes).

* NIfTI (``.nii``): the header's data end (offset + voxels x voxel size) must lie within the
  file; ``.nii.gz``: within what the compressed file can hold at deflate's largest expansion
  (1032:1, all-zero data), so no real file is refused. Only the header is read (for a
  ``.nii.gz``, its first 540 decompressed bytes).
* Every format SimpleITK reads: the declared voxel count must stay within a limit,
  ``$INTRABENCH_MAX_VOXELS`` (default 2 x 10^9: a 512 x 512 x 7600 CT), read from the header
  alone (``ImageFileReader.ReadImageInformation``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from intrabench.errors import DataError
from intrabench.io.nifti_header import data_layout

LIMIT_VARIABLE = "INTRABENCH_MAX_VOXELS"
DEFAULT_MAX_VOXELS = 2_000_000_000
#: deflate's largest expansion (a stream of zeros): 1032 output bytes per input byte
DEFLATE_MAX_RATIO = 1032


def max_voxels() -> int:
    """The voxel limit: ``$INTRABENCH_MAX_VOXELS``, else :data:`DEFAULT_MAX_VOXELS`."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_VOXELS
    try:
        value = int(float(text))
    except ValueError:
        raise DataError(f"{LIMIT_VARIABLE}={text!r} is not a number of voxels") from None
    if value < 1:
        raise DataError(f"{LIMIT_VARIABLE} must be at least 1, not {value}")
    return value


def check_voxel_count(name: str, shape: tuple[int, ...]) -> None:
    """DataError when ``shape`` holds more voxels than :func:`max_voxels`."""
    voxels = int(np.prod(np.asarray(shape, dtype=object))) if len(shape) else 0
    limit = max_voxels()
    if voxels > limit:
        raise DataError(f"{name}: the header declares {' x '.join(map(str, shape))} = "
                        f"{voxels:,} voxels, more than the limit of {limit:,} "
                        f"(set {LIMIT_VARIABLE} to read larger images)")


def check_declared_size(path: str | Path, layout=None) -> None:
    """DataError when ``path``'s header declares more data than the file holds or the voxel
    limit allows (module docstring); nothing for a file whose size is plausible. ``layout``:
    the NIfTI header's :class:`~intrabench.io.nifti_header.DataLayout` when the caller has
    read it already (it is not read again)."""
    path = Path(path)
    if path.name.endswith((".nii", ".nii.gz")):
        layout = layout if layout is not None else data_layout(path)
        if layout is not None:
            check_voxel_count(path.name, layout.shape)
            size = path.stat().st_size
            if path.name.endswith(".gz"):
                most = size * DEFLATE_MAX_RATIO
                if layout.end > most:
                    raise DataError(f"{path}: truncated: a {size}-byte gzip file holds at most "
                                    f"{most} bytes where the header announces {layout.end} "
                                    "(a cut file, or a header that lies); re-download or "
                                    "re-convert the file")
            elif layout.end > size:  # the wording of volume.truncated_error
                raise DataError(f"{path}: truncated: {size} bytes where the header announces "
                                f"{layout.end} (missing voxels would be read as zeros); "
                                "re-download or re-convert the file")
            return
    import SimpleITK as sitk

    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return  # SimpleITK's own read reports what is wrong
    shape = tuple(int(v) for v in reader.GetSize())
    components = int(reader.GetNumberOfComponents() or 1)
    check_voxel_count(path.name, shape + ((components,) if components > 1 else ()))
