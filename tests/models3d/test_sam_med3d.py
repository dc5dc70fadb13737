"""SAM-Med3D adapter behaviour with a tiny random-weight model on real and oblique volumes."""

from __future__ import annotations

import numpy as np
import pytest

from intrabench.engine.episode import run_episode
from intrabench.models.volumetric._3d_common import CentredGrid
from intrabench.types import Case, Prediction, Prompt, interactions

from .conftest import FixedPrompter, tiny_model

CROP = 64  # tiny configuration: 64^3 crop (the full model: 128^3)


def _points(case: Case, count: int = 2) -> np.ndarray:
    voxels = np.argwhere(case.target_mask(case.targets[0]))
    return voxels[np.linspace(0, len(voxels) - 1, count).astype(int)]


@pytest.fixture
def sam(brain: Case):
    model = tiny_model("sam-med3d")
    model.set_case(brain.image)
    return model


@pytest.mark.parametrize(
    "case_name",
    [
        "brain1",
        pytest.param("breast1", marks=pytest.mark.slow),
        pytest.param("lung1", marks=pytest.mark.slow),
    ],
)
def test_runs_on_anisotropic_real_volumes(demo_cases, case_name):
    case = demo_cases[case_name]
    model = tiny_model("sam-med3d-turbo")
    model.set_case(case.image)
    expected = CentredGrid(case.image.shape, case.image.spacing, 1.5).shape
    assert model._grid.shape == expected
    prediction = model.predict(Prompt(points=_points(case), point_labels=[1, 1]))
    assert prediction.mask.shape == case.image.shape and prediction.mask.dtype == bool
    feedback = prediction.feedback
    assert feedback["low_res_logits"].shape == (1, 1, 16, 16, 16)
    assert feedback["points_used"] == 2 and feedback["points_outside"] == 0
    # the mask only covers voxels inside the crop (96 mm cube): never beyond it
    covered = np.argwhere(prediction.mask)
    if len(covered):
        extent_mm = (covered.max(0) - covered.min(0) + 1) * np.asarray(case.image.spacing)
        assert (extent_mm <= CROP * 1.5 + 2 * max(case.image.spacing)).all()


def test_oblique_volume_uses_direction_aware_spacing(oblique_case):
    model = tiny_model("sam-med3d")
    model.set_case(oblique_case.image)
    raw = oblique_case.image.geometry.spacing  # (i, j, k) = (0.9, 3.0, 1.2)
    assert oblique_case.image.spacing == pytest.approx((3.0, 1.2, 0.9))
    assert model._grid.shape == (40, 32, 28)  # floor of 20*3/1.5, 40*1.2/1.5, 48*0.9/1.5
    assert model._grid.shape != CentredGrid(oblique_case.image.shape, raw[::-1], 1.5).shape
    prediction = model.predict(Prompt(points=_points(oblique_case, 3), point_labels=[1, 1, 0]))
    assert prediction.mask.shape == oblique_case.image.shape
    assert prediction.feedback["points_used"] == 3


def test_crop_is_centred_on_the_prompt_centroid(sam, brain):
    points = _points(brain, 3)
    start = sam.crop_for(Prompt(points=points, point_labels=[1, 1, 1]))
    centroid = sam.grid_points(points).mean(axis=0)
    assert np.abs(np.asarray(start) + CROP / 2 - centroid).max() <= 0.5


def test_crop_and_prediction_do_not_depend_on_the_ground_truth(brain):
    prompt = Prompt(
        points=_points(brain), point_labels=[1, 1], interactions=interactions("click", 2)
    )
    moved_label = np.roll(brain.label, shift=(3, 25, -30), axis=(0, 1, 2))
    moved = Case(brain.dataset, brain.case_id, brain.image, moved_label, brain.targets)
    results = []
    for case in (brain, moved):
        model = tiny_model("sam-med3d")
        model.set_case(case.image)
        [step] = run_episode(case, case.targets[0], model, FixedPrompter(prompt), "fixed")
        results.append(step)
    assert (
        results[0].prediction.feedback["crop_start"] == results[1].prediction.feedback["crop_start"]
    )
    assert np.array_equal(results[0].prediction.mask, results[1].prediction.mask)
    assert results[0].metrics != results[1].metrics  # the ground truth did move


