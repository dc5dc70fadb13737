"""The "Interactions" column of the paper's Appendix B tables, from computed efforts.

Every row names the paper's prompter label, our configuration and the paper's number. Fixed
efforts must equal the computed ``Prompt.effort``; per-slice "NX" rows must carry the label and
a real count of N x (number of foreground slices). Refinement rows ("a/b") run a real episode
and check both parts.
"""

from __future__ import annotations

import numpy as np
import pytest
from prompter_testkit import (
    ScriptedSliceModel,
    ScriptedVolumeModel,
    box_mask,
    one_target_case,
    prompt_context,
)

from intrabench import registry
from intrabench.engine.episode import run_episode

SHAPE = (24, 48, 48)
GT = box_mask(SHAPE, (4, 15, 15), (19, 30, 30))  # 16 foreground slices of 16 x 16 pixels
N_SLICES = 16

TABLE_2 = [  # unrealistic per-slice prompting, 2D models
    ("1PPS", "points-per-slice", {"n_points": 1}, "1X"),
    ("2PPS", "points-per-slice", {"n_points": 2}, "2X"),
    ("3PPS", "points-per-slice", {"n_points": 3}, "3X"),
    ("5PPS", "points-per-slice", {"n_points": 5}, "5X"),
    ("10PPS", "points-per-slice", {"n_points": 10}, "10X"),
    ("2±PPS", "alternating-points-per-slice", {"n_points": 2}, "2X"),
    ("3±PPS", "alternating-points-per-slice", {"n_points": 3}, "3X"),
    ("5±PPS", "alternating-points-per-slice", {"n_points": 5}, "5X"),
    ("10±PPS", "alternating-points-per-slice", {"n_points": 10}, "10X"),
    ("Box PS", "box-per-slice", {}, "2X"),
]

TABLE_3 = [  # realistic 2D prompting
    ("3P Inter", "point-interpolation", {"n_slices": 3}, "3"),
    ("5P Inter", "point-interpolation", {"n_slices": 5}, "5"),
    ("10P Inter", "point-interpolation", {"n_slices": 10}, "10"),
    ("5P Prop", "point-propagation", {"n_points": 5}, "7"),
    ("B Prop", "box-propagation", {}, "4"),
    ("3B Inter", "box-interpolation", {"n_slices": 3}, "6"),
    ("5B Inter", "box-interpolation", {"n_slices": 5}, "10"),
    ("10B Inter", "box-interpolation", {"n_slices": 10}, "20"),
]

TABLE_4 = [  # realistic 3D prompting
    ("1PPV", "points-per-volume", {"n_points": 1}, "1"),
    ("1 center PPV", "center-points-per-volume", {"n_points": 1}, "1"),
    ("2 center PPV", "center-points-per-volume", {"n_points": 2}, "2"),
    ("3 center PPV", "center-points-per-volume", {"n_points": 3}, "3"),
    ("5 center PPV", "center-points-per-volume", {"n_points": 5}, "5"),
    ("10 center PPV", "center-points-per-volume", {"n_points": 10}, "10"),
    ("3D Box", "box-3d", {}, "3"),
]


def _initial(name: str, params: dict, seed: int = 0):
    prompter = registry.prompters.create(name, params)
    segment = ScriptedSliceModel(GT).segment_slice if prompter.needs_model else None
    return prompter.initial(prompt_context(GT, seed=seed, segment_slice=segment))


def _check(prompt, paper: str) -> None:
    assert prompt.effort_label == paper
    if paper.endswith("X"):
        assert prompt.effort == int(paper[:-1]) * N_SLICES
    else:
        assert prompt.effort == int(paper)


@pytest.mark.parametrize("label, name, params, paper", TABLE_2, ids=[r[0] for r in TABLE_2])
def test_table_2_interactions(label, name, params, paper):
    _check(_initial(name, params), paper)


@pytest.mark.parametrize("label, name, params, paper", TABLE_3, ids=[r[0] for r in TABLE_3])
def test_table_3_interactions(label, name, params, paper):
    _check(_initial(name, params), paper)


@pytest.mark.parametrize("label, name, params, paper", TABLE_4, ids=[r[0] for r in TABLE_4])
def test_table_4_interactions(label, name, params, paper):
    _check(_initial(name, params), paper)


# -- refinement tables: "initial/refinement" -------------------------------------------------

