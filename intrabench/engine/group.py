"""A group's episodes: the work of one (dataset, case, model) as episodes to run.

Every target of the case, for every unit of the group (prompter, refiner, seed), is one
episode (:mod:`intrabench.engine.episode`): its simulated user, seeded from its identity, and
its ground truth, which only the user and the metrics see. The executors run these episodes
(:mod:`intrabench.execution`); :mod:`intrabench.engine.finishing` turns their results into the
unit's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from intrabench import registry
from intrabench.clicks.policy import ClickPolicy, ImageWindow
from intrabench.engine.plan import WorkUnit
from intrabench.engine.simulated_user import SimulatedUser
from intrabench.masks import with_box
from intrabench.types import Case


@dataclass(eq=False)
class EpisodeTask:
    """One episode to run. ``ground_truth``: boolean (z, y, x) mask of the target; ``tag`` is
    handed back with the results."""

    key: str
    user: SimulatedUser
    ground_truth: np.ndarray
    steps: int
    refine: bool
    keep_previous_prompts: bool
    tag: Any = None
    #: the target's class name, told to the model before each of its forward passes
    target_class: str | None = None


def target_mask(case: Case, target) -> np.ndarray:
    """The target's mask, read-only (shared by the episode's prompter, refiner and metrics),
    its bounding box known from the case's label boxes.

    Args:
        case: The loaded case.
        target: One of ``case.targets``.

    Returns:
        The boolean (z, y, x) mask of the target, not writable, its bounding box attached
        (:func:`~intrabench.masks.with_box`), so no later step measures it again.
    """
    return with_box(case.target_mask(target), case.target_box(target))


def image_window(case: Case, target) -> ImageWindow | None:
    """The window of ``case``'s image around ``target`` that a simulated user with an
    image-conditioned clickability model is given (docs/realistic-clicks.md).

    Args:
        case: The loaded case.
        target: One of ``case.targets``.

    Returns:
        The image's crop over the target's bounding box grown by the default margin
        (:meth:`~intrabench.clicks.policy.ImageWindow.around`), or None when the target has no
        voxel in the label map.
    """
    box = case.target_box(target)
    return None if box is None else ImageWindow.around(case.image.array, box)


def episode_tasks(
    units: list[WorkUnit],
    case: Case,
    model_dimension: int,
    failed: set[str] = frozenset(),
) -> Iterator[EpisodeTask]:
    """The episodes of ``units`` on ``case``, unit by unit, target by target; made lazily,
    so only the episodes in flight hold a ground truth. Units in ``failed`` (by key, a set
    the caller fills while they run) yield no further episodes.

    Each unit's prompter, refiner and clickability model are built once from the registry
    and shared by its episodes; a robustness unit's simulated user clicks through a
    :class:`~intrabench.clicks.policy.ClickPolicy` (image windows cut once per target).

    Args:
        units: The group's work units (same dataset, case and model), in order.
        case: The loaded case.
        model_dimension: The model's dimension (2 or 3), which the simulated user prompts for.
        failed: Keys of the units that failed so far; checked before each episode.

    Yields:
        One task per (unit, target), keyed ``<unit key>/<target index>``, tagged
        ``(unit, target index, target)``.
    """
    windows: dict[str, ImageWindow | None] = {}  # image windows by target
    for unit in units:
        prompter = registry.prompters.create(unit.prompter.name, unit.prompter.params)
        refiner = (
            registry.refiners.create(unit.refiner.name, unit.refiner.params)
            if unit.refiner
            else None
        )
        clickability = (
            registry.clickability.create(unit.clickability.name, unit.clickability.params)
            if unit.click_group is not None and unit.clickability
            else None
        )
        for index, target in enumerate(case.targets):
            if unit.key in failed:
                break
            identity = (case.dataset, case.case_id, target.target_id)
            clicks = None
            if clickability is not None:
                window = None
                if clickability.needs_image:  # cut once per target, shared by strategies
                    if target.target_id not in windows:
                        windows[target.target_id] = image_window(case, target)
                    window = windows[target.target_id]
                clicks = ClickPolicy(
                    clickability,
                    unit.click_group or "baseline",
                    unit.n_groups,
                    window,
                    identity,
                )
            user = SimulatedUser(
                prompter=prompter,
                prompter_key=unit.prompter_key,
                refiner=refiner,
                refiner_key=unit.refiner_key,
                seed=unit.seed,
                identity=identity,
                spacing=case.image.spacing,
                model_dimension=model_dimension,
                clicks=clicks,
            )
            yield EpisodeTask(
                key=f"{unit.key}/{index}",
                user=user,
                ground_truth=target_mask(case, target),
                steps=unit.steps if refiner else 0,
                refine=refiner is not None,
                keep_previous_prompts=unit.keep_previous_prompts,
                tag=(unit, index, target),
                target_class=target.class_name,
            )
