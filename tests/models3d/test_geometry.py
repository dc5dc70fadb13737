"""Resampling to 1.5 mm as torchio does, and back: physical positions are preserved."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intrabench.models.volumetric._3d_common import CentredGrid, crop_with_padding, resize


def test_centred_grid_shape_and_positions():
    # floor(n * s / 1.5) voxels; a singleton axis stays 1
    assert CentredGrid((25, 140, 130), (6.5, 0.78125, 0.78125), 1.5).shape == (108, 72, 67)
    assert CentredGrid((1, 4, 4), (0.5, 3.0, 1.5), 1.5).shape == (1, 8, 4)
    grid = CentredGrid((10, 7, 3), (3.0, 1.0, 1.5), 1.5)  # -> (20, 4, 3)
    assert grid.shape == (20, 4, 3)
    # centres coincide: the middle of the new grid maps to the middle of the old one
    middle = grid.to_grid(np.array([[4.5, 3.0, 1.0]]))[0]
    assert middle == pytest.approx([9.5, 1.5, 1.0])
    # ratio 0.5 along z: new voxels 0 and 1 straddle old voxel 0's centre
    assert grid.offset[0] + np.arange(2) * grid.ratio[0] == pytest.approx([-0.25, 0.25])


def test_centred_grid_resamples_a_ramp_linearly_and_maps_back_to_the_nearest_voxel():
    shape = (12, 20, 16)
    z = np.arange(shape[0], dtype=np.float32)
    ramp = np.broadcast_to((3.0 * z + 7.0)[:, None, None], shape).copy()
    grid = CentredGrid(shape, (4.0, 0.8, 1.5), 1.5)
    out = grid.resample(ramp)
    assert out.shape == grid.shape == (32, 10, 16)
    positions = grid.offset[0] + np.arange(32) * grid.ratio[0]
    inside = (positions >= 0) & (positions <= shape[0] - 1)
    assert np.allclose(out[inside, 5, 5], 3.0 * positions[inside] + 7.0, atol=1e-4)
    assert np.allclose(out[~inside, 5, 5], np.where(positions[~inside] < 0, 7.0, 40.0))
    nearest = grid.nearest_original(0)
    assert nearest.shape == (12,) and (nearest >= 0).all()
    assert np.abs(positions[nearest] - np.arange(12)).max() <= grid.ratio[0] / 2 + 1e-9


def test_centred_grid_equals_torchios_resample_on_a_real_volume():
    """The same 1.5 mm grid and values as ``torchio.Resample(1.5)`` after ``ToCanonical``
    (upstream SAM-Med3D's inference), on the demo's real brain MRI crop."""
    tio = pytest.importorskip("torchio")
    from intrabench import registry

    case = registry.datasets.create("demo-real").load("brain1")
    grid = CentredGrid(case.image.shape, case.image.spacing, 1.5)
    ours = grid.resample(case.image.array)
    subject = tio.Subject(image=tio.ScalarImage.from_sitk(case.image.to_sitk(case.image.array)))
    theirs = tio.Compose([tio.ToCanonical(), tio.Resample(1.5)])(subject)["image"]
    expected = theirs.data[0].numpy().transpose(2, 1, 0)  # RAS (x, y, z) -> canonical (z, y, x)
    assert ours.shape == expected.shape
    scale = float(np.abs(expected).max())
    assert np.abs(ours - expected).max() <= 1e-5 * scale


@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9)),
    spacing=st.tuples(*[st.sampled_from([0.3, 0.78125, 1.5, 2.0, 3.3, 6.5])] * 3),
    dtype=st.sampled_from([np.float32, np.float64, np.int16, np.uint8]),
    seed=st.integers(0, 2**16),
)
def test_torch_resampling_equals_numpys_to_the_bit(shape, spacing, dtype, seed):
    """SAM-Med3D resamples on its GPU with torch: the same voxels as NumPy's, bit for bit (torch
    on the CPU runs the same code path; each float32 operation is rounded on its own)."""
    rng = np.random.default_rng(seed)
    array = (
        rng.normal(0.0, 400.0, shape)
        if np.issubdtype(dtype, np.floating)
        else rng.integers(0, 200, shape)
    ).astype(dtype)
    grid = CentredGrid(shape, spacing, 1.5)
    expected = grid.resample(array)
    got = grid.resample_with_torch(array, "cpu")
    assert got.dtype == np.float32 and got.shape == grid.shape
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_torch_resampling_equals_numpys_on_a_real_volume():
    from intrabench import registry

    case = registry.datasets.create("demo-real").load("lung1")
    grid = CentredGrid(case.image.shape, case.image.spacing, 1.5)
    expected = grid.resample(case.image.array)
    got = grid.resample_with_torch(case.image.array, "cpu")
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


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


def test_a_crop_goes_back_to_the_original_voxels_as_torchio_resamples_a_label():
    """SAM-Med3D's binary prediction on the 1.5 mm grid returns to the original grid by
    nearest neighbour (ITK's, as upstream resamples its label back), not by interpolating
    logits; voxels the crop does not cover are background."""
    tio = pytest.importorskip("torchio")
    import SimpleITK as sitk

    from intrabench import registry
    from intrabench.models.volumetric.sam_med3d import SamMed3DTurbo

    case = registry.datasets.create("demo-real").load("lung1")
    model = SamMed3DTurbo(weights="random", tiny=True, device="cpu")
    model.set_case(case.image)
    size = model.crop_size
    start = (-3, 10, 20)  # partly outside the grid along z
    crop = np.zeros((size,) * 3, bool)
    crop[2:40, 5:50, 8:44] = True
    crop[10:20, 20:30, 15:25] = False  # a hole
    ours = model._to_original(crop, start)

    subject = tio.Subject(image=tio.ScalarImage.from_sitk(case.image.to_sitk(case.image.array)))
    canonical = tio.ToCanonical()(subject)["image"]
    resampled = tio.Resample(1.5)(tio.Subject(image=canonical))["image"]
    full = np.zeros(model._grid.shape, np.uint8)
    region = tuple(slice(max(0, s), min(n, s + size)) for s, n in zip(start, full.shape))
    local = tuple(slice(r.start - s, r.stop - s) for r, s in zip(region, start))
    full[region] = crop[local]
    label = tio.LabelMap(tensor=full.transpose(2, 1, 0)[None], affine=resampled.affine)
    back = sitk.Resample(
        label.as_sitk(), canonical.as_sitk(), sitk.Transform(), sitk.sitkNearestNeighbor, 0
    )
    expected = sitk.GetArrayFromImage(back).astype(bool)  # RAS image: (S, A, R) = (z, y, x)
    assert expected.shape == ours.shape and expected.sum() > 1000
    assert np.array_equal(ours, expected)
