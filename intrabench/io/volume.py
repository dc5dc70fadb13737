"""Reading images into the canonical (z, y, x) orientation and writing results back.

Conventions
-----------
* Canonical orientation: the voxel axes closest to RAS+ (x increases towards R, y towards A,
  z towards S, as ``nibabel.as_closest_canonical`` gives),
  held as a numpy array indexed ``array[z, y, x]``. Axis 0 is the axial slice axis.
* Spacing is in millimetres, in the same (z, y, x) order as the array.
* The original on-disk geometry (SimpleITK conventions: size/spacing/origin in (i, j, k) order,
  LPS world) is kept, so predictions are written back in the input's own space. Canonical
  reorientation is a pure axis permutation and flip, so the round trip is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from intrabench.errors import DataError
from intrabench.io.geometry import (  # noqa: F401 - re-exported: the grid lives there
    _LPS_TO_RAS,
    ImageGeometry,
    _axis_aligned_orientation,
    _inverse_orientation,
)
from intrabench.io.nifti_header import data_layout
from intrabench.io.raw_image import (  # noqa: F401 - re-exported: reading lives there
    RawImage,
    _file_blocks,
    _PixelBuffer,
    all_finite,
    truncated_error,
)

if TYPE_CHECKING:
    import SimpleITK as sitk

# SimpleITK and nibabel (which imports pydicom) are imported where they are used: processes
# that only hold volumes (the simulated users' workers) start sooner without them


def to_canonical(native_kji: np.ndarray, geometry: ImageGeometry) -> np.ndarray:
    """SimpleITK-order array (k, j, i) -> canonical (z, y, x) array (a view when possible).

    Args:
        native_kji: The voxels as SimpleITK returns them, indexed (k, j, i) in the file's own
            voxel order; any dtype.
        geometry: The file's grid, whose direction gives the axis permutation and flips.

    Returns:
        The same voxels indexed (z, y, x) closest to RAS+; a view of ``native_kji`` (flipped and
        transposed strides) whenever numpy can express it, so it may not be C-ordered.
    """
    import nibabel as nib

    ijk = np.transpose(native_kji, (2, 1, 0))
    ras = nib.orientations.apply_orientation(ijk, geometry.orientation())
    return np.transpose(ras, (2, 1, 0))


def to_canonical_in_place(native_kji: np.ndarray, geometry: ImageGeometry) -> np.ndarray:
    """:func:`to_canonical`, made in ``native_kji``'s own memory when possible.

    When the file's axes are already in canonical order and only flipped (the common LPS/RAS
    storage), the result is ``native_kji`` itself, its values reordered in place (its old content is
    lost). Otherwise (axes permuted, or an array that is not writable and C-ordered) a new C-ordered
    array. Flipping in place allocates one slice at a time, where a copy of a CT volume allocates
    (and, on first touch, faults in) as much memory as the volume.

    Args:
        native_kji: The voxels indexed (k, j, i) in the file's order; overwritten when it is a
            writable, C-ordered 3D array whose axes need only flips.
        geometry: The file's grid (its direction gives the permutation and flips).

    Returns:
        A C-ordered (z, y, x) array: ``native_kji`` itself when reoriented in place, else a copy.
    """
    orientation = geometry.orientation()
    if (
        not np.array_equal(orientation[:, 0], [0, 1, 2])
        or not native_kji.flags.c_contiguous
        or not native_kji.flags.writeable
        or native_kji.ndim != 3
    ):
        return np.ascontiguousarray(to_canonical(native_kji, geometry))
    flip_z, flip_y, flip_x = (bool(orientation[axis, 1] < 0) for axis in (2, 1, 0))
    plane = (slice(None, None, -1 if flip_y else 1), slice(None, None, -1 if flip_x else 1))
    depth = native_kji.shape[0]
    if flip_z:
        for z in range(depth // 2):
            other = depth - 1 - z
            first = native_kji[z].copy()
            native_kji[z] = native_kji[other][plane]
            native_kji[other] = first[plane]
        if depth % 2 and (flip_y or flip_x):
            middle = native_kji[depth // 2]
            middle[...] = middle[plane].copy()
    elif flip_y or flip_x:
        for z in range(depth):
            native_kji[z] = native_kji[z][plane].copy()
    return native_kji


def from_canonical(canonical_zyx: np.ndarray, geometry: ImageGeometry) -> np.ndarray:
    """Canonical (z, y, x) array -> SimpleITK-order (k, j, i) array on the original grid.

    The inverse of :func:`to_canonical`: a pure axis permutation and flip, so the round trip is
    exact.

    Args:
        canonical_zyx: An array indexed (z, y, x), of the grid's canonical shape; any dtype.
        geometry: The original grid to return to.

    Returns:
        A C-ordered array indexed (k, j, i) in the file's voxel order, ready for
        ``SimpleITK.GetImageFromArray``.
    """
    import nibabel as nib

    ras = np.transpose(canonical_zyx, (2, 1, 0))
    ijk = nib.orientations.apply_orientation(ras, _inverse_orientation(geometry.orientation()))
    return np.ascontiguousarray(np.transpose(ijk, (2, 1, 0)))


def native_index(points_zyx: np.ndarray, geometry: ImageGeometry) -> np.ndarray:
    """(N, 3) canonical (z, y, x) voxel indices -> the same voxels' (k, j, i) indices in the
    file's own voxel order (SimpleITK's array order), as :func:`from_canonical` moves them.

    Args:
        points_zyx: Integer voxel indices, shape (N, 3), columns (z, y, x) in canonical order.
        geometry: The file's grid.

    Returns:
        Shape (N, 3), columns (k, j, i), of ``points_zyx``'s dtype.
    """
    import nibabel as nib

    # nibabel's affine from reoriented (RAS) array indices back to the file's (i, j, k)
    back = nib.orientations.inv_ornt_aff(geometry.orientation(), geometry.size)
    ras = np.asarray(points_zyx)[:, ::-1]
    ijk = ras @ back[:3, :3].T + back[:3, 3]
    return np.rint(ijk[:, ::-1]).astype(np.asarray(points_zyx).dtype)


@dataclass(frozen=True, eq=False)
class Volume:
    """A 3D image in canonical orientation.

    Attributes:
        array: The voxels, indexed (z, y, x) (float32 as read; CT in HU).
        spacing: Voxel spacing in mm, in the same (z, y, x) order.
        geometry: The original on-disk geometry, to write results back on the file's grid.
        modality: What the dataset declares: ``"CT"``, ``"MR"`` or ``""`` (unknown; see
            :mod:`intrabench.modality`).
    """

    array: np.ndarray
    spacing: tuple[float, float, float]
    geometry: ImageGeometry
    modality: str = ""

    def with_modality(self, modality: str) -> Volume:
        """This volume (same array, no copy) with ``modality`` set.

        Args:
            modality: ``"CT"``, ``"MR"`` or ``""`` (unknown), as in :attr:`modality`.

        Returns:
            A new :class:`Volume` sharing this one's array, spacing and geometry.
        """
        from dataclasses import replace

        return replace(self, modality=modality)

    @property
    def shape(self) -> tuple[int, int, int]:
        """The array's shape ``(z, y, x)`` in voxels."""
        return tuple(self.array.shape)  # type: ignore[return-value]

    def to_sitk(self, canonical_zyx: np.ndarray) -> sitk.Image:
        """An image on this volume's original grid holding ``canonical_zyx`` (same shape).

        Args:
            canonical_zyx: An array indexed (z, y, x) of this volume's :attr:`shape` (a prediction,
                a label); its dtype becomes the image's pixel type.

        Returns:
            A SimpleITK image with the original file's size, spacing, origin and direction.

        Raises:
            ValueError: ``canonical_zyx`` has another shape than this volume.
        """
        if tuple(canonical_zyx.shape) != self.shape:
            raise ValueError(
                f"array shape {canonical_zyx.shape} does not match volume {self.shape}"
            )
        return image_on_grid(canonical_zyx, self.geometry)


