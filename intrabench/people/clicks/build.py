"""``intrabench clicks collect build``: a self-contained, blinded click-collection site.

Layout of ``OUT``::

    OUT/index.html            the page (script and style inline; works from file://)
    OUT/tasks/manifest.js     the collection's id and its tasks (ids, kind, step, grid), in
                              the order people see them
    OUT/tasks/task-001.js ... one task each, loaded when shown

Nothing in ``OUT`` names a model, prompter or configuration: which mask a correction task
shows is kept in the run directory, ``RUN/click-collections/<id>/key.csv``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from intrabench.errors import UserError
from intrabench.people.clicks.render import task_data, task_script
from intrabench.people.clicks.tasks import (
    TARGET_KEYS,
    choose_tasks,
    collection_id,
    describe_tasks,
)

#: The manifest's format name and version (the page and ``import`` check them).
MANIFEST_FORMAT = "intrabench-click-tasks"
MANIFEST_VERSION = 1


@dataclass
class BuiltCollection:
    """What building a click collection made.

    Attributes:
        collection: The collection's identifier.
        site: The folder of the static page to hand to the people who click.
        key: The file mapping the blinded tasks back to their cases and targets.
        tasks: The number of tasks.
        spread: What was chosen, one line per factor (``kind: correction 9, first 3``).
    """

    collection: str
    site: Path
    key: Path
    tasks: int
    #: what was chosen, one line each (``kind: correction 9, first 3``)
    spread: list[str]


def target_name(target: Any) -> str:
    """What the page calls a target: its class and its id (``lesion (lesion_2)``).

    Args:
        target: A target with ``class_name`` and ``target_id``.

    Returns:
        ``"<class> (<target id>)"``.
    """
    return f"{target.class_name} ({target.target_id})"


def _task_identity(collection: str, task: pd.Series, case: Any, target: Any) -> dict:
    return {
        "task": str(task["task"]),
        "collection": collection,
        "kind": str(task["kind"]),
        "click_step": int(task["click_step"]),
        "dataset": str(case.dataset),
        "case": str(case.case_id),
        "target": str(target.target_id),
        "target_name": target_name(target),
    }


def _render_tasks(
    run_dir: Path, tasks: pd.DataFrame, collection: str, out: Path, progress: bool
) -> list[dict]:
    """Write one script per task; returns the manifest's entries, in ``tasks``' order."""
    from intrabench.config import run_config, run_dataset
    from intrabench.io.results import atomic_write_text
    from intrabench.io.volume import read_volume
    from intrabench.modality import looks_like_ct

    config = run_config(run_dir)
    datasets: dict[str, Any] = {}
    cases: dict[tuple[str, str], Any] = {}
    entries: dict[int, dict] = {}
    # rendered case by case (the shuffled order would read a case once per task)
    order = tasks.sort_values(["dataset", "case"], kind="stable").index
    for done, index in enumerate(order, start=1):
        task = tasks.loc[index]
        key = str(task["dataset"])
        if key not in datasets:
            datasets[key] = run_dataset(run_dir, config, key)
        if (key, str(task["case"])) not in cases:
            cases.clear()  # one case in memory
            cases[(key, str(task["case"]))] = datasets[key].load(str(task["case"]))
        case = cases[(key, str(task["case"]))]
        target = next(t for t in case.targets if t.target_id == str(task["target"]))
        truth = case.target_mask(target)
        prediction = None
        if task["kind"] == "correction":
            prediction = read_volume(task["mask_file"]).array > 0.5
            if prediction.shape != truth.shape:
                raise UserError(
                    f"{task['mask_file']}: its grid {prediction.shape} is not the "
                    f"image's {truth.shape}"
                )
        image = np.asarray(case.image.array)
        identity = _task_identity(collection, task, case, target)
        modality = str(getattr(datasets[key], "modality", ""))
        data = task_data(
            identity, image, case.image.spacing, looks_like_ct(image, modality), truth, prediction
        )
        atomic_write_text(out / "tasks" / f"{task['task']}.js", task_script(data))
        entries[index] = {
            k: identity[k] for k in ("task", "kind", "click_step", "dataset", "case", "target")
        } | {"shape": data["shape"]}
        if progress:
            print(f"\rrendering tasks: {done}/{len(tasks)}", end="", file=sys.stderr)
    print(("\n" if progress else "") + f"rendered {len(tasks)} tasks", file=sys.stderr)
    return [entries[i] for i in tasks.index]


def build_collection(
    run_dir: str | Path,
    out: str | Path,
    n: int = 60,
    seed: int = 0,
    first: int | None = None,
    progress: bool | None = None,
) -> BuiltCollection:
    """Choose up to ``n`` click tasks from ``run_dir``'s saved predictions (see
    :mod:`intrabench.people.clicks.tasks`) and write the click site to ``out``.

    Args:
        run_dir: A run directory that saved predictions (``save_predictions: all`` or
            ``true``).
        out: The folder of the click site (created).
        n: The most tasks (at least 1).
        seed: Seeds the choice and the task order: the same seed gives the same collection.
        first: How many tasks are first clicks on an empty mask (0 to ``n``); None: a quarter
            of ``n`` (at least one).
        progress: Show a progress bar; None: when standard error is a terminal.

    Returns:
        The collection's id, site, key file, task count and spread.

    Raises:
        UserError: ``n`` or ``first`` out of range, or the run saved no predictions.
    """
    from intrabench.io.results import atomic_write_text, load_results
    from intrabench.review.sampling import candidate_masks

    run_dir, out = Path(run_dir), Path(out)
    progress = sys.stderr.isatty() if progress is None else progress
    if n < 1:
        raise UserError("--n: ask for at least 1 click task")
    if first is not None and not 0 <= first <= n:
        raise UserError(f"--first: give 0 to --n ({n}) first-click tasks, not {first}")
    candidates = candidate_masks(load_results(run_dir), run_dir)
    if candidates.empty:
        raise UserError(
            f"{run_dir} saved no predictions to make click tasks from: run it with "
            "'save_predictions: all' (every step) or 'true' (final masks)"
        )
    tasks = choose_tasks(candidates, n, seed, first)
    collection = collection_id(tasks, seed)
    (out / "tasks").mkdir(parents=True, exist_ok=True)
    entries = _render_tasks(run_dir, tasks, collection, out, progress)
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "collection": collection,
        "seed": seed,
        "tasks": entries,
    }
    atomic_write_text(
        out / "tasks" / "manifest.js", f"window.intrabenchClickTasks = {json.dumps(manifest)};\n"
    )
    page = resources.files("intrabench.people.clicks").joinpath("page.html")
    atomic_write_text(out / "index.html", page.read_text(encoding="utf-8"))
    key_path = run_dir / "click-collections" / collection / "key.csv"
    key = tasks.rename(columns={"dataset": "run_dataset"}).copy()
    key.insert(1, "collection", collection)
    key.insert(2, "dataset", [e["dataset"] for e in entries])
    atomic_write_text(key_path, key.drop(columns=["mask_file"]).to_csv(index=False))
    spread = describe_tasks(tasks)
    return BuiltCollection(collection, out / "index.html", key_path, len(tasks), spread)


def read_manifest(tasks_dir: str | Path) -> dict:
    """The manifest of a built collection (``OUT/tasks/manifest.js``).

    Args:
        tasks_dir: The folder :func:`build_collection` wrote (``OUT``).

    Returns:
        The manifest: the collection's id, format and its tasks (one dict each).

    Raises:
        UserError: ``OUT`` is not a built collection, or its manifest is unreadable.
    """
    path = Path(tasks_dir) / "tasks" / "manifest.js"
    if not path.is_file():
        raise UserError(
            f"--tasks {tasks_dir}: no tasks/manifest.js there; give the folder that "
            "'intrabench clicks collect build' wrote"
        )
    text = path.read_text(encoding="utf-8")
    try:
        manifest = json.loads(text[text.index("{") : text.rindex("}") + 1])
    except ValueError:
        raise UserError(f"{path}: not a click collection's manifest (unreadable)") from None
    if manifest.get("format") != MANIFEST_FORMAT:
        raise UserError(f"{path}: not a click collection's manifest (format)")
    return manifest


__all__ = ["TARGET_KEYS", "BuiltCollection", "build_collection", "read_manifest"]