#: An imperfect 2D answer: the last row of the target is missed on every slice.
UNDER = GT.copy()
UNDER[:, 30, :] = False

TABLE_5 = [  # 2D refinement; the paper prints "1/3" for 1PPS + Scribble where 1PPS is "1X"
    (
        "1PPS + 1PPS Refine",
        "points-per-slice",
        {"n_points": 1},
        "corrective-point-per-slice",
        "1X/1X",
    ),
    ("1PPS + Scribble Refine", "points-per-slice", {"n_points": 1}, "scribble", "1X/3"),
    ("3B Inter + Scribble Refine", "box-interpolation", {"n_slices": 3}, "scribble", "6/3"),
    # the reference (and so the paper's number) used 5 interpolation slices for "3P Inter"
    ("3P Inter + Scribble Refine", "point-interpolation", {"n_slices": 5}, "scribble", "5/3"),
]

TABLE_6 = [  # 3D refinement
    (
        "1 center PPV + 1 PPV Refine",
        "center-points-per-volume",
        {"n_points": 1},
        "random-corrective-point",
        "1/1",
    ),
    (
        "1 center PPV + Scribble Refine",
        "center-points-per-volume",
        {"n_points": 1},
        "scribble",
        "1/3",
    ),
]


def _episode(model, name, params, refiner, keep):
    case, target = one_target_case(GT)
    return run_episode(
        case,
        target,
        model,
        registry.prompters.create(name, params),
        name,
        registry.refiners.create(refiner),
        refiner,
        steps=5,
        keep_previous_prompts=keep,
        seed=3,
    )


def _check_refinement(results, paper: str) -> None:
    initial, refinement = paper.split("/")
    _check(results[0].prompt, initial)
    assert len(results) == 6
    for step in results[1:]:
        assert step.prompt.effort_label == refinement
        if refinement.endswith("X"):  # one click per slice with an error: every fg slice here
            assert step.effort == int(refinement[:-1]) * N_SLICES
        else:
            assert step.effort == int(refinement)
    assert results[-1].cumulative_effort == sum(r.effort for r in results)


@pytest.mark.parametrize("keep", [True, False], ids=["with-prev", "no-prev"])
@pytest.mark.parametrize(
    "label, name, params, refiner, paper", TABLE_5, ids=[r[0] for r in TABLE_5]
)
def test_table_5_interactions(label, name, params, refiner, paper, keep):
    results = _episode(ScriptedSliceModel(UNDER), name, params, refiner, keep)
    _check_refinement(results, paper)


@pytest.mark.parametrize("keep", [True, False], ids=["with-prev", "no-prev"])
@pytest.mark.parametrize(
    "label, name, params, refiner, paper", TABLE_6, ids=[r[0] for r in TABLE_6]
)
def test_table_6_interactions(label, name, params, refiner, paper, keep):
    model = ScriptedVolumeModel(UNDER)
    results = _episode(model, name, params, refiner, keep)
    _check_refinement(results, paper)
    first_points = model.prompts[0].points
    sent = model.prompts[-1].model_points()[0]
    # with previous prompts the model still sees the first click, without it does not
    assert any((p == first_points[0]).all() for p in sent) is keep


def test_cvpr25_box_effort_is_a_2d_box_and_two_boundary_slices():
    prompt = _initial("cvpr25-box", {})
    assert prompt.effort == 4 and sorted(i.kind for i in prompt.interactions) == [
        "boundary_slice",
        "boundary_slice",
        "box2d",
    ]


def test_box_per_slice_from_3d_box_costs_one_3d_box_whatever_the_extent():
    prompt = _initial("box-per-slice-from-3d-box", {})
    assert prompt.effort == 3 and len(prompt.boxes) == N_SLICES


def test_every_registered_component_states_its_effort_rule_and_fitting_models():
    for _, cls in registry.prompters.items() + registry.refiners.items():
        # the recorded components give the kinds a person used: any, so none declared
        assert cls.effort_rule and cls.dimensions <= {2, 3}
        assert cls.kinds or getattr(cls, "replays_people", False), cls


def test_effort_equals_the_sum_of_interaction_costs():
    for name, params in [(r[1], r[2]) for r in TABLE_2 + TABLE_3 + TABLE_4]:
        prompt = _initial(name, params)
        assert prompt.effort == int(np.sum([i.cost for i in prompt.interactions]))