def image_on_grid(canonical_zyx: np.ndarray, geometry: ImageGeometry) -> sitk.Image:
    """A SimpleITK image on ``geometry``'s original grid holding the canonical (z, y, x) array.

    Args:
        canonical_zyx: An array indexed (z, y, x) whose shape is that grid's, permuted to
            canonical order (``geometry.canonical_shape()``).
        geometry: The original on-disk grid (size, spacing, origin, direction).

    Returns:
        The image, its voxels in the file's own order, with the grid's spacing (mm), origin and
        direction.

    Raises:
        ValueError: The array's shape does not match the grid.
    """
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(from_canonical(canonical_zyx, geometry))
    if tuple(image.GetSize()) != tuple(geometry.size):
        raise ValueError(
            f"array shape {canonical_zyx.shape} does not match the grid {geometry.size}"
        )
    image.SetSpacing(geometry.spacing)
    image.SetOrigin(geometry.origin)
    image.SetDirection(geometry.direction)
    return image


def read_image(path: str | Path) -> RawImage:
    """Read a 3D image, its data checked (:func:`check_nifti` for NIfTI).

    Any format SimpleITK reads; a plain NIfTI file is read in one pass, see
    :mod:`intrabench.io.nifti_read`.

    Args:
        path: The image file (or DICOM series folder).

    Returns:
        The image as read: its voxels in the file's (k, j, i) order and its on-disk geometry.

    Raises:
        DataError: The file is missing, unreadable or truncated, or a NIfTI file holds NaN
            voxels (other formats are checked when the volume is made).
    """
    from intrabench.io.nifti_read import read_nifti_directly

    raw = read_nifti_directly(path)  # checks a NIfTI header's voxel size too
    if raw is not None:
        return raw
    return RawImage.from_sitk(read_sitk(path), name=str(path))


