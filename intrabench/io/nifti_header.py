"""Where a NIfTI file's voxels are: data offset, shape, voxel type and scaling, from its header.

:func:`intrabench.io.volume.check_nifti` needs only these three fields of a file SimpleITK has
just read. nibabel gives them too, but importing it imports pydicom and requests (time
before a run's first forward pass, docs/performance.md), so the fixed-layout NIfTI-1 (348 bytes) and
NIfTI-2 (540 bytes) headers of single files (``.nii``, ``.nii.gz``; magic ``n+1`` / ``n+2``)
are read here, in either byte order, for the plain scalar voxel types. :func:`data_layout`
returns None for anything else (another magic, a data type outside :data:`VOXEL_TYPES`, an
implausible size or offset), and the caller asks nibabel, whose messages name the problem.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: NIfTI datatype code -> voxel type (byte order applied from the header)
VOXEL_TYPES: dict[int, str] = {
    2: "u1",
    4: "i2",
    8: "i4",
    16: "f4",
    64: "f8",
    256: "i1",
    512: "u2",
    768: "u4",
    1024: "i8",
    1280: "u8",
}

_NIFTI1_SIZE, _NIFTI2_SIZE = 348, 540
_NIFTI2_MAGIC = b"n+2\0\r\n\x1a\n"


@dataclass(frozen=True)
class DataLayout:
    """The voxel data of a single-file NIfTI: ``offset`` bytes into the (decompressed) file,
    ``shape`` as the header's ``dim[1:dim[0]+1]`` (x fastest on disk), ``dtype`` with the
    file's byte order."""

    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    #: ``scl_slope`` and ``scl_inter``: stored value x slope + inter is the voxel's value
    #: (no scaling when the slope is 0 or NaN)
    slope: float = 1.0
    inter: float = 0.0
    #: spatial axes (0: i, 1: j, 2: k) whose ``pixdim`` is 0 or not finite in a header with
    #: neither a qform nor an sform (its grid comes from ``pixdim`` alone): ITK reads 1 mm
    #: there
    unset_voxel_size: tuple[int, ...] = ()

    @property
    def scaled(self) -> bool:
        """Whether a reader applies the header's scaling (as ITK and nibabel do)."""
        return bool(
            np.isfinite(self.slope)
            and self.slope != 0
            and (self.slope != 1 or (np.isfinite(self.inter) and self.inter != 0))
        )

    @property
    def end(self) -> int:
        """Where the data must reach: offset + voxels x voxel size."""
        return self.offset + int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _first_bytes(path: Path, count: int) -> bytes:
    if path.name.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read(count)
        except (OSError, EOFError, zlib.error):
            return b""
    with open(path, "rb") as handle:
        return handle.read(count)


def data_layout(path: str | Path) -> DataLayout | None:
    """The layout of ``path``'s voxel data, or None when its header is not a plain one
    (see the module docstring).

    Args:
        path: A ``.nii`` or ``.nii.gz`` file (only its first 540 bytes, decompressed, are read).

    Returns:
        The data's offset, shape, dtype and scaling as the header gives them, or None.
    """
    header = _first_bytes(Path(path), _NIFTI2_SIZE)
    for order in "<>":
        if len(header) >= _NIFTI1_SIZE and _int(header, order, "i4", 0) == _NIFTI1_SIZE:
            return _nifti1(header, order)
        if len(header) >= _NIFTI2_SIZE and _int(header, order, "i4", 0) == _NIFTI2_SIZE:
            return _nifti2(header, order)
    return None


def _int(header: bytes, order: str, kind: str, at: int, count: int = 1):
    values = np.frombuffer(header, dtype=np.dtype(order + kind), count=count, offset=at)
    return int(values[0]) if count == 1 else [int(v) for v in values]


def _nifti1(header: bytes, order: str) -> DataLayout | None:
    if header[344:348] != b"n+1\0":
        return None
    offset = float(np.frombuffer(header, dtype=np.dtype(order + "f4"), count=1, offset=108)[0])
    if not np.isfinite(offset) or offset != int(offset) or offset < _NIFTI1_SIZE + 4:
        return None
    slope, inter = np.frombuffer(header, dtype=np.dtype(order + "f4"), count=2, offset=112)
    pixdim = np.frombuffer(header, dtype=np.dtype(order + "f4"), count=8, offset=76)
    codes = (_int(header, order, "i2", 252), _int(header, order, "i2", 254))
    return _layout(
        order,
        _int(header, order, "i2", 70),
        _int(header, order, "i2", 72),
        _int(header, order, "i2", 40, 8),
        int(offset),
        float(slope),
        float(inter),
        _unset_voxel_size(pixdim, codes),
    )


def _nifti2(header: bytes, order: str) -> DataLayout | None:
    if header[4:12] != _NIFTI2_MAGIC:
        return None
    offset = _int(header, order, "i8", 168)
    if offset < _NIFTI2_SIZE + 4:
        return None
    slope, inter = np.frombuffer(header, dtype=np.dtype(order + "f8"), count=2, offset=176)
    pixdim = np.frombuffer(header, dtype=np.dtype(order + "f8"), count=8, offset=104)
    codes = (_int(header, order, "i4", 344), _int(header, order, "i4", 348))
    return _layout(
        order,
        _int(header, order, "i2", 12),
        _int(header, order, "i2", 14),
        _int(header, order, "i8", 16, 8),
        offset,
        float(slope),
        float(inter),
        _unset_voxel_size(pixdim, codes),
    )


def _unset_voxel_size(pixdim: np.ndarray, codes: tuple[int, int]) -> tuple[int, ...]:
    """Spatial axes whose voxel size the header leaves unset (see DataLayout)."""
    if any(codes):  # a qform or sform gives the grid
        return ()
    # a negative size is a flip that ITK turns into the direction: a size all the same
    return tuple(
        axis for axis in range(3) if not (np.isfinite(pixdim[axis + 1]) and pixdim[axis + 1] != 0)
    )


def _layout(
    order: str,
    datatype: int,
    bitpix: int,
    dim: list[int],
    offset: int,
    slope: float,
    inter: float,
    unset_voxel_size: tuple[int, ...] = (),
) -> DataLayout | None:
    kind = VOXEL_TYPES.get(datatype)
    if kind is None or not 1 <= dim[0] <= 7:
        return None
    dtype = np.dtype(order + kind)
    shape = tuple(dim[1 : dim[0] + 1])
    if bitpix != 8 * dtype.itemsize or any(n < 1 for n in shape):
        return None
    return DataLayout(
        offset=offset,
        shape=shape,
        dtype=dtype,
        slope=slope,
        inter=inter,
        unset_voxel_size=unset_voxel_size[: len(shape)],
    )
