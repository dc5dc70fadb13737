"""The phantom generator computes each lesion in its own neighbourhood: the same volumes, to the
voxel and to the bit, as the definition computed on the whole volume (kept here as the
reference), for any seed, case, shape and spacing."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

from intrabench.datasets.phantoms import make_phantom
from intrabench.engine.seeding import derive_rng


def _whole_volume_ellipsoid(shape, center, radii_vox, rotation: float) -> np.ndarray:
    z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
    dz, dy, dx = z - center[0], y - center[1], x - center[2]
    cos, sin = np.cos(rotation), np.sin(rotation)
    ry = dy * cos - dx * sin
    rx = dy * sin + dx * cos
    return (dz / radii_vox[0]) ** 2 + (ry / radii_vox[1]) ** 2 + (rx / radii_vox[2]) ** 2 <= 1.0


def reference_phantom(seed, index, shape, spacing, n_lesions):
    """The phantom's definition, every step on the whole volume (the generator before it
    cropped to each lesion)."""
    rng = derive_rng(seed, "phantom", index)
    nz, ny, nx = shape
    z, y, x = np.ogrid[:nz, :ny, :nx]
    body = ((y - ny / 2) / (0.42 * ny)) ** 2 + ((x - nx / 2) / (0.46 * nx)) ** 2 <= 1.0
    image = np.full(shape, -1000.0, dtype=np.float32)
    image[np.broadcast_to(body, shape)] = 40.0
    lungs = np.zeros(shape, dtype=bool)
    for side in (-1, 1):
        lungs |= np.broadcast_to(
            ((y - ny / 2) / (0.28 * ny)) ** 2 + ((x - nx / 2 - side * 0.2 * nx) / (0.15 * nx)) ** 2
            <= 1.0, shape)
    image[lungs] = -820.0
    label = np.zeros(shape, dtype=np.int32)
    wanted = int(rng.integers(n_lesions[0], n_lesions[1] + 1))
    placed = 0
    for _attempt in range(200):
        if placed == wanted:
            break
        radius_mm = float(rng.uniform(3.0, 11.0))
        radii = np.array([radius_mm / spacing[0], radius_mm / spacing[1], radius_mm / spacing[2]])
        radii *= rng.uniform(0.7, 1.3, size=3)
        radii[0] = max(radii[0], 0.8)
        radii = np.minimum(radii, np.array(shape) / 2.0 - 3.5)
        margin = np.ceil(radii).astype(int) + 2
        center = [int(rng.integers(margin[a], shape[a] - margin[a])) for a in range(3)]
        if not body[0, center[1], center[2]]:
            continue
        lesion = _whole_volume_ellipsoid(shape, center, radii, float(rng.uniform(0, np.pi)))
        if rng.random() < 0.6:
            offset = rng.normal(0, 0.6, size=3) * radii
            lobe_center = [int(np.clip(center[a] + offset[a], 1, shape[a] - 2)) for a in range(3)]
            lesion |= _whole_volume_ellipsoid(shape, lobe_center, radii * rng.uniform(0.4, 0.7),
                                              float(rng.uniform(0, np.pi)))
        lesion &= np.broadcast_to(body, shape)
        dilated = ndimage.binary_dilation(lesion, iterations=2)
        if lesion.sum() < 4 or (label[dilated] > 0).any():
            continue
        placed += 1
        label[lesion] = placed
        background = np.median(image[lesion])
        contrast = float(rng.uniform(60.0, 220.0)) * (1 if rng.random() < 0.8 else -0.5)
        image[lesion] = background + 800.0 if background < -500 else background + contrast
        image[lesion] = np.minimum(image[lesion], 200.0) if background < -500 else image[lesion]
    image = ndimage.gaussian_filter(image, sigma=(0.5, 0.8, 0.8))
    image += rng.normal(0.0, 12.0, size=shape).astype(np.float32)
    return image.astype(np.float32), label


def assert_same_phantom(seed, index, shape, spacing, n_lesions=(2, 4)):
    volume, label = make_phantom(seed, index, shape, spacing, n_lesions)
    image, expected = reference_phantom(seed, index, shape, spacing, n_lesions)
    assert np.array_equal(label, expected)
    assert volume.array.dtype == np.float32
    assert np.array_equal(volume.array.view(np.uint32), image.view(np.uint32))  # to the bit


def test_the_benchmark_phantoms_equal_the_whole_volume_definition():
    """bench_real_cpu.py's CT-size phantoms (seed 7, 24 x 512 x 512, 5 x 0.7 x 0.7 mm), and
    the demo's default."""
    for index in (0, 1):
        assert_same_phantom(7, index, (24, 512, 512), (5.0, 0.7, 0.7))
    for index in range(4):
        assert_same_phantom(0, index, (32, 96, 96), (2.5, 0.8, 0.8))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), index=st.integers(0, 50),
       shape=st.tuples(st.integers(10, 40), st.integers(12, 70), st.integers(12, 70)),
       spacing=st.tuples(st.floats(0.3, 6.0), st.floats(0.2, 2.0), st.floats(0.2, 2.0)),
       most=st.integers(1, 8))
def test_any_phantom_equals_the_whole_volume_definition(seed, index, shape, spacing, most):
    """Lesions cut by the volume's edges, lobes far from their lesion, lesions that touch and
    are redrawn: all as on the whole volume."""
    try:
        reference_phantom(seed, index, shape, spacing, (1, most))
    except ValueError:  # a lesion that cannot be placed in so small a volume
        return
    assert_same_phantom(seed, index, shape, spacing, (1, most))