def volume_from_raw(raw: RawImage, *, name: str = "image", dtype=np.float32) -> Volume:
    """Canonical Volume from an image as read, in its own memory.

    The image is reoriented in place when its axes are only flipped (see
    :func:`to_canonical_in_place`) and copied only to change the voxel type to ``dtype`` (a CT
    volume's copy is costly, docs/performance.md).

    Args:
        raw: The image as read; its array may be overwritten (the volume takes it over).
        name: What the error messages call the image (usually its path).
        dtype: The voxel type of the volume's array (float32 by default).

    Returns:
        The volume: ``array`` (z, y, x) of ``dtype``, spacing in mm in (z, y, x) order.

    Raises:
        DataError: The spacing is not positive and finite, or a voxel is NaN or infinite.
    """
    spacing = raw.geometry.spacing
    if not all(np.isfinite(v) and v > 0 for v in spacing):
        shown = " x ".join(f"{v:g}" for v in spacing)
        raise DataError(
            f"{name}: voxel spacing {shown} mm (x, y, z) is not positive and "
            "finite; fix the image header's voxel size"
        )
    canonical = to_canonical_in_place(raw.array, raw.geometry)
    array = np.asarray(canonical, dtype=dtype)
    checked = raw.finite and array.dtype == canonical.dtype  # no conversion that could overflow
    if np.issubdtype(array.dtype, np.floating) and not checked and not all_finite(array):
        bad = int((~np.isfinite(array)).sum())
        raise DataError(
            f"{name}: {bad} voxels are NaN or infinite; clean the image before benchmarking"
        )
    return Volume(array=array, spacing=raw.geometry.canonical_spacing(), geometry=raw.geometry)


def volume_from_sitk(
    image: sitk.Image, *, name: str = "image", dtype=np.float32, owned: bool = False
) -> Volume:
    """Canonical Volume from a SimpleITK image; rejects 2D, 4D, vector and NaN images.

    Args:
        image: A 3D scalar SimpleITK image.
        name: What the error messages call the image (usually its path).
        dtype: The voxel type of the volume's array (float32 by default).
        owned: The image is the caller's to give away (just read, used by nothing else): its pixel
            buffer becomes the volume's array (see :func:`volume_from_raw`) instead of a copy.

    Returns:
        The volume: ``array`` (z, y, x) of ``dtype``, spacing in mm in (z, y, x) order.

    Raises:
        DataError: The image is not 3D scalar, its spacing is not positive and finite, or it
            holds NaN voxels.
    """
    raw = RawImage.from_sitk(image, name=name)
    if not owned:  # an owned copy: the buffer's view dies with the SimpleITK image
        raw = RawImage(array=np.array(raw.array, order="C", copy=True), geometry=raw.geometry)
    return volume_from_raw(raw, name=name, dtype=dtype)


def read_sitk(path: str | Path) -> sitk.Image:
    """Read an image file (or a DICOM series folder) with SimpleITK.

    A 4D image with one volume is taken as 3D; a NIfTI file is checked with :func:`check_nifti`.

    Args:
        path: The image file or DICOM series folder.

    Returns:
        The SimpleITK image, on the file's own grid.

    Raises:
        DataError: The path is missing, a broken link, or not an image SimpleITK reads.
    """
    import SimpleITK as sitk

    path = Path(path)
    if not path.exists():
        if path.is_symlink():
            raise DataError(f"{path} is a link that leads nowhere (broken, or a loop of links)")
        raise DataError(f"image not found: {path}")
    from intrabench.io.declared_size import check_declared_size

    check_declared_size(path)  # before SimpleITK allocates what a header declares
    try:
        image = sitk.ReadImage(str(path))
    except RuntimeError as error:
        first_line = str(error).strip().splitlines()[-1] if str(error).strip() else "unknown error"
        raise DataError(f"cannot read image {path}: {first_line}") from None
    if image.GetDimension() == 4 and image.GetSize()[3] == 1:
        image = image[:, :, :, 0]
    if path.name.endswith((".nii", ".nii.gz")):
        check_nifti(path)
    return image


