"""Connected components of a mask (cc3d's), safe on masks that are a line of voxels.

cc3d 4.1's path for boolean input sizes its union-find array from an estimate that is too
small for a mask whose voxels lie on one line (two axes of length 1) under 26-connectivity:
``[[[True, False, True]]]`` raises "maximum length exception" (found by hypothesis in
tests/datasets/test_label_dtypes.py; 47 of 60,000 random small masks failed, all such lines,
none under 6- or 18-connectivity or in 2D). The same mask viewed as uint8 (no copy) takes
cc3d's general path, which labels it correctly, and was no slower on a 200 x 512 x 512 mask
of 40 lesions (0.07 s either way). Its path for a single row of voxels (or pixels) also misreads
a row that is a strided view (``IndexError`` or wrong labels, any dtype), so a mask that is
neither C- nor Fortran-contiguous is copied into a contiguous array first. The label reader,
the shape attributes, region growing and the classical refiners label through
:func:`connected_components`; the prompters' own calls (``prompters/_geometry.py``,
``prompters/scribble_robot.py``) pad their masks by one voxel first, which keeps every axis
longer than one and the array contiguous, so neither bug reaches them.

Array conventions: any number of axes as cc3d takes them ((z, y, x) volumes, (y, x) slices);
labels 1..N as cc3d numbers them, 0 the background.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def connected_components(mask: np.ndarray, connectivity: int, return_N: bool = False  # noqa: N803
                         ) -> Any:
    """``cc3d.connected_components(mask, connectivity=..., return_N=...)``; a boolean ``mask``
    is passed as a uint8 view (see the module's docstring)."""
    import cc3d

    array = np.asarray(mask)
    if array.dtype == bool:
        array = array.view(np.uint8)
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        array = np.ascontiguousarray(array)  # cc3d's single-row path misreads a strided row
    return cc3d.connected_components(array, connectivity=connectivity, return_N=return_N)
