"""Properties that must hold for any target: hypothesis-generated masks and awkward shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from prompter_testkit import ScriptedSliceModel, box_mask, prompt_context, refine_context
from simulated_users import simulated

from intrabench import registry
from intrabench.types import Prompt

PROPERTY_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

shapes = st.tuples(st.integers(1, 5), st.integers(1, 12), st.integers(1, 12))
masks = shapes.flatmap(lambda shape: arrays(bool, shape)).filter(lambda m: m.any())
mask_pairs = shapes.flatmap(lambda shape: st.tuples(arrays(bool, shape), arrays(bool, shape)))

INITIAL = [
    ("center-point-per-slice", {}),
    ("points-per-slice", {"n_points": 3}),
    ("alternating-points-per-slice", {"n_points": 3}),
    ("box-per-slice", {}),
    ("box-per-slice-from-3d-box", {}),
    ("point-interpolation", {"n_slices": 3}),
    ("point-interpolation", {"n_slices": 5, "center": "bbox"}),
    ("box-interpolation", {"n_slices": 3}),
    ("box-interpolation", {"n_slices": 3, "shift": 3}),
    ("point-propagation", {}),
    ("box-propagation", {}),
    ("points-per-volume", {"n_points": 2}),
    ("center-points-per-volume", {"n_points": 3}),
    ("box-3d", {}),
    ("cvpr25-box", {}),
]


def _generate(
    name: str, params: dict, gt: np.ndarray, answer: np.ndarray | None = None, seed: int = 0
) -> Prompt:
    prompter = registry.prompters.create(name, params)
    segment = (
        ScriptedSliceModel(gt if answer is None else answer).segment_slice
        if prompter.needs_model
        else None
    )
    return prompter.initial(prompt_context(gt, seed=seed, segment_slice=segment))


def _check_prompt(name: str, prompt: Prompt, gt: np.ndarray) -> None:
    shape = np.array(gt.shape)
    zs = np.flatnonzero(gt.reshape(gt.shape[0], -1).any(axis=1))
    z_min, z_max = int(zs[0]), int(zs[-1])
    points = prompt.points
    assert ((points >= 0) & (points < shape)).all()
    assert prompt.effort == sum(i.cost for i in prompt.interactions) > 0
    positives = points[prompt.point_labels == 1]
    negatives = points[prompt.point_labels == 0]
    assert not gt[tuple(negatives.T)].any()
    if name in (
        "center-point-per-slice",
        "points-per-slice",
        "alternating-points-per-slice",
        "points-per-volume",
        "center-points-per-volume",
    ):
        assert gt[tuple(positives.T)].all()
    if name.endswith("per-slice") and name != "box-per-slice-from-3d-box":
        assert {int(z) for z in points[:, 0]} | set(prompt.boxes) == {int(z) for z in zs}
    if name == "point-interpolation":
        assert points[:, 0].tolist() == list(range(z_min, z_max + 1))  # one per slice
        assert gt[tuple(points[0])] and gt[tuple(points[-1])]  # the end seeds are clicks
    if "propagation" in name:
        assert set(points[:, 0].tolist()) | set(prompt.boxes) <= set(range(z_min, z_max + 1))
    for z, box in prompt.boxes.items():
        assert 0 <= box.y_min <= box.y_max < gt.shape[1]
        assert 0 <= box.x_min <= box.x_max < gt.shape[2]
        ys, xs = np.nonzero(gt[z])
        if name in ("box-per-slice", "box-per-slice-from-3d-box") and len(ys):
            assert box.y_min <= ys.min() and ys.max() <= box.y_max
            assert box.x_min <= xs.min() and xs.max() <= box.x_max
    if prompt.box3d is not None:
        b = prompt.box3d
        assert (b.z_min, b.z_max) == (z_min, z_max)
        inside = box_mask(gt.shape, (b.z_min, b.y_min, b.x_min), (b.z_max, b.y_max, b.x_max))
        if name == "box-3d":
            assert not (gt & ~inside).any()
        if name == "cvpr25-box":
            unique_z = zs
            z_mid = int(unique_z[len(unique_z) // 2])
            assert not (gt[z_mid] & ~inside[z_mid]).any()


@pytest.mark.parametrize("name, params", INITIAL, ids=[f"{n}{p or ''}" for n, p in INITIAL])
@PROPERTY_SETTINGS
@given(gt=masks)
def test_initial_prompts_respect_the_target(name, params, gt):
    _check_prompt(name, _generate(name, params, gt), gt)


@PROPERTY_SETTINGS
@given(data=mask_pairs.filter(lambda pair: pair[0].any()))
def test_propagation_never_leaves_the_user_given_z_range(data):
    gt, answer = data
    for name in ("point-propagation", "box-propagation"):
        prompt = _generate(name, {}, gt, answer=answer)
        zs = np.flatnonzero(gt.reshape(gt.shape[0], -1).any(axis=1))
        touched = set(prompt.points[:, 0].tolist()) | set(prompt.boxes)
        assert touched <= set(range(int(zs[0]), int(zs[-1]) + 1))


@PROPERTY_SETTINGS
@given(gt=masks)
def test_seed_boxes_of_box_interpolation_contain_their_slice(gt):
    zs = np.flatnonzero(gt.reshape(gt.shape[0], -1).any(axis=1))
    prompt = _generate("box-interpolation", {"n_slices": 2}, gt)
    assert sorted(prompt.boxes) == list(range(int(zs[0]), int(zs[-1]) + 1))
    for z in (int(zs[0]), int(zs[-1])):
        ys, xs = np.nonzero(gt[z])
        box = prompt.boxes[z]
        assert (box.y_min, box.x_min, box.y_max, box.x_max) == (
            ys.min(),
            xs.min(),
            ys.max(),
            xs.max(),
        )


@pytest.mark.parametrize("name", simulated(registry.refiners))
@pytest.mark.parametrize("dimension", [2, 3])
@PROPERTY_SETTINGS
@given(pair=mask_pairs)
def test_refiners_only_click_on_misclassified_voxels(name, dimension, pair):
    gt, prediction = pair
    if dimension not in registry.refiners.get(name).dimensions:
        return
    prompt = registry.refiners.create(name).refine(
        refine_context(gt, prediction, dimension=dimension)
    )
    if np.array_equal(gt, prediction):
        assert prompt is None
        return
    assert prompt is not None and not prompt.is_empty
    points, labels = prompt.model_points()
    index = tuple(points.T)
    assert (gt[index] != prediction[index]).all()
    assert (labels == gt[index]).all()
    assert prompt.effort == sum(i.cost for i in prompt.interactions) > 0


# -- awkward targets: nothing crashes ------------------------------------------------------


def _awkward() -> dict[str, np.ndarray]:
    shape = (6, 16, 16)
    one_voxel = np.zeros(shape, dtype=bool)
    one_voxel[3, 7, 7] = True
    corner = np.zeros(shape, dtype=bool)
    corner[0, 0, 0] = True
    border = box_mask(shape, (0, 0, 0), (5, 3, 15))
    one_slice = box_mask(shape, (2, 4, 4), (2, 9, 12))
    multi = box_mask(shape, (0, 1, 1), (1, 3, 3)) | box_mask(shape, (4, 10, 10), (5, 14, 14))
    full = np.ones(shape, dtype=bool)
    return {
        "one-voxel": one_voxel,
        "corner-voxel": corner,
        "touching-border": border,
        "one-slice": one_slice,
        "multi-component": multi,
        "whole-volume": full,
    }


AWKWARD = _awkward()


@pytest.mark.parametrize("case", sorted(AWKWARD))
@pytest.mark.parametrize("name, params", INITIAL, ids=[f"{n}{p or ''}" for n, p in INITIAL])
def test_awkward_targets_get_valid_prompts(name, params, case):
    gt = AWKWARD[case]
    _check_prompt(name, _generate(name, params, gt), gt)


@pytest.mark.parametrize("case", sorted(AWKWARD))
@pytest.mark.parametrize("name", simulated(registry.refiners))
def test_awkward_errors_get_valid_corrections(name, case):
    gt = AWKWARD[case]
    for prediction in (np.zeros_like(gt), ~gt, np.roll(gt, 1, axis=2)):
        if np.array_equal(prediction, gt):
            continue
        for dimension in sorted(registry.refiners.get(name).dimensions):
            prompt = registry.refiners.create(name).refine(
                refine_context(gt, prediction, dimension=dimension)
            )
            points, labels = prompt.model_points()
            assert len(points) and (gt[tuple(points.T)] != prediction[tuple(points.T)]).all()
            assert (labels == gt[tuple(points.T)]).all()