def check_nifti(path: str | Path) -> None:
    """DataError unless the NIfTI file holds every voxel its header announces, and, for float
    data, no NaN or infinite voxel. One pass over the (decompressed) data, in 1 MiB blocks.

    SimpleITK reads a truncated ``.nii.gz`` without complaint and fills the missing voxels with
    zeros (a cut label then scores far too low), nibabel raises a bare EOFError on a cut float
    image, and SimpleITK's NIfTI reader turns NaN into 0. The header gives the data offset, shape
    and type; the data must reach offset + voxels x size.

    Args:
        path: A ``.nii`` or ``.nii.gz`` file.

    Raises:
        DataError: The header is unreadable, the data is shorter than the header announces, or a
            float voxel is NaN or infinite.
    """
    path = Path(path)
    layout = data_layout(path)  # a plain header, without importing nibabel
    if layout is not None:
        offset, shape, dtype = layout.offset, layout.shape, layout.dtype
    else:
        import nibabel as nib

        try:
            data = nib.load(str(path)).dataobj  # the header only: an array proxy, nothing read
            offset, shape, dtype = int(data.offset), data.shape, np.dtype(data.dtype)
        except Exception as error:  # nibabel raises many kinds on a damaged header
            raise DataError(
                f"{path}: unreadable NIfTI header ({type(error).__name__}: {error})"
            ) from None
    needed = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    floating = dtype.kind == "f"
    size, non_finite, carry = 0, 0, b""
    for block in _file_blocks(path):
        if floating:  # the data region's values, whole items only (the rest waits)
            start, stop = max(offset - size, 0), min(needed - size, len(block))
            if stop > start:
                values = carry + block[start:stop]
                usable = len(values) - len(values) % dtype.itemsize
                items = np.frombuffer(values[:usable], dtype=dtype)
                non_finite += int(items.size - np.count_nonzero(np.isfinite(items)))
                carry = values[usable:]
        size += len(block)
    if size < needed:
        raise truncated_error(path, size, needed)
    if non_finite:
        raise DataError(
            f"{path}: {non_finite} voxels are NaN or infinite; clean the image before benchmarking"
        )


def read_volume(path: str | Path, *, dtype=np.float32) -> Volume:
    """Read any SimpleITK-readable 3D image (NIfTI, NRRD, MHA, ...) into canonical orientation.

    Args:
        path: The image file (or DICOM series folder).
        dtype: The voxel type of the volume's array.

    Returns:
        The volume: ``array`` (z, y, x) of ``dtype``, spacing in mm.

    Raises:
        DataError: The file is missing or unreadable, its spacing is not positive and finite,
            or its voxels hold NaN.
    """
    return volume_from_raw(read_image(path), name=str(path), dtype=dtype)


def write_like(canonical_zyx: np.ndarray, reference: Volume, path: str | Path) -> None:
    """Write a canonical (z, y, x) array on ``reference``'s original grid, atomically.

    Args:
        canonical_zyx: The array to write, of ``reference.array``'s shape.
        reference: The volume whose on-disk geometry the file takes.
        path: The file to write (any SimpleITK format, by its suffix).
    """
    _write_atomically(reference.to_sitk(canonical_zyx), path)


def write_on_grid(canonical_zyx: np.ndarray, geometry: ImageGeometry, path: str | Path) -> None:
    """Write a canonical (z, y, x) array on the original grid ``geometry``, atomically (for
    processes that have the geometry but not the image).

    Args:
        canonical_zyx: The array to write, indexed (z, y, x), of the grid's canonical shape.
        geometry: The on-disk grid the file takes.
        path: The file to write (any SimpleITK format, by its suffix); its folder is created.

    Raises:
        OSError: The file could not be written completely (a full disk).
    """
    _write_atomically(image_on_grid(canonical_zyx, geometry), path)


def _write_atomically(image: sitk.Image, path: str | Path) -> None:
    import SimpleITK as sitk

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = "".join(path.suffixes)
    temporary = path.with_name(f".{path.name}.partial{suffix}")
    try:
        sitk.WriteImage(image, str(temporary), useCompression=True)
        # ITK can leave a short or empty file without raising when the disk fills up: check
        # it before it takes the real name
        if path.name.endswith((".nii", ".nii.gz")):
            check_nifti(temporary)
        elif temporary.stat().st_size == 0:
            raise DataError(f"{temporary}: empty after writing")
    except (DataError, RuntimeError) as error:
        temporary.unlink(missing_ok=True)
        import errno

        raise OSError(
            errno.EIO,
            f"could not write a complete file ({str(error).splitlines()[-1]}; is the disk full?)",
            str(path),
        ) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    temporary.replace(path)
