"""Every registered 3D prompter and refiner against every compatible 3D model (tiny weights).

Iterates the registries, so prompters and refiners added later are covered automatically.
"""

from __future__ import annotations

import numpy as np
import pytest

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.interfaces import incompatibility

from .conftest import MODELS_3D, tiny_model


def _pairs(kind: str) -> list[tuple[str, str]]:
    components = registry.prompters if kind == "prompter" else registry.refiners
    pairs = []
    for model_name in MODELS_3D:
        model_cls = registry.models.get(model_name)
        for name, cls in components.items():
            if getattr(cls, "replays_people", False):  # a person's session: tests/people
                continue
            reason = (
                incompatibility(model_cls, cls)
                if kind == "prompter"
                else incompatibility(model_cls, None, cls)
            )
            if reason is None:
                pairs.append((model_name, name))
    return pairs


def _initial_prompter_for(model_name: str) -> str:
    model_cls = registry.models.get(model_name)
    names = [n for n, c in registry.prompters.items() if incompatibility(model_cls, c) is None]
    return "points-per-volume" if "points-per-volume" in names else names[0]


def test_the_3d_models_are_registered_with_their_prompt_kinds():
    assert {"sam-med3d", "sam-med3d-turbo", "segvol"} <= set(registry.models.names())
    for name in MODELS_3D:
        assert registry.models.get(name).dimension == 3
    assert any(m == "segvol" for m, _ in _pairs("prompter"))
    assert not any(m == "segvol" for m, _ in _pairs("refiner"))  # not refinable


@pytest.mark.parametrize(("model_name", "prompter_name"), _pairs("prompter"))
def test_prompter_runs_against_model(breast, model_name, prompter_name):
    model = tiny_model(model_name)
    model.set_case(breast.image)
    prompter = registry.prompters.create(prompter_name)
    [step] = run_episode(breast, breast.targets[0], model, prompter, prompter_name, seed=3)
    assert step.prediction.mask.shape == breast.image.shape
    assert step.effort == step.prompt.effort > 0
    assert 0.0 <= step.metrics["dice"] <= 1.0


@pytest.mark.parametrize(("model_name", "refiner_name"), _pairs("refiner"))
def test_refiner_runs_against_model(breast, model_name, refiner_name):
    model = tiny_model(model_name)
    model.set_case(breast.image)
    prompter_name = _initial_prompter_for(model_name)
    prompter = registry.prompters.create(prompter_name)
    refiner = registry.refiners.create(refiner_name)
    steps = run_episode(
        breast,
        breast.targets[0],
        model,
        prompter,
        prompter_name,
        refiner,
        refiner_name,
        steps=2,
        seed=3,
    )
    assert [s.step for s in steps] == [0, 1, 2]
    crops = {
        s.prediction.feedback["crop_start"]
        for s in steps
        if isinstance(s.prediction.feedback, dict) and "crop_start" in s.prediction.feedback
    }
    assert len(crops) == 1  # fixed across refinement
    assert model.encoder_calls == 1
    for step in steps:
        assert step.prediction.mask.shape == breast.image.shape
        assert np.isfinite(step.metrics["dice"])
