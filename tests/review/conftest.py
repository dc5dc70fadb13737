"""The run and the review site that the review's tests share (built once per session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.review.build import build_review

MODELS = ["region-growing-3d", "random-walker-2d", "random-walker-3d"]
PROMPTERS = ["box-3d", "center-points-per-volume"]


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("review") / "run"
    config = RunConfig.model_validate(
        {
            "name": "review",
            "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
            "models": MODELS,
            "prompters": PROMPTERS,
            "refiners": ["scribble"],
            "refinement_steps": 1,
            "save_predictions": "all",
        }
    )
    Runner(config, path).run()
    return path


@pytest.fixture(scope="session")
def site(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return build_review(run_dir, out, n=12, seed=0), out


def read_job(out: Path, name: str) -> dict:
    """A built job's data (what ``jobs/<name>.js`` hands the page)."""
    text = (out / "jobs" / f"{name}.js").read_text()
    return json.loads(text[len("window.intrabenchJob(") : text.rindex(")")])
