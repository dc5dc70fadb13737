"""Contrast, heterogeneity, noise and body size on synthetic images of known intensities."""

from __future__ import annotations

import json

import numpy as np
import pytest

from intrabench.attributes import cache, intensity
from intrabench.attributes.compute import case_attributes
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.types import Case, Target

SPACING = (2.0, 1.0, 1.0)


def _lesion_case(noise: float = 10.0, seed: int = 0) -> Case:
    """Soft tissue at 40 with a ball lesion at 100 (radius 8 mm), Gaussian noise of ``noise``;
    a second, labelled structure at 300 lies 2 mm from the lesion (inside its shell)."""
    rng = np.random.default_rng(seed)
    shape = (24, 64, 64)
    z, y, x = np.indices(shape, dtype=np.float64)
    ball = ((z - 12) * SPACING[0]) ** 2 + (y - 32) ** 2 + (x - 32) ** 2 <= 8.0**2
    other = (np.abs(z - 12) <= 2) & (np.abs(y - 32) <= 3) & (x >= 42) & (x <= 46)
    image = np.where(ball, 100.0, 40.0)
    image[other] = 300.0
    image = (image + rng.normal(0.0, noise, shape)).astype(np.float32)
    label = np.zeros(shape, dtype=np.uint8)
    label[ball] = 1
    label[other] = 2
    geometry = ImageGeometry(
        shape[::-1], SPACING[::-1], (0.0, 0.0, 0.0), (1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0)
    )
    return Case(
        "synthetic",
        "lesion",
        Volume(image, SPACING, geometry),
        label,
        (Target("lesion", 1, "lesion"), Target("other", 2, "organ")),
    )


def test_contrast_cnr_and_heterogeneity_of_a_lesion_of_known_intensity_and_noise():
    case = _lesion_case(noise=10.0)
    values = case_attributes(case)["lesion"]
    # inside 100, shell 40 (the labelled neighbour at 300 is left out of the shell), noise 10
    assert values["contrast"] == pytest.approx(60.0, abs=1.0)
    assert values["cnr"] == pytest.approx(6.0, rel=0.05)
    assert values["heterogeneity"] == pytest.approx(10.0, rel=0.05)
    assert values["noise"] == pytest.approx(10.0, rel=0.05)
    darker = _lesion_case(noise=10.0)
    darker.image.array[darker.label == 1] -= 120.0  # now 60 below the tissue around it
    assert case_attributes(darker)["lesion"]["contrast"] == pytest.approx(-60.0, abs=1.0)


def test_contrast_reads_a_shell_of_the_given_width_in_mm():
    case = _lesion_case(noise=0.0)
    box = case.target_box(case.targets[0])
    stats = intensity.contrast(case.image.array, case.label, 1, box, SPACING, width_mm=3.0)
    assert (stats.inside_mean, stats.shell_mean, stats.inside_std) == pytest.approx((100, 40, 0))
    assert stats.shell_std == 0.0 and stats.cnr != stats.cnr  # a uniform shell: CNR undefined


@pytest.mark.parametrize("sigma", [5.0, 20.0])
def test_immerkaer_noise_estimate_on_a_smooth_image_with_gaussian_noise(sigma):
    rng = np.random.default_rng(1)
    z, y, x = np.indices((16, 96, 96), dtype=np.float64)
    smooth = 200.0 * np.sin(y / 15.0) + 3.0 * x  # structure the estimator must ignore
    image = smooth + rng.normal(0.0, sigma, smooth.shape)
    assert intensity.noise_sigma(image) == pytest.approx(sigma, rel=0.05)
    assert intensity.noise_sigma(smooth) < 0.05 * sigma


def test_body_voxels_of_a_ct_ellipse_in_air_and_none_for_mr():
    shape = (6, 80, 100)
    z, y, x = np.indices(shape, dtype=np.float64)
    body = ((y - 40) / 30.0) ** 2 + ((x - 50) / 40.0) ** 2 <= 1.0
    lungs = ((y - 40) / 12.0) ** 2 + ((x - 35) / 8.0) ** 2 <= 1.0  # air inside: still body
    image = np.where(body, 40.0, -1000.0)
    image[lungs] = -850.0
    expected = int(body.sum())
    measured = intensity.body_voxels(image, "CT")
    assert measured == pytest.approx(expected, rel=0.02)
    assert intensity.body_voxels(image, "MRI (T2)") is None  # MR: no fixed air level
    assert intensity.body_voxels(image + 1000.0, "") is None  # no air: not HU
    assert intensity.looks_like_ct(image) and not intensity.looks_like_ct(image + 1000.0)


def test_case_attributes_are_deterministic_and_cached_by_content(tmp_path, monkeypatch):
    case = _lesion_case()
    first = cache.cached_case_attributes(case, "CT", root=tmp_path)
    text = json.dumps(first, sort_keys=True)  # plain JSON values (NaN for a missing one)
    assert json.dumps(json.loads(text), sort_keys=True) == text
    files = list((tmp_path / "attributes" / "synthetic").glob("lesion-*.json"))
    assert len(files) == 1

    def fail(*_args, **_kwargs):
        raise AssertionError("measured again although cached")

    monkeypatch.setattr(cache, "case_attributes", fail)
    assert (
        json.dumps(
            cache.cached_case_attributes(_lesion_case(), "CT", root=tmp_path), sort_keys=True
        )
        == text
    )
    changed = _lesion_case()
    changed.label[changed.label == 1] = 0  # another label: another file, never a stale value
    changed.label[10:14, 30:34, 30:34] = 1
    with pytest.raises(AssertionError, match="measured again"):
        cache.cached_case_attributes(changed, "CT", root=tmp_path)
    monkeypatch.undo()
    again = cache.cached_case_attributes(changed, "CT", root=tmp_path)
    assert again["lesion"]["volume_ml"] == pytest.approx(64 * 2.0 / 1000)
    assert len(list((tmp_path / "attributes" / "synthetic").glob("lesion-*.json"))) == 2
    # a damaged cache file is measured again, not trusted
    files[0].write_text("{not json")
    assert (
        json.dumps(
            cache.cached_case_attributes(_lesion_case(), "CT", root=tmp_path), sort_keys=True
        )
        == text
    )