def test_every_point_is_used_with_its_own_label(sam, brain):
    first, second = _points(brain, 2)
    far = second + np.array([0, 25, 0])  # 20 mm away, still in the crop
    both_positive = sam.predict(Prompt(points=[first, far], point_labels=[1, 1]))
    second_negative = sam.predict(Prompt(points=[first, far], point_labels=[1, 0]))
    only_first = sam.predict(Prompt(points=[first], point_labels=[1]))
    assert both_positive.feedback["points_used"] == 2
    assert both_positive.feedback["crop_start"] == second_negative.feedback["crop_start"]
    assert not np.array_equal(both_positive.mask, second_negative.mask)
    assert not np.array_equal(both_positive.mask, only_first.mask)
    scribble_voxels = Prompt(points=np.array([first, far, first + 1]), point_labels=[1, 1, 1])
    assert sam.predict(scribble_voxels).feedback["points_used"] == 3


def test_refinement_feeds_logits_back_and_encodes_the_crop_once(sam, brain):
    points = _points(brain, 2)
    prompt = Prompt(points=points[:1], point_labels=[1])
    prediction = sam.predict(prompt)
    start = prediction.feedback["crop_start"]
    assert sam.encoder_calls == 1
    corrections = [points[1], points[0] + np.array([0, 12, 12]), points[0] + np.array([1, -10, 8])]
    for step, point in enumerate(corrections, start=1):
        prompt = prompt.merged_with(Prompt(points=[point], point_labels=[step % 2]))
        previous = prediction
        prediction = sam.predict(prompt, previous=previous)
        assert prediction.feedback["crop_start"] == start  # crop fixed (paper A.5)
        assert prediction.feedback["points_used"] == step + 1  # previous prompts kept
    assert sam.encoder_calls == 1  # 4 predictions, 1 encoding
    zeroed = dict(previous.feedback, low_res_logits=previous.feedback["low_res_logits"] * 0)
    without_logits = sam.predict(prompt, previous=Prediction(previous.mask, zeroed))
    # the previous logits are an input: zeroing them changes what the network computes
    assert (
        np.abs(
            prediction.feedback["low_res_logits"] - without_logits.feedback["low_res_logits"]
        ).max()
        > 1e-7
    )
    assert sam.encoder_calls == 1


def test_points_outside_the_fixed_crop_are_dropped(sam, brain):
    prompt = Prompt(points=_points(brain, 1), point_labels=[1])
    first = sam.predict(prompt)
    outside = (
        np.array([[0, 0, 0]])
        if first.feedback["crop_start"][1] > 0
        else np.array(
            [[brain.image.shape[0] - 1, brain.image.shape[1] - 1, brain.image.shape[2] - 1]]
        )
    )
    with_far = sam.predict(
        prompt.merged_with(Prompt(points=outside, point_labels=[0])), previous=first
    )
    without = sam.predict(prompt, previous=first)
    assert with_far.feedback["points_outside"] == 1 and with_far.feedback["points_used"] == 1
    assert np.array_equal(with_far.mask, without.mask)


def test_a_new_case_drops_the_encoding_cache(demo_cases):
    model = tiny_model("sam-med3d")
    for name in ("breast1", "lung1"):
        model.set_case(demo_cases[name].image)
        model.predict(Prompt(points=_points(demo_cases[name], 1), point_labels=[1]))
    assert model.encoder_calls == 2 and len(model._cache) == 1


def test_boxes_are_not_accepted():
    from intrabench.models.volumetric.sam_med3d import SamMed3D

    assert "box3d" not in SamMed3D.accepts and "mask" in SamMed3D.accepts


def test_resampling_on_the_device_gives_the_same_grid_and_masks(brain: Case):
    """``preprocessing: device`` (the default on a GPU) resamples the case with torch: on the
    CPU device the same code path gives NumPy's grid to the bit, and so the same masks."""
    by_numpy = tiny_model("sam-med3d")
    by_numpy.preprocessing = "numpy"
    by_torch = tiny_model("sam-med3d")
    by_torch.preprocessing = "device"
    assert not by_numpy.resample_on_device() and by_torch.resample_on_device()
    assert not tiny_model("sam-med3d").resample_on_device()  # 'auto' on the CPU: NumPy
    for model in (by_numpy, by_torch):
        model.set_case(brain.image)
    assert np.array_equal(by_torch._grid.view(np.uint32), by_numpy._grid.view(np.uint32))
    prompt = Prompt(points=_points(brain), point_labels=[1, 1])
    assert np.array_equal(by_torch.predict(prompt).mask, by_numpy.predict(prompt).mask)


def test_an_unknown_preprocessing_is_refused():
    from intrabench import registry
    from intrabench.errors import ConfigError

    with pytest.raises(ConfigError, match="preprocessing must be 'auto', 'numpy' or 'device'"):
        registry.models.create(
            "sam-med3d",
            {"weights": "random", "tiny": True, "device": "cpu", "preprocessing": "gpu"},
        )
