"""Connected components of a mask (cc3d's), safe on masks that are a line of voxels.

cc3d 4.1's path for boolean input sizes its union-find array from an estimate that is too
small for a mask whose voxels lie on one line (two axes of length 1) under 26-connectivity:
``[[[True, False, True]]]`` raises "maximum length exception" (found by hypothesis in
tests/datasets/test_label_dtypes.py; 47 of 60,000 random small masks failed, all such lines,
none under 6- or 18-connectivity or in 2D). The same mask viewed as uint8 (no copy) takes
cc3d's general path, which labels it correctly, and was no slower on a 200 x 512 x 512 mask
of 40 lesions (0.07 s either way). Its path for a single row of voxels (or pixels) also misreads
a row that is a strided view (``IndexError`` or wrong labels, any dtype), so a mask that is
neither C- nor Fortran-contiguous is copied into a contiguous array first. And cc3d rejects a
read-only array that is a view of another ("buffer source array is read-only", any dtype; seen
when the Dask workers' masks arrive read-only and the uint8 view above is taken of them), so a
read-only mask is copied first. The label reader, the shape attributes, the prompters'
geometry and scribbles, region growing, the classical refiners, the synthetic network and the
dataset converters label through :func:`connected_components`.

Array conventions: any number of axes as cc3d takes them ((z, y, x) volumes, (y, x) slices);
labels 1..N as cc3d numbers them, 0 the background.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def connected_components(
    mask: np.ndarray,
    connectivity: int,
    return_N: bool = False,  # noqa: N803
) -> Any:
    """``cc3d.connected_components(mask, connectivity=..., return_N=...)``; a boolean ``mask``
    is passed as a uint8 view, a read-only or strided one copied first (see the module's
    docstring). The mask itself is never written.

    Args:
        mask: Boolean or integer array, (z, y, x) or (y, x) (cc3d's conventions).
        connectivity: cc3d's connectivity: 6, 18 or 26 in 3D, 4 or 8 in 2D.
        return_N: Also return the number of components.

    Returns:
        The label array of ``mask``'s shape (components 1..N, 0 the background), and N as
        well, ``(labels, N)``, when ``return_N``.
    """
    import cc3d

    array = np.asarray(mask)
    if not array.flags.writeable:
        array = np.array(array, order="K")  # cc3d's memoryviews reject a read-only view
    if array.dtype == bool:
        array = array.view(np.uint8)
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        array = np.ascontiguousarray(array)  # cc3d's single-row path misreads a strided row
    return cc3d.connected_components(array, connectivity=connectivity, return_N=return_N)


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest connected component of ``mask`` (8-connected in 2D, 26-connected in 3D);
    ties: the lowest label.

    Args:
        mask: Boolean array, (z, y, x) or (y, x).

    Returns:
        A boolean array of ``mask``'s shape; all False when ``mask`` is empty. Only the
        mask's bounding box is labelled.
    """
    from intrabench.masks.boxes import mask_corners

    if not mask.any():
        return np.zeros(mask.shape, dtype=bool)
    low, high = mask_corners(mask)
    crop = tuple(slice(int(lo), int(hi) + 1) for lo, hi in zip(low, high))
    sub = mask[crop]
    volume = sub[None] if sub.ndim == 2 else sub
    labelled, n = connected_components(volume, connectivity=26, return_N=True)
    if sub.ndim == 2:
        labelled = labelled[0]
    out = np.zeros(mask.shape, dtype=bool)
    if n <= 1:
        out[crop] = labelled > 0
        return out
    counts = np.bincount(labelled.ravel())
    counts[0] = 0
    out[crop] = labelled == counts.argmax()
    return out
