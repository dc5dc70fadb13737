"""Shape attributes on analytic shapes: spheres, cubes, ellipsoids, a hollow sphere, a torus."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from intrabench.attributes import shape
from intrabench.attributes.compute import case_attributes
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.types import Case, Target


def ellipsoid(
    radii_mm: tuple[float, float, float],
    spacing: tuple[float, float, float],
    margin: int = 3,
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> np.ndarray:
    """Boolean (z, y, x) solid ellipsoid of semi-axes ``radii_mm`` centred in its array, moved
    by ``offset`` voxels (a real lesion's centre is rarely a voxel centre)."""
    half = [int(math.ceil(r / s)) + margin for r, s in zip(radii_mm, spacing)]
    z, y, x = np.ogrid[-half[0] : half[0] + 1, -half[1] : half[1] + 1, -half[2] : half[2] + 1]
    return (
        ((z - offset[0]) * spacing[0] / radii_mm[0]) ** 2
        + ((y - offset[1]) * spacing[1] / radii_mm[1]) ** 2
        + ((x - offset[2]) * spacing[2] / radii_mm[2]) ** 2
    ) <= 1.0


def torus(major: float, minor: float, size: int = 48) -> np.ndarray:
    """A ring lying in the axial plane (its axis along z), radii in voxels."""
    z, y, x = np.indices((size // 2, size, size), dtype=np.float64)
    z -= size // 4
    y -= size / 2
    x -= size / 2
    return (np.hypot(y, x) - major) ** 2 + z**2 <= minor**2


def _measure(mask: np.ndarray, spacing=(1.0, 1.0, 1.0)) -> dict:
    cropped, box = shape.crop(mask)
    voxels = int(cropped.sum())
    area = shape.surface_area_mm2(cropped, spacing)
    return {
        "volume_ml": shape.volume_ml(voxels, spacing),
        "sphericity": shape.sphericity(voxels * float(np.prod(spacing)), area),
        "components": shape.count_components(cropped),
        "cavities": shape.count_cavities(cropped),
        "slices_with_holes": shape.slices_with_holes(cropped),
        "elongation": shape.elongation(cropped, spacing),
    }


@pytest.mark.parametrize("radius", [6.0, 12.0, 20.0])
def test_a_voxelised_sphere_has_sphericity_one_within_3_percent(radius):
    measured = _measure(ellipsoid((radius,) * 3, (1.0, 1.0, 1.0)))
    assert measured["sphericity"] == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("side", [30, 40, 50])
def test_a_cube_has_sphericity_0806_within_3_percent(side):
    cube = np.zeros((side + 4,) * 3, dtype=bool)
    cube[2:-2, 2:-2, 2:-2] = True
    expected = math.pi ** (1 / 3) * 6 ** (2 / 3) * side**2 / (6 * side**2)  # 0.8060
    assert expected == pytest.approx(0.806, abs=5e-4)
    # marching cubes cuts the cube's edges (45-degree chamfers half a voxel wide), which
    # shrinks the area by ~0.6/side: a 30-voxel cube reads 2.7% high, a 10-voxel one 8%
    assert _measure(cube)["sphericity"] == pytest.approx(expected, rel=0.03)


def test_sphericity_of_a_flat_disc_is_low_and_a_sphere_beats_a_cube():
    disc = ellipsoid((20.0, 20.0, 2.0), (1.0, 1.0, 1.0))
    sphere = ellipsoid((12.0, 12.0, 12.0), (1.0, 1.0, 1.0))
    cube = np.zeros((28, 28, 28), dtype=bool)
    cube[2:-2, 2:-2, 2:-2] = True
    values = [_measure(m)["sphericity"] for m in (disc, cube, sphere)]
    assert values == sorted(values) and values[0] < 0.6


@pytest.mark.parametrize(
    "radii, spacing",
    [
        ((12.0, 9.0, 6.0), (1.0, 1.0, 1.0)),
        ((15.0, 10.0, 8.0), (2.5, 0.8, 0.8)),  # CT-like anisotropic voxels
        ((6.0, 20.0, 10.0), (1.5, 0.7, 0.7)),
    ],
)
def test_ellipsoid_volumes_within_1_percent(radii, spacing):
    # centred off the voxel lattice: centred on it, the axis tips undercount by ~1.5%
    measured = _measure(ellipsoid(radii, spacing, offset=(0.3, 0.4, 0.1)), spacing)
    analytic_ml = 4.0 / 3.0 * math.pi * np.prod(radii) / 1000.0
    assert measured["volume_ml"] == pytest.approx(analytic_ml, rel=0.01)


@pytest.mark.parametrize(
    "radii, ratio", [((16.0, 8.0, 4.0), 4.0), ((10.0, 10.0, 10.0), 1.0), ((6.0, 18.0, 9.0), 3.0)]
)
def test_elongation_is_the_ratio_of_the_longest_to_the_shortest_axis(radii, ratio):
    assert _measure(ellipsoid(radii, (1.0, 1.0, 1.0)))["elongation"] == pytest.approx(
        ratio, rel=0.05
    )


def test_components_and_holes_of_a_hollow_sphere_a_torus_and_two_blobs():
    outer = ellipsoid((12.0,) * 3, (1.0, 1.0, 1.0))
    inner = ellipsoid((6.0,) * 3, (1.0, 1.0, 1.0), margin=3 + 6)
    hollow = outer & ~inner
    measured = _measure(hollow)
    assert (measured["components"], measured["cavities"]) == (1, 1)
    # every axial slice through the cavity (z = -6..6 around the centre, the poles' single
    # voxel included) shows a ring
    assert measured["slices_with_holes"] == 13

    ring = _measure(torus(major=12.0, minor=4.0))
    assert (ring["components"], ring["cavities"]) == (1, 0)  # a tunnel is no cavity
    # the ring spans z = -4..4; at z = +-4 only the voxels exactly 12 from the axis remain
    # (a few isolated ones), the 7 slices between are closed annuli
    assert ring["slices_with_holes"] == 7

    blobs = np.zeros((20, 40, 40), dtype=bool)
    blobs[5:12, 5:15, 5:15] = True
    blobs[5:12, 20:30, 25:35] = True
    measured = _measure(blobs)
    assert (measured["components"], measured["cavities"], measured["slices_with_holes"]) == (
        2,
        0,
        0,
    )
    # corner contact joins regions (26-connectivity, as the datasets split instances)
    touching = np.zeros((6, 6, 6), dtype=bool)
    touching[1, 1, 1] = touching[2, 2, 2] = True
    assert shape.count_components(touching) == 1


def _case(label: np.ndarray, image: np.ndarray | None = None, spacing=(2.0, 1.0, 1.0)) -> Case:
    image = np.zeros(label.shape, np.float32) if image is None else image
    geometry = ImageGeometry(
        label.shape[::-1], spacing[::-1], (0.0, 0.0, 0.0), (1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0)
    )
    values = sorted(int(v) for v in np.unique(label) if v)
    return Case(
        "hand",
        "c",
        Volume(image, spacing, geometry),
        label,
        tuple(Target(f"t{v}", v, "lesion") for v in values),
    )


def test_position_extent_border_and_coverage_on_a_hand_made_case():
    label = np.zeros((10, 20, 30), dtype=np.int16)
    label[2:5, 4:8, 10:20] = 1  # 3 x 4 x 10 = 120 voxels, inside
    label[7:10, 0:2, 0:3] = 2  # 3 x 2 x 3 = 18 voxels, at a corner
    values = case_attributes(_case(label))
    first, corner = values["t1"], values["t2"]
    assert first["volume_ml"] == pytest.approx(120 * 2.0 / 1000)
    assert first["coverage_image"] == pytest.approx(120 / 6000)
    assert (first["com_z"], first["com_y"], first["com_x"]) == pytest.approx(
        (3 / 9, 5.5 / 19, 14.5 / 29)
    )
    assert first["extent_slices"] == 3 and corner["extent_slices"] == 3
    assert first["touches_border"] is False and corner["touches_border"] is True
    assert first["spacing_anisotropy"] == 2.0
    assert first["coverage_body"] != first["coverage_body"]  # no air: not CT, no body mask


def test_a_target_missing_from_the_label_has_zero_volume():
    label = np.zeros((4, 8, 8), dtype=np.int16)
    label[1:3, 2:5, 2:5] = 1
    case = _case(label)
    case.targets = case.targets + (Target("gone", 7, "lesion"),)
    values = case_attributes(case)["gone"]
    assert values["volume_ml"] == 0.0 and values["components"] == 0
    assert values["sphericity"] != values["sphericity"]


@settings(max_examples=25, deadline=None)
@given(
    offset=st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6)),
    radii=st.tuples(st.floats(2.0, 5.0), st.floats(2.0, 5.0), st.floats(2.0, 5.0)),
)
def test_shape_attributes_do_not_depend_on_where_the_target_lies(offset, radii):
    blob = ellipsoid(radii, (1.0, 1.0, 1.0), margin=1)
    placed = np.zeros(tuple(n + 8 for n in blob.shape), dtype=bool)
    placed[
        offset[0] : offset[0] + blob.shape[0],
        offset[1] : offset[1] + blob.shape[1],
        offset[2] : offset[2] + blob.shape[2],
    ] = blob
    assert _measure(placed) == pytest.approx(_measure(blob))
