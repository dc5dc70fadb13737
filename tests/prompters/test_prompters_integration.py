"""Refinement with the built-in classical models on phantoms: the corrections help.

Also checks that the example config names every component with valid parameters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from intrabench import registry
from intrabench.config import load_config
from intrabench.engine.episode import run_episode

REPO = Path(__file__).resolve().parents[2]


def _mean_dice_by_step(
    model_name: str,
    prompter: str,
    refiner: str,
    steps: int,
    n_cases: int = 2,
    keep: bool = True,
    **prompter_params,
) -> np.ndarray:
    model = registry.models.create(model_name)
    curves = []
    for case in registry.datasets.create("demo-phantoms", {"n_cases": n_cases}):
        model.set_case(case.image)
        for target in case.targets:
            results = run_episode(
                case,
                target,
                model,
                registry.prompters.create(prompter, prompter_params),
                prompter,
                registry.refiners.create(refiner),
                refiner,
                steps=steps,
                keep_previous_prompts=keep,
                seed=0,
            )
            curves.append([r.metrics["dice"] for r in results])
            assert all(r.effort > 0 or r.converged for r in results)
    return np.mean(curves, axis=0)


def test_scribble_refinement_improves_a_2d_model_from_point_interpolation():
    curve = _mean_dice_by_step(
        "random-walker-2d", "point-interpolation", "scribble", steps=3, n_slices=3
    )
    assert curve[-1] > curve[0] + 0.05, curve


def test_per_slice_corrective_clicks_improve_a_2d_model():
    curve = _mean_dice_by_step(
        "random-walker-2d", "center-point-per-slice", "corrective-point-per-slice", steps=3
    )
    assert curve[-1] > curve[0] + 0.05, curve


@pytest.mark.slow
def test_scribble_refinement_improves_a_3d_model_from_a_box():
    curve = _mean_dice_by_step("region-growing-3d", "box-3d", "scribble", steps=3, n_cases=3)
    assert curve[-1] > curve[0], curve


def test_propagation_runs_through_a_real_2d_model_and_costs_seven():
    case = next(iter(registry.datasets.create("demo-phantoms", {"n_cases": 1})))
    model = registry.models.create("random-walker-2d")
    model.set_case(case.image)
    target = case.targets[0]
    (result,) = run_episode(
        case, target, model, registry.prompters.create("point-propagation"), "point-propagation"
    )
    gt_slices = np.flatnonzero(case.target_mask(target).any(axis=(1, 2)))
    prompted = result.prompt.slices()
    assert result.effort == 7
    assert gt_slices[0] <= prompted[0] and prompted[-1] <= gt_slices[-1]
    assert result.metrics["dice"] > 0.2


def test_the_showcase_config_names_valid_components():
    config = load_config(REPO / "configs" / "prompters-showcase.yaml")
    names = {spec.name for spec in config.prompters} | {spec.name for spec in config.refiners}
    assert {"point-interpolation", "box-propagation", "cvpr25-box", "scribble"} <= names


def test_prompters_list_shows_every_component_with_its_effort_rule(capsys):
    from intrabench.cli import main

    assert main(["prompters", "list"]) == 0
    out = capsys.readouterr().out
    for name, cls in registry.prompters.items() + registry.refiners.items():
        line = next(row for row in out.splitlines() if f" {name} " in row)
        assert cls.effort_rule in line
    for expected in (
        "point-propagation",
        "cvpr25-box",
        "scribble",
        "center-error-click",
        "box-per-slice",
        "center-point-per-slice",
        "box-3d",
    ):
        assert expected in out


def test_configs_reject_unknown_prompter_parameters():
    from intrabench.errors import ConfigError

    with pytest.raises(ConfigError, match="n_slices"):
        registry.prompters.check_params("point-interpolation", {"n_slice": 3})
    with pytest.raises(ConfigError, match="n_slices must be >= 1"):
        registry.prompters.create("point-interpolation", {"n_slices": 0})


@pytest.mark.parametrize("refiner", ["center-error-click", "cvpr25-click"])
def test_region_growing_3d_takes_corrections_outside_its_cvpr25_box(refiner):
    """Regression: corrective clicks landing outside the 3D box indexed past the search region
    (IndexError at the first correction), which killed whole runs."""
    model = registry.models.create("region-growing-3d")
    for case in registry.datasets.create("demo-phantoms", {"n_cases": 3}):
        model.set_case(case.image)
        for target in case.targets:
            results = run_episode(
                case,
                target,
                model,
                registry.prompters.create("cvpr25-box"),
                "cvpr25-box",
                registry.refiners.create(refiner),
                refiner,
                steps=3,
                seed=0,
            )
            assert len(results) == 4
            assert all(0.0 <= r.metrics["dice"] <= 1.0 for r in results)
