"""Resampling to 1.5 mm and pasting a crop back: physical positions are preserved."""

from __future__ import annotations

import numpy as np

from intrabench.models._3d_common import (
    crop_with_padding,
    map_to_grid,
    paste_back,
    resampled_shape,
    resize,
)


def test_resampled_shape_follows_spacing():
    assert resampled_shape((25, 140, 130), (6.5, 0.78125, 0.78125), 1.5) == (108, 73, 68)
    assert resampled_shape((1, 4, 4), (0.5, 3.0, 1.5), 1.5) == (1, 8, 4)


def test_resize_keeps_a_linear_ramp_at_mapped_positions():
    shape, new = (12, 20, 16), (40, 13, 16)
    z = np.arange(shape[0], dtype=np.float32)
    ramp = np.broadcast_to((3.0 * z + 7.0)[:, None, None], shape).copy()
    out = resize(ramp, new)
    assert out.shape == new
    # voxel i of the new grid sits at (i + 0.5) * old / new - 0.5 on the old grid
    old_position = (np.arange(new[0]) + 0.5) * shape[0] / new[0] - 0.5
    inside = (old_position >= 0) & (old_position <= shape[0] - 1)
    assert np.allclose(out[inside, 5, 5], 3.0 * old_position[inside] + 7.0, atol=1e-4)


def test_crop_with_padding_places_the_array():
    array = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    crop = crop_with_padding(array, (-2, 1, 3), (6, 3, 5), value=-1.0)
    assert crop.shape == (6, 3, 5)
    assert np.all(crop[:2] == -1) and np.all(crop[:, :, 3:] == -1)
    assert np.array_equal(crop[2:6, :, :3], array[:, 1:4, 3:6])


def test_paste_back_puts_a_crop_box_at_the_same_physical_place():
    original, spacing = (30, 50, 40), (4.0, 0.8, 1.2)
    grid = resampled_shape(original, spacing, 1.5)                 # (80, 27, 32)
    start, size = (20, -5, 6), (32, 32, 32)
    # logits +1 inside a box of the crop, -1 elsewhere
    box_lo, box_hi = np.array([8, 10, 4]), np.array([20, 25, 15])
    crop = -np.ones(size, np.float32)
    crop[box_lo[0]:box_hi[0] + 1, box_lo[1]:box_hi[1] + 1, box_lo[2]:box_hi[2] + 1] = 1.0
    region, values = paste_back(crop, start, grid, original)
    mask = np.zeros(original, bool)
    mask[region] = values > 0
    # every original voxel whose centre maps well inside the box is set, well outside is not
    zz, yy, xx = np.meshgrid(*(np.arange(n) for n in original), indexing="ij")
    voxels = np.stack([zz, yy, xx], -1).reshape(-1, 3)
    local = map_to_grid(voxels, original, grid) - np.asarray(start)
    deep_inside = ((local >= box_lo + 0.6) & (local <= box_hi - 0.6)).all(1)
    far_outside = ((local < box_lo - 0.6) | (local > box_hi + 0.6)).any(1)
    flat = mask.reshape(-1)
    assert deep_inside.sum() > 100 and flat[deep_inside].all()
    assert not flat[far_outside].any()
    # the covered region is exactly the original voxels whose centres fall in the crop
    for axis in range(3):
        centres = local[:, axis].reshape(original)
        inside = (centres >= -0.5) & (centres <= size[axis] - 0.5)
        covered = np.flatnonzero(inside.any(axis=tuple(a for a in range(3) if a != axis)))
        assert (region[axis].start, region[axis].stop) == (covered[0], covered[-1] + 1)
