"""Fixtures for the evaluation tests: a tiny real run of the built-in demo."""

from __future__ import annotations

from pathlib import Path

import pytest

from intrabench.config import RunConfig, builtin_demo_path, load_config
from intrabench.execution.runner import Runner


def narrowed_demo(name: str, save_predictions: bool = True, steps: int = 2) -> RunConfig:
    """The built-in demo cut to its phantoms (2 cases), one 3D model, the 3D-box prompter and
    the scribble refiner, so that it runs in about a second."""
    data = load_config(builtin_demo_path()).model_dump(mode="json")
    phantoms = [d for d in data["datasets"] if d["name"] == "demo-phantoms"]
    phantoms[0]["params"]["n_cases"] = 2
    data.update(
        name=name,
        datasets=phantoms,
        models=[m for m in data["models"] if m["name"] == "region-growing-3d"],
        prompters=[p for p in data["prompters"] if p["name"] == "box-3d"],
        refiners=[{"name": "scribble"}],
        refinement_steps=steps,
        save_predictions=save_predictions,
    )
    return RunConfig.model_validate(data)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    Runner(narrowed_demo("tiny"), run_dir).run()
    return run_dir


@pytest.fixture(scope="session")
def tiny_run_without_predictions(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "tiny-nopred"
    Runner(narrowed_demo("tiny-nopred", save_predictions=False, steps=1), run_dir).run()
    return run_dir
