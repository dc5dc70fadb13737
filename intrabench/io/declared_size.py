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
* NRRD and MetaImage text headers, before SimpleITK parses them (:func:`check_text_header`;
  some crashed it with SIGSEGV, killing the process that read them, others hung it or took
  seconds): a dimension outside 1..5, per-axis fields with more entries than axes, space
  vectors longer than NRRD's 8, a header past 1 MiB, more than 4096 ``key:=value`` lines,
  text (``ascii``) data too short for the declared voxels, more data files than voxels.
* A compressed MetaImage's zlib stream is inflated and counted (nothing kept): ITK reads a
  cut stream without a word and leaves the missing voxels as whatever memory held.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from intrabench.errors import DataError
from intrabench.io.nifti_header import data_layout
from intrabench.io.raw_image import inflated_size

LIMIT_VARIABLE = "INTRABENCH_MAX_VOXELS"
DEFAULT_MAX_VOXELS = 2_000_000_000
#: deflate's largest expansion (a stream of zeros): 1032 output bytes per input byte
DEFLATE_MAX_RATIO = 1032


#: bytes of memory a voxel of a case takes while it is read and used (float32 image, its
#: working copy, the label): the default limit is the machine's memory over this
BYTES_PER_VOXEL = 12


def machine_memory() -> int | None:
    """This machine's physical memory in bytes, or None where it cannot be told.

    Returns:
        Page size x physical pages, or None.
    """
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def max_voxels() -> int:
    """The voxel limit: ``$INTRABENCH_MAX_VOXELS``, else the machine's memory over
    :data:`BYTES_PER_VOXEL`, at most :data:`DEFAULT_MAX_VOXELS`.

    Returns:
        The most voxels an image's header may declare (at least 1).

    Raises:
        DataError: ``$INTRABENCH_MAX_VOXELS`` is not a number, or below 1.
    """
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        memory = machine_memory()
        return (
            DEFAULT_MAX_VOXELS
            if memory is None
            else max(1, min(DEFAULT_MAX_VOXELS, memory // BYTES_PER_VOXEL))
        )
    try:
        value = int(float(text))
    except ValueError:
        raise DataError(f"{LIMIT_VARIABLE}={text!r} is not a number of voxels") from None
    if value < 1:
        raise DataError(f"{LIMIT_VARIABLE} must be at least 1, not {value}")
    return value


def check_voxel_count(name: str, shape: tuple[int, ...]) -> None:
    """DataError when ``shape`` holds more voxels than :func:`max_voxels`.

    Args:
        name: What the message calls the image (its file name).
        shape: The shape the header declares, any number of axes (a vector image's components
            as the last one).

    Raises:
        DataError: Naming the shape, its voxel count and the limit's variable.
    """
    voxels = int(np.prod(np.asarray(shape, dtype=object))) if len(shape) else 0
    limit = max_voxels()
    if voxels > limit:
        raise DataError(
            f"{name}: the header declares {' x '.join(map(str, shape))} = "
            f"{voxels:,} voxels, more than the limit of {limit:,} "
            f"(set {LIMIT_VARIABLE} to read larger images)"
        )


def check_declared_size(path: str | Path, layout=None) -> None:
    """DataError when ``path``'s header declares more data than the file holds or the voxel
    limit allows (module docstring); nothing for a file whose size is plausible.

    Args:
        path: An image file of any format SimpleITK reads.
        layout: The NIfTI header's :class:`~intrabench.io.nifti_header.DataLayout` when the
            caller has read it already (it is not read again); None: read here when needed.

    Raises:
        DataError: The header declares more voxels than :func:`max_voxels`, more data than the
            file (or its gzip stream, at most :data:`DEFLATE_MAX_RATIO` times its size) can
            hold, or is a NRRD or MetaImage header ITK cannot read safely.
    """
    path = Path(path)
    if path.name.endswith((".nii", ".nii.gz")):
        layout = layout if layout is not None else data_layout(path)
        if layout is not None:
            check_voxel_count(path.name, layout.shape)
            size = path.stat().st_size
            if path.name.endswith(".gz"):
                most = size * DEFLATE_MAX_RATIO
                if layout.end > most:
                    raise DataError(
                        f"{path}: truncated: a {size}-byte gzip file holds at most "
                        f"{most} bytes where the header announces {layout.end} "
                        "(a cut file, or a header that lies); re-download or "
                        "re-convert the file"
                    )
            elif layout.end > size:  # the wording of volume.truncated_error
                raise DataError(
                    f"{path}: truncated: {size} bytes where the header announces "
                    f"{layout.end} (missing voxels would be read as zeros); "
                    "re-download or re-convert the file"
                )
            return
    header = read_text_header(path)  # DataError for a header past the bound
    if header is not None:  # before ITK parses it: some headers crash it (SIGSEGV)
        check_text_header(path, header)
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
    voxels = int(np.prod(np.asarray(shape, dtype=object))) * components
    if header is not None and _is_text_encoded(path, header):
        _check_text_data(path, header, voxels)
        return
    where = data_file(path, header)
    if where is None:
        return
    data, compressed = where
    declared = int(np.prod(np.asarray(shape, dtype=object))) * _voxel_bytes(reader)
    size = data.stat().st_size if data.is_file() else 0
    if compressed and declared > size * DEFLATE_MAX_RATIO:
        raise DataError(
            f"{path}: truncated: {size} bytes of compressed data in {data.name} can "
            f"hold at most {size * DEFLATE_MAX_RATIO} where the header announces "
            f"{declared} (a cut file, or a header that lies)"
        )
    if not compressed and declared > size:
        raise DataError(
            f"{path}: truncated: {data.name} holds {size} bytes of data where the "
            f"header announces {declared} (missing voxels would be read as "
            "zeros); re-download or re-convert the file"
        )
    if compressed and path.name.lower().endswith((".mha", ".mhd")) and header is not None:
        _check_meta_stream(path, data, header, declared)


def _is_text_encoded(path: Path, header: TextHeader) -> bool:
    """Whether a NRRD header says its voxels are numbers written as text."""
    return path.name.lower().endswith((".nrrd", ".nhdr")) and header.fields.get(
        "encoding", "raw"
    ).lower() in ("txt", "text", "ascii")


def _check_text_data(path: Path, header: TextHeader, voxels: int) -> None:
    """DataError when a NRRD file's text data is too short to hold ``voxels`` numbers (each
    a digit at least, with a space between): ITK allocated the declared image and parsed for
    seconds before it found out."""
    size = _text_data_bytes(path, header)
    if size is not None and 2 * voxels - 1 > size:
        raise DataError(
            f"{path}: truncated: {size} bytes of text data cannot hold the "
            f"{voxels:,} numbers the header announces (a cut file, or a header "
            "that lies); re-download or re-convert the file"
        )


def _check_meta_stream(path: Path, data: Path, header: TextHeader, declared: int) -> None:
    """DataError unless a compressed MetaImage's zlib stream inflates to the ``declared``
    bytes: ITK reads a cut stream without a word, and leaves the missing voxels as whatever
    memory held (a Dice that changed from run to run). One pass over the stream, nothing
    kept. The stream is ``CompressedDataSize`` bytes (ITK reads that many), the rest of a
    detached data file without it."""
    offset = header.end if data == path else 0
    available = max((data.stat().st_size if data.is_file() else 0) - offset, 0)
    given = header.fields.get("compresseddatasize")
    length = _integer(given) if given is not None else None
    if (length is None and data == path) or (length is not None and length <= 0):
        raise DataError(
            f"{path}: compressed data without a CompressedDataSize (ITK reads it "
            "as whatever memory held); re-convert the file (SimpleITK writes the "
            "size)"
        )
    if length is not None and length > available:
        raise DataError(
            f"{path}: truncated: {available} bytes of compressed data where the "
            f"header announces a CompressedDataSize of {length}; re-download or "
            "re-convert the file"
        )
    try:
        size, complete = inflated_size(
            data, offset, available if length is None else length, declared
        )
    except zlib.error as error:
        raise DataError(
            f"{path}: the compressed data is corrupt ({error}); re-download or re-convert the file"
        ) from None
    if size < declared:
        ended = "ends" if complete else "is cut"
        raise DataError(
            f"{path}: truncated: the compressed data {ended} after {size} bytes "
            f"where the header announces {declared} (missing voxels would hold "
            "whatever memory held); re-download or re-convert the file"
        )


def _voxel_bytes(reader) -> int:
    """Bytes of one voxel (all its components) of the image ``reader`` describes."""
    import SimpleITK as sitk

    size = [1] * reader.GetDimension()
    try:  # a vector pixel type (RGB, vectors) takes its number of components
        one = sitk.Image(size, reader.GetPixelID(), int(reader.GetNumberOfComponents() or 1))
    except RuntimeError:  # a scalar or complex type: its components are in the type itself
        one = sitk.Image(size, reader.GetPixelID())
    return int(sitk.GetArrayViewFromImage(one).nbytes)


#: bytes a NRRD or MetaImage text header may take: real headers take a few kilobytes (a
#: segmentation of a hundred segments, tens); ITK takes seconds over a 20 MB header line and
#: tens of seconds over 18 MB of comments
MAX_TEXT_HEADER_BYTES = 1 << 20
#: NRRD ``key:=value`` lines a header may hold: ITK's reader is quadratic in them (65,536
#: took more than a minute)
MAX_KEY_VALUES = 4096
#: image dimensions a text header may declare: ITK reads at most 5, and NRRD headers of 11 or
#: more dimensions crashed it (SIGSEGV, killing the process that read them)
MAX_DIMENSION = 5
#: NRRD's largest space dimension (``NRRD_SPACE_DIM_MAX``); longer vectors crashed ITK
MAX_SPACE_DIMENSION = 8
#: NRRD fields with one entry per axis: more entries than axes crashed ITK (SIGSEGV)
NRRD_PER_AXIS = (
    "sizes",
    "spacings",
    "thicknesses",
    "axis mins",
    "axismins",
    "axis maxs",
    "axismaxs",
    "centers",
    "centerings",
    "kinds",
    "labels",
    "units",
    "space directions",
)
#: NRRD fields that hold space vectors ``(x,y,z)``
NRRD_VECTORS = ("space directions", "space origin", "measurement frame")


@dataclass
class TextHeader:
    """A NRRD or MetaImage text header as read by :func:`read_text_header`."""

    #: ``key: value`` (NRRD) or ``Key = Value`` (MetaImage) fields, lower-case keys
    fields: dict[str, str]
    #: the byte offset where the header ends (attached data starts there)
    end: int
    #: NRRD ``key:=value`` lines
    key_values: int = 0
    #: file names listed after ``data file: LIST`` / ``ElementDataFile = LIST``
    listed_files: int = 0


def read_text_header(path: Path) -> TextHeader | None:
    """The text header of a NRRD (``.nrrd``, ``.nhdr``) or MetaImage (``.mha``, ``.mhd``)
    file, read up to :data:`MAX_TEXT_HEADER_BYTES`.

    Args:
        path: The image file (only its first MiB is read).

    Returns:
        The header's fields and where it ends; None for other files and for a NRRD file without
        the ``NRRD`` magic (ITK reports those).

    Raises:
        DataError: The header does not end within the bound.
    """
    name = path.name.lower()
    nrrd = name.endswith((".nrrd", ".nhdr"))
    if not nrrd and not name.endswith((".mha", ".mhd")):
        return None
    with open(path, "rb") as handle:
        head = handle.read(MAX_TEXT_HEADER_BYTES + 1)
    if nrrd and not head.startswith(b"NRRD"):
        return None
    header = TextHeader({}, len(head))
    position, listing, ended = 0, False, False
    while position < len(head):
        stop = head.find(b"\n", position)
        if stop < 0:
            if len(head) > MAX_TEXT_HEADER_BYTES:
                break  # a line cut by the bound: the header goes on
            stop = len(head)
        line = head[position:stop].decode("latin-1").strip()
        position = stop + 1
        if nrrd and not line:  # the blank line after a NRRD header: attached data follows
            ended = True
            break
        if listing:
            header.listed_files += 1
        elif nrrd:
            listing = _nrrd_line(header, line)
        elif "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            header.fields[key.lower()] = value
            if key.lower() == "elementdatafile":
                ended = value.split()[0].upper() != "LIST" if value else True
                listing = not ended
                if ended:
                    break
    header.end = min(position, len(head))
    if not ended and len(head) > MAX_TEXT_HEADER_BYTES:
        raise DataError(
            f"{path}: the header goes on past {MAX_TEXT_HEADER_BYTES:,} bytes "
            "(real headers take a few kilobytes: a damaged or hostile file); "
            "re-convert the image"
        )
    return header


def _nrrd_line(header: TextHeader, line: str) -> bool:
    """Take one NRRD header line into ``header``; whether it starts a ``data file: LIST``."""
    if line.startswith(("#", "NRRD")) or not line:
        return False
    if ":=" in line:
        header.key_values += 1
        return False
    if ":" in line:
        key, value = (part.strip() for part in line.split(":", 1))
        header.fields[key.lower()] = value
        return key.lower() in ("data file", "datafile") and value.split()[:1] == ["LIST"]
    return False


def check_text_header(path: Path, header: TextHeader) -> None:
    """DataError for a NRRD or MetaImage header that ITK reads for seconds or crashes on, before
    ITK sees it.

    Refused: a dimension ITK cannot hold, per-axis fields with more entries than axes, vectors
    longer than NRRD's space, too many key/value lines or listed files.

    Args:
        path: The image file, for the message (its suffix tells NRRD from MetaImage).
        header: Its header as :func:`read_text_header` read it.

    Raises:
        DataError: Naming the field that is out of bounds.
    """
    nrrd = path.name.lower().endswith((".nrrd", ".nhdr"))
    fields = header.fields
    key = "dimension" if nrrd else "ndims"
    if key not in fields:
        return  # ITK reports a header without one
    dimension = _integer(fields[key])
    shown = "dimension" if nrrd else "NDims"
    if dimension is None or not 1 <= dimension <= MAX_DIMENSION:
        raise DataError(
            f"{path}: the header declares {shown} {fields[key]!r}; IntraBench "
            f"reads 3D images (ITK at most {MAX_DIMENSION} dimensions): a damaged "
            "or hostile header"
        )
    per_axis = NRRD_PER_AXIS if nrrd else ("dimsize",)
    for field in per_axis:
        if field in fields and _entries(field, fields[field]) != dimension:
            raise DataError(
                f"{path}: the header's '{field}' has {_entries(field, fields[field])}"
                f" entries for {dimension} dimensions: a damaged or hostile header"
            )
    if nrrd:
        _check_nrrd_space(path, fields)
        if header.key_values > MAX_KEY_VALUES:
            raise DataError(
                f"{path}: the header holds {header.key_values:,} key:=value lines, "
                f"more than {MAX_KEY_VALUES:,} (ITK would read it for minutes): "
                "a damaged or hostile header"
            )
    _check_listed_files(path, header, dimension)


def _integer(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _entries(field: str, value: str) -> int:
    """How many per-axis entries a NRRD (or MetaImage ``DimSize``) field's value holds."""
    if field in ("labels", "units"):
        return len(re.findall(r'"(?:[^"\\]|\\.)*"', value))
    if field == "space directions":
        return len(re.findall(r"\([^)]*\)|\bnone\b", value))
    return len(value.split())


def _check_nrrd_space(path: Path, fields: dict[str, str]) -> None:
    """DataError for a space dimension or space vector longer than NRRD's largest space."""
    declared = fields.get("space dimension")
    if declared is not None:
        value = _integer(declared)
        if value is None or not 1 <= value <= MAX_SPACE_DIMENSION:
            raise DataError(
                f"{path}: the header declares space dimension {declared!r}, "
                f"outside 1..{MAX_SPACE_DIMENSION}: a damaged or hostile header"
            )
    for field in NRRD_VECTORS:
        vectors = re.findall(r"\(([^)]*)\)", fields.get(field, ""))
        longest = max((len(v.split(",")) for v in vectors), default=0)
        if longest > MAX_SPACE_DIMENSION or len(vectors) > MAX_SPACE_DIMENSION:
            raise DataError(
                f"{path}: the header's '{field}' holds {len(vectors)} vectors of "
                f"up to {longest} values, more than NRRD's space of "
                f"{MAX_SPACE_DIMENSION}: a damaged or hostile header"
            )


def _check_listed_files(path: Path, header: TextHeader, dimension: int) -> None:
    """DataError when a header lists or numbers more data files than it declares voxels
    (ITK makes the names of a billion files for seconds before it refuses them)."""
    fields = header.fields
    sizes = [_integer(v) for v in (fields.get("sizes") or fields.get("dimsize") or "").split()]
    if len(sizes) != dimension or any(v is None or v < 0 for v in sizes):
        return  # ITK reports a bad size
    voxels = int(np.prod(np.asarray(sizes, dtype=object)))
    files = header.listed_files
    pattern = (
        fields.get("data file") or fields.get("datafile") or fields.get("elementdatafile") or ""
    ).split()
    if len(pattern) >= 4 and "%" in pattern[0]:
        low, high, step = (_integer(v) for v in pattern[1:4])
        if None not in (low, high, step) and step != 0 and (high - low) * step >= 0:
            files = max(files, (high - low) // step + 1)
    if files > max(voxels, 1):
        raise DataError(
            f"{path}: the header names {files:,} data files for {voxels:,} "
            "voxels: a damaged or hostile header"
        )


def _text_data_bytes(path: Path, header: TextHeader) -> int | None:
    """Bytes of a NRRD file's text (``encoding: ascii``) data: after the header, or its
    detached data file's size; None where they cannot be told (lists, patterns)."""
    detached = header.fields.get("data file") or header.fields.get("datafile")
    if not detached:
        return max(path.stat().st_size - header.end, 0)
    if " " in detached or detached.upper() == "LIST":
        return None
    target = path.parent / detached
    return target.stat().st_size if target.is_file() else 0


def data_file(path: Path, header: TextHeader | None = None) -> tuple[Path, bool] | None:
    """(the file holding ``path``'s voxel data, whether that data is compressed) for the
    formats whose header says so plainly.

    The data may start after a header in the same file: its size is an upper bound, so a
    truncated file is still found.

    Args:
        path: The image file (NIfTI, Analyze, NRRD, MetaImage, ...).
        header: A NRRD or MetaImage file's text header when the caller has read it already;
            None: read here when needed.

    Returns:
        ``(data file, compressed)``, or None for other formats (DICOM, ...) and data spread
        over a list of files or written as text, which keep the voxel limit alone.
    """
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
    header = read_text_header(path) if header is None else header
    if header is None:
        return None
    fields = header.fields
    if name.endswith((".nrrd", ".nhdr")):
        encoding = fields.get("encoding", "raw").lower()
        if encoding in ("txt", "text", "ascii"):
            return None  # numbers as text: no fixed size per voxel
        detached = fields.get("data file") or fields.get("datafile")
        target = path if not detached else path.parent / detached
        if detached and (" " in detached or detached.upper() == "LIST"):
            return None  # a list or pattern of files: left to ITK
        return target, encoding not in ("raw",)
    if name.endswith((".mha", ".mhd")):
        compressed = fields.get("compresseddata", "false").lower() == "true"
        element = fields.get("elementdatafile", "LOCAL")
        if element.upper() == "LOCAL":
            return path, compressed
        if " " in element or element.upper() == "LIST":
            return None
        return path.parent / element, compressed
    return None
