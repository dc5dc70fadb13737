"""Clickability models: distance peaks on the medial axis, the image-conditioned map avoids
edges and faint parts, maps from observed clicks (RClicks 4.3), a plugged-in network."""

from __future__ import annotations

import numpy as np
import pytest

from intrabench import registry
from intrabench.clicks.base import ClickRegion, probabilities
from intrabench.clicks.observed import map_from_clicks
from intrabench.errors import ConfigError
from intrabench.prompters.clickability.network import NetworkClickability


def cube_region(shape=(11, 13, 15), low=(2, 3, 4), high=(8, 9, 10)) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[low[0] : high[0] + 1, low[1] : high[1] + 1, low[2] : high[2] + 1] = True
    return mask


def test_the_registry_lists_the_built_in_models():
    assert {"uniform", "distance", "contrast-aware", "recorded", "network"} <= set(
        registry.clickability.names()
    )
    with pytest.raises(ConfigError, match="unknown clickability model 'distanse'.*'distance'"):
        registry.clickability.get("distanse")
    with pytest.raises(ConfigError, match="exponent"):
        registry.clickability.create("distance", {"exponent": -1})


def test_uniform_is_flat_on_the_region():
    mask = cube_region()
    p = probabilities(registry.clickability.create("uniform"), ClickRegion(mask, (1, 1, 1)))
    assert p[mask].min() == p[mask].max() == pytest.approx(1 / mask.sum())
    assert p[~mask].sum() == 0


def test_distance_peaks_on_the_medial_axis():
    # a 7 x 7 x 7 cube: one deepest voxel, its centre (5, 6, 7), at 4 voxels from outside
    mask = cube_region()
    weights = registry.clickability.create("distance").weights(ClickRegion(mask, (1, 1, 1)))
    assert np.unravel_index(np.argmax(weights), mask.shape) == (5, 6, 7)
    assert weights[5, 6, 7] == pytest.approx(4.0)
    assert weights[2, 6, 7] == pytest.approx(1.0)  # a face voxel
    # a slab 3 voxels thick in z: the maxima are its middle plane, nowhere else
    slab = cube_region((9, 20, 20), (3, 2, 2), (5, 17, 17))
    weights = registry.clickability.create("distance").weights(ClickRegion(slab, (1, 1, 1)))
    assert set(np.argwhere(weights == weights.max())[:, 0]) == {4}
    # in mm with 3 mm slices: the centre is 4 voxels = 4 mm from the outside along y and x
    # (12 mm along z); a face voxel is one slice, 3 mm, from the outside
    weights = registry.clickability.create("distance", {"exponent": 2}).weights(
        ClickRegion(mask, (3.0, 1.0, 1.0))
    )
    assert weights[5, 6, 7] == pytest.approx(16.0)
    assert weights[2, 6, 7] == pytest.approx(9.0)


def test_distance_in_2d_regions():
    disk = np.zeros((21, 21), dtype=bool)
    yy, xx = np.mgrid[:21, :21]
    disk[(yy - 10) ** 2 + (xx - 10) ** 2 <= 49] = True
    weights = registry.clickability.create("distance").weights(ClickRegion(disk, (0.5, 0.5)))
    assert np.unravel_index(np.argmax(weights), disk.shape) == (10, 10)
    # the nearest outside pixel of the centre is a diagonal one, (15, 15): sqrt(50) px * 0.5 mm
    assert weights[10, 10] == pytest.approx(np.sqrt(50) * 0.5)


