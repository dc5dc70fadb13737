"""Propagation prompters against a scripted 2D model whose answer per slice is known."""

from __future__ import annotations

import numpy as np
import pytest
from prompter_testkit import ScriptedSliceModel, box_mask, prompt_context

from intrabench import registry
from intrabench.errors import UserError
from intrabench.types import Box2D

SHAPE = (13, 32, 32)
GT = box_mask(SHAPE, (3, 10, 20), (9, 14, 24))  # I = 3..9, median slice 6


def run(name: str, answer: np.ndarray, **params):
    model = ScriptedSliceModel(answer)
    prompter = registry.prompters.create(name, params)
    prompt = prompter.initial(prompt_context(GT, segment_slice=model.segment_slice))
    return prompt, model


def test_point_propagation_stops_at_the_boundary_slices_the_user_gave():
    over = box_mask(SHAPE, (1, 10, 20), (11, 14, 24))  # the model over-segments in z
    prompt, model = run("point-propagation", over)
    seeds = prompt.points[prompt.points[:, 0] == 6]
    assert len(seeds) == 5 and GT[tuple(seeds.T)].all()
    propagated = prompt.points[prompt.points[:, 0] != 6]
    assert [tuple(p) for p in propagated.tolist()] == [
        (5, 12, 22),
        (4, 12, 22),
        (3, 12, 22),
        (7, 12, 22),
        (8, 12, 22),
        (9, 12, 22),
    ]
    assert sorted(p.z for p in model.calls) == [3, 4, 5, 6, 7, 8, 9]
    assert prompt.effort == 7 and prompt.effort_label == "7"
    assert [i.kind for i in prompt.interactions].count("boundary_slice") == 2


def test_point_propagation_keeps_all_seed_points_for_any_seed_count():
    """The reference sliced off the first 5 downward points; here nothing is dropped."""
    prompt, _ = run("point-propagation", GT, n_points=3)
    assert (prompt.points[:, 0] == 6).sum() == 3
    assert sorted(set(prompt.points[:, 0].tolist())) == list(range(3, 10))
    assert prompt.effort == 5 and prompt.effort_label == "5"


def test_point_propagation_stops_where_the_model_predicts_nothing():
    answer = GT.copy()
    answer[8] = False
    prompt, _ = run("point-propagation", answer)
    assert sorted(set(prompt.points[:, 0].tolist())) == [3, 4, 5, 6, 7, 8]


def test_point_propagation_follows_the_predicted_component():
    answer = np.zeros(SHAPE, dtype=bool)
    for z in range(SHAPE[0]):
        answer[z, 2 + z : 5 + z, 2:5] = True  # moves one row per slice
    prompt, _ = run("point-propagation", answer)
    for z, y, x in prompt.points[prompt.points[:, 0] != 6]:
        source = z + 1 if z < 6 else z - 1  # the prediction on the previous slice
        assert (y, x) == (3 + source, 3)


def test_the_final_prediction_reuses_the_propagation_calls():
    prompt, model = run("point-propagation", GT)
    calls = len(model.calls)
    prediction = model.predict(prompt)
    assert len(model.calls) == calls
    assert np.array_equal(prediction.mask, GT)


def test_box_propagation_derives_each_box_from_the_previous_prediction():
    answer = np.zeros(SHAPE, dtype=bool)
    for z in range(SHAPE[0]):
        answer[z, 10 : 12 + z, 20:22] = True  # grows by one row per slice
    prompt, model = run("box-propagation", answer)
    assert prompt.boxes[6] == Box2D(10, 20, 14, 24)  # the user's tight GT box
    for z in (3, 4, 5):
        assert prompt.boxes[z] == Box2D(10, 20, 11 + (z + 1), 21)
    for z in (7, 8, 9):
        assert prompt.boxes[z] == Box2D(10, 20, 11 + (z - 1), 21)
    assert sorted(prompt.boxes) == list(range(3, 10))
    assert len(model.calls) == 7
    assert prompt.effort == 4 and prompt.effort_label == "4"


def test_box_propagation_with_an_empty_seed_prediction_prompts_only_the_median_slice():
    prompt, _ = run("box-propagation", np.zeros(SHAPE, dtype=bool))
    assert list(prompt.boxes) == [6] and prompt.effort == 4


@pytest.mark.parametrize("name", ["point-propagation", "box-propagation"])
def test_propagation_needs_a_2d_model(name):
    with pytest.raises(UserError, match="2D"):
        registry.prompters.create(name).initial(prompt_context(GT))


def test_one_slice_target_propagates_nowhere_but_costs_the_boundaries():
    gt = box_mask(SHAPE, (4, 10, 10), (4, 12, 12))
    model = ScriptedSliceModel(gt | box_mask(SHAPE, (3, 10, 10), (5, 12, 12)))
    prompt = registry.prompters.create("point-propagation").initial(
        prompt_context(gt, segment_slice=model.segment_slice)
    )
    assert set(prompt.points[:, 0].tolist()) == {4} and len(prompt.points) == 5
    assert prompt.effort == 7
