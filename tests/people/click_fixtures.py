"""The run and the click-collection site that the click tests share (built once per session),
and a scripted person's click file (what the page exports)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.people.clicks.build import build_collection

MODELS = ["random-walker-3d", "region-growing-3d"]
DATASET = {"name": "demo-phantoms", "n_cases": 2, "shape": [16, 48, 48]}


@pytest.fixture(scope="session")
def click_run(tmp_path_factory) -> Path:
    """Two classical models on two phantoms (7 targets), a click and one correction, every
    step's mask saved."""
    path = tmp_path_factory.mktemp("clicks") / "run"
    config = RunConfig.model_validate(
        {
            "name": "clicks",
            "datasets": [DATASET],
            "models": MODELS,
            "prompters": ["center-points-per-volume"],
            "refiners": ["center-error-click"],
            "refinement_steps": 1,
            "save_predictions": "all",
        }
    )
    Runner(config, path).run()
    return path


@pytest.fixture(scope="session")
def click_site(click_run, tmp_path_factory):
    """12 tasks (3 first clicks, 9 corrections), seed 0: (BuiltCollection, its folder)."""
    out = tmp_path_factory.mktemp("click-site")
    return build_collection(click_run, out, n=12, seed=0, progress=False), out


def manifest_of(out: Path) -> dict:
    text = (out / "tasks" / "manifest.js").read_text()
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def task_of(out: Path, name: str) -> dict:
    """A built task's data (what ``tasks/<name>.js`` hands the page)."""
    text = (out / "tasks" / f"{name}.js").read_text()
    return json.loads(text[len("window.intrabenchTask(") : text.rindex(")")])


def click_record(task: dict, collection: str, zyx, rater: str = "alice", **changes) -> dict:
    """One click as the page records it, on ``task`` (a manifest entry) at ``zyx``."""
    record = {
        "collection": collection,
        "task": task["task"],
        "dataset": task["dataset"],
        "case": task["case"],
        "target": task["target"],
        "kind": task["kind"],
        "step": task["click_step"],
        "z": int(zyx[0]),
        "y": int(zyx[1]),
        "x": int(zyx[2]),
        "label": 1,
        "seconds": 2.5,
        "slices_visited": [int(zyx[0])],
        "window": {"centre": 40, "width": 400, "name": "default"},
        "windows_used": 1,
        "input": "mouse",
        "clicked_at": "2026-12-02T04:00:00.000Z",
        "rater": rater,
    }
    record.update(changes)
    return record


def click_file(path: Path, collection: str, clicks: list, rater: str = "alice") -> Path:
    """A click file as the page exports it."""
    data = {
        "format": "intrabench-clicks",
        "version": 1,
        "collection": collection,
        "rater": rater,
        "exported_at": "2026-12-02T04:10:00.000Z",
        "clicks": clicks,
    }
    path.write_text(json.dumps(data))
    return path