def contrast_phantom(left: float = 100.0, right: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """A 2D region (rows 10-29, columns 10-49) on a background of 0 with noise of sd 2: its
    left half (columns 10-29) at ``left``, its right half at ``right``."""
    image = np.zeros((40, 60))
    mask = np.zeros((40, 60), dtype=bool)
    mask[10:30, 10:50] = True
    image[10:30, 10:30] = left
    image[10:30, 30:50] = right
    image += np.random.default_rng(0).normal(0, 2.0, image.shape)
    return mask, image


def test_contrast_aware_avoids_edges_and_faint_parts():
    model = registry.clickability.create("contrast-aware")
    # a faint right half (5, against a background of 0 and a bright left half of 100)
    mask, image = contrast_phantom(100.0, 5.0)
    weights = model.weights(ClickRegion(mask, (1.0, 1.0), image=image))
    bright, faint = weights[15:25, 13:18].mean(), weights[15:25, 42:47].mean()
    assert bright > 5 * faint  # the faint half looks like the background
    # two bright halves (100 and 160): the step between them is an edge inside the region
    mask, stepped = contrast_phantom(100.0, 160.0)
    weights = model.weights(ClickRegion(mask, (1.0, 1.0), image=stepped))
    assert weights[15:25, 29:31].mean() < 0.5 * weights[15:25, 22:24].mean()
    assert weights[15:25, 29:31].mean() < 0.5 * weights[15:25, 36:38].mean()
    assert weights[mask].min() >= model.floor * weights.max() > 0  # every voxel clickable
    assert weights[~mask].sum() == 0
    # without the image it is the depth term alone: (d / d_max), flat halves alike
    depth_only = model.weights(ClickRegion(mask, (1.0, 1.0)))
    distance = registry.clickability.create("distance").weights(ClickRegion(mask, (1.0, 1.0)))
    np.testing.assert_allclose(depth_only, np.maximum(distance / distance.max(), 1e-3) * mask)
    # missing intensities (NaN: outside the user's window) count as neutral, never as faint
    partial = image.copy()
    partial[:, 30:] = np.nan
    weights = model.weights(ClickRegion(mask, (1.0, 1.0), image=partial))
    assert np.isfinite(weights).all()
    assert weights[15:25, 40:47].mean() > 5 * faint


def test_map_from_clicks_by_hand():
    # sigmas far below a voxel: the map is the click counts on the error mask, normalised
    error = np.zeros((7, 7), dtype=bool)
    error[1:6, 1:6] = True
    clickability = map_from_clicks([(2, 2), (2, 2), (4, 4)], error, (1.0, 1.0), 1e-3, 1e-3)
    expected = np.zeros((7, 7))
    expected[2, 2], expected[4, 4] = 2 / 3, 1 / 3
    np.testing.assert_allclose(clickability, expected, atol=1e-12)
    # a click outside the error mask counts for nothing; one alone leaves an empty map
    with pytest.raises(ValueError, match="no click lies near the error mask"):
        map_from_clicks([(0, 6)], error, (1.0, 1.0), 1e-3, 1e-3)
    with pytest.raises(ValueError, match="outside the grid"):
        map_from_clicks([(7, 0)], error, (1.0, 1.0))
    # wider sigmas: a smooth map peaking at the click, summing to 1, mm-aware in 3D
    volume = cube_region()
    clickability = map_from_clicks([(5, 6, 7)], volume, (2.0, 1.0, 1.0), 2.0, 1.0)
    assert clickability.sum() == pytest.approx(1.0)
    assert np.unravel_index(np.argmax(clickability), volume.shape) == (5, 6, 7)
    # 2 mm along z is one slice: the map falls off faster per slice than per column
    assert clickability[6, 6, 7] < clickability[5, 6, 8]


def test_recorded_clicks_build_the_map_and_fall_back(tmp_path):
    clicks = tmp_path / "clicks.csv"
    clicks.write_text(
        "dataset,case,target,z,y,x,step\nd,c,1,5,4,5,0\nd,c,1,5,4,5,0\nd,c,1,6,8,9,1\n"
    )
    model = registry.clickability.create(
        "recorded", {"clicks_file": str(clicks), "click_sigma_mm": 1.0}
    )
    mask = cube_region()
    region = ClickRegion(mask, (1, 1, 1), identity=("d", "c", "1"), step=0)
    weights = model.weights(region)
    assert np.unravel_index(np.argmax(weights), mask.shape) == (5, 4, 5)
    # step 1 has its own click; a 2D region on slice 6 whose crop starts at (6, 2, 3)
    plane = mask[6, 2:12, 3:13]
    region = ClickRegion(plane, (1, 1), origin=(6, 2, 3), identity=("d", "c", "1"), step=1)
    assert np.unravel_index(np.argmax(model.weights(region)), plane.shape) == (6, 6)
    # no click recorded for this target: the fallback (distance) decides
    other = ClickRegion(mask, (1, 1, 1), identity=("d", "c", "2"))
    np.testing.assert_array_equal(
        model.weights(other), registry.clickability.create("distance").weights(other)
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("case,target,z,y,x\nc,1,0,0,0\n")
    with pytest.raises(ConfigError, match="missing columns \\['dataset'\\]"):
        registry.clickability.create("recorded", {"clicks_file": str(bad)})


def test_a_learned_network_plugs_in(tmp_path):
    import pickle

    import torch

    model = NetworkClickability("realistic_clicks.tiny_network:build")
    mask, image = contrast_phantom()
    region = ClickRegion(mask, (1.0, 1.0), image=image, target=mask)
    weights = model.weights(region)
    assert weights.shape == mask.shape and weights[~mask].sum() == 0
    assert (weights[mask] > 0).all() and weights.max() == pytest.approx(1.0)
    # the same weights after pickling (the user workers rebuild the network) and from a
    # checkpoint of the same state dict, loaded with weights_only
    np.testing.assert_allclose(pickle.loads(pickle.dumps(model)).weights(region), weights)
    network = model.network(2)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.mul_(2.0)
    torch.save(network.state_dict(), tmp_path / "clickability.pt")
    loaded = NetworkClickability(
        "realistic_clicks.tiny_network:build", str(tmp_path / "clickability.pt")
    )
    np.testing.assert_allclose(loaded.weights(region), model.weights(region), rtol=1e-6)
    # a 3D region gets the 3D network
    assert model.weights(ClickRegion(cube_region(), (1, 1, 1))).shape == (11, 13, 15)
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        registry.clickability.create("network", {"factory": "no_such_module:build"})
