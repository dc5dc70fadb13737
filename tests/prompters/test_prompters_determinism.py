"""Same seed, same prompts; different seeds, different random prompts; no global RNG."""

from __future__ import annotations

import random

import numpy as np
import pytest
from prompter_testkit import (
    ScriptedSliceModel,
    box_mask,
    prompt_context,
    refine_context,
    sphere_mask,
)
from simulated_users import simulated

from intrabench import registry
from intrabench.types import Prompt

SHAPE = (16, 40, 40)
GT = sphere_mask(SHAPE, (8, 20, 20), 7.5)
PREDICTION = box_mask(SHAPE, (5, 14, 16), (12, 30, 34))


def _signature(prompt: Prompt) -> tuple:
    return (
        prompt.points.tolist(),
        prompt.point_labels.tolist(),
        {z: b.as_tuple() for z, b in prompt.boxes.items()},
        None if prompt.box3d is None else prompt.box3d.as_tuple(),
        [(s.points.tolist(), s.label) for s in prompt.scribbles],
        [i.kind for i in prompt.interactions],
        prompt.effort_label,
    )


def _initial(name: str, seed: int) -> Prompt:
    prompter = registry.prompters.create(name)
    segment = ScriptedSliceModel(GT).segment_slice if prompter.needs_model else None
    return prompter.initial(prompt_context(GT, seed=seed, segment_slice=segment))


def _refine(name: str, seed: int, dimension: int) -> Prompt:
    return registry.refiners.create(name).refine(
        refine_context(GT, PREDICTION, seed=seed, dimension=dimension)
    )


@pytest.mark.parametrize("name", simulated(registry.prompters))
def test_initial_prompts_are_reproducible(name):
    assert _signature(_initial(name, 7)) == _signature(_initial(name, 7))


@pytest.mark.parametrize(
    "name",
    ["points-per-slice", "alternating-points-per-slice", "points-per-volume", "point-propagation"],
)
def test_random_prompters_depend_on_the_seed(name):
    assert len({repr(_signature(_initial(name, seed))) for seed in range(6)}) > 1


@pytest.mark.parametrize("name", simulated(registry.refiners))
def test_refinements_are_reproducible(name):
    dimension = min(registry.refiners.get(name).dimensions)
    assert _signature(_refine(name, 3, dimension)) == _signature(_refine(name, 3, dimension))


@pytest.mark.parametrize(
    "name", ["corrective-point-per-slice", "random-corrective-point", "scribble"]
)
def test_random_refiners_depend_on_the_seed(name):
    dimension = min(registry.refiners.get(name).dimensions)
    assert len({repr(_signature(_refine(name, seed, dimension))) for seed in range(8)}) > 1


def test_no_component_touches_the_global_random_state():
    np.random.seed(123)
    random.seed(123)
    numpy_state = np.random.get_state()[1].copy()
    python_state = random.getstate()
    for name in simulated(registry.prompters):
        _initial(name, 1)
    for name in simulated(registry.refiners):
        for dimension in sorted(registry.refiners.get(name).dimensions):
            _refine(name, 1, dimension)
    assert np.array_equal(np.random.get_state()[1], numpy_state)
    assert random.getstate() == python_state
