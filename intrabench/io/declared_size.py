"""Refuse an image whose header declares more voxels than its file can hold, before anything
allocates (a "header bomb": a 608-byte ``.nii`` declaring 1000^3 voxels made SimpleITK allocate
gigabytes and work for minutes).

* NIfTI (``.nii``): the header's data end (offset + voxels x voxel size) must lie within the
  file; ``.nii.gz``: within what the compressed file can hold at deflate's largest expansion
  (1032:1, all-zero data), so no real file is refused. Only the header is read (for a
  ``.nii.gz``, its first 540 decompressed bytes).
* Every format SimpleITK reads: the declared voxel count must stay within a limit,
  ``$INTRABENCH_MAX_VOXELS`` (default: what this machine's memory holds, a twelfth of it in
  voxels (the image, its float copy and a label), at most 2 x 10^9: a 512 x 512 x 7600 CT),
  read from the header alone (``ImageFileReader.ReadImageInformation``).
* The formats whose data file can be found from the header (NIfTI with any ``vox_offset`` and
  voxel type, complex and RGB included; Analyze ``.hdr``/``.img``; NRRD, attached or detached;
  MetaImage ``.mha``/``.mhd``): the declared bytes (voxels x components x component size) must
  fit in the data file: exactly for raw data (a shorter file is **truncated**: its missing
  voxels would read as zeros, in every format), within deflate's largest expansion for
  compressed data.
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


#: bytes of memory a voxel of a case takes while it is read and used (float32 image, its
#: working copy, the label): the default limit is the machine's memory over this
BYTES_PER_VOXEL = 12


def machine_memory() -> int | None:
    """This machine's physical memory in bytes, or None where it cannot be told."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def max_voxels() -> int:
    """The voxel limit: ``$INTRABENCH_MAX_VOXELS``, else the machine's memory over
    :data:`BYTES_PER_VOXEL`, at most :data:`DEFAULT_MAX_VOXELS`."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        memory = machine_memory()
        return (DEFAULT_MAX_VOXELS if memory is None
                else max(1, min(DEFAULT_MAX_VOXELS, memory // BYTES_PER_VOXEL)))
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
    where = data_file(path)
    if where is None:
        return
    data, compressed = where
    declared = int(np.prod(np.asarray(shape, dtype=object))) * _voxel_bytes(reader)
    size = data.stat().st_size if data.is_file() else 0
    if compressed and declared > size * DEFLATE_MAX_RATIO:
        raise DataError(f"{path}: truncated: {size} bytes of compressed data in {data.name} can "
                        f"hold at most {size * DEFLATE_MAX_RATIO} where the header announces "
                        f"{declared} (a cut file, or a header that lies)")
    if not compressed and declared > size:
        raise DataError(f"{path}: truncated: {data.name} holds {size} bytes of data where the "
                        f"header announces {declared} (missing voxels would be read as "
                        "zeros); re-download or re-convert the file")


def _voxel_bytes(reader) -> int:
    """Bytes of one voxel (all its components) of the image ``reader`` describes."""
    import SimpleITK as sitk

    size = [1] * reader.GetDimension()
    try:  # a vector pixel type (RGB, vectors) takes its number of components
        one = sitk.Image(size, reader.GetPixelID(), int(reader.GetNumberOfComponents() or 1))
    except RuntimeError:  # a scalar or complex type: its components are in the type itself
        one = sitk.Image(size, reader.GetPixelID())
    return int(sitk.GetArrayViewFromImage(one).nbytes)


def _header_fields(path: Path, separator: str, stop: str, most: int = 65536) -> dict[str, str]:
    """``key<separator>value`` lines of a text header (NRRD, MetaImage), lower-case keys, read
    up to ``most`` bytes and until a line that starts with ``stop`` (included) or is empty."""
    with open(path, "rb") as handle:
        head = handle.read(most)
    fields = {}
    for raw in head.split(b"\n"):
        line = raw.decode("latin-1").strip()
        if not line:
            break
        if separator in line:
            key, value = line.split(separator, 1)
            fields[key.strip().lower()] = value.strip()
            if key.strip().lower().startswith(stop):
                break
    return fields


def data_file(path: Path) -> tuple[Path, bool] | None:
    """(the file holding ``path``'s voxel data, whether that data is compressed) for the
    formats whose header says so plainly; None for others (DICOM, ...), which keep the voxel
    limit alone. The data may start after a header in the same file: its size is an upper
    bound, so a truncated file is still found."""
    name = path.name.lower()
    if name.endswith(".nii"):
        return path, False
    if name.endswith(".gz") and name[:-3].endswith((".nii", ".img", ".hdr")):
        return path, True
    if name.endswith(".hdr"):  # Analyze / NIfTI pair: the data is the .img beside it
        for suffix, compressed in ((".img", False), (".img.gz", True)):
            image = path.with_name(path.name[:-4] + suffix)
            if image.is_file():
                return image, compressed
        return path.with_name(path.name[:-4] + ".img"), False
    if name.endswith(".img"):
        return path, False
    if name.endswith((".nrrd", ".nhdr")):
        fields = _header_fields(path, ":", "data file")
        encoding = fields.get("encoding", "raw").lower()
        if encoding in ("txt", "text", "ascii"):
            return None  # numbers as text: no fixed size per voxel
        detached = fields.get("data file") or fields.get("datafile")
        target = path if not detached else path.parent / detached
        if detached and (" " in detached or detached.upper() == "LIST"):
            return None  # a list or pattern of files: left to ITK
        return target, encoding not in ("raw",)
    if name.endswith((".mha", ".mhd")):
        fields = _header_fields(path, "=", "elementdatafile")
        compressed = fields.get("compresseddata", "false").lower() == "true"
        element = fields.get("elementdatafile", "LOCAL")
        if element.upper() == "LOCAL":
            return path, compressed
        if " " in element or element.upper() == "LIST":
            return None
        return path.parent / element, compressed
    return None
