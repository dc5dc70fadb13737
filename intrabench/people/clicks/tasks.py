"""Which clicks people are asked for: a seeded, blinded set of click tasks from a run's saved
predictions, as RClicks collected them, in 3D.

Two kinds of task:

* ``first``: the first click on a target (step 0 of the ``recorded`` map): the target is
  outlined, no prediction is shown; one task per target at most.
* ``correction``: the click that would correct a saved prediction of result step ``s`` (step
  ``s + 1`` of the ``recorded`` map: the ``s + 1``-th correction); the prediction and its
  error (missed and extra voxels) are outlined.

Corrections are spread as evenly as their number allows over the models, then, within a model,
over the targets (:func:`intrabench.review.sampling.even_shares`); within one (model, target)
the mask is a seeded random choice. The tasks are shuffled from the seed and named ``task-001``
...: no model, prompter or refiner is named in what a person sees.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from intrabench.review.sampling import MASK_KEYS, even_shares

#: What identifies a target in a run's rows.
TARGET_KEYS = ["dataset", "case", "target"]


def first_count(n: int, targets: int, first: int | None) -> int:
    """How many ``first`` tasks of ``n``: ``first`` when given (at most one per target),
    otherwise a quarter of ``n`` (at least one), never more than there are targets.

    Args:
        n: The tasks asked for.
        targets: The distinct targets available.
        first: The number asked for with ``--first``; None: not given.

    Returns:
        The number of first-click tasks.
    """
    wanted = max(1, n // 4) if first is None else first
    return int(min(wanted, targets, n))


def _seeded_ties(keys: list, rng: np.random.Generator) -> dict:
    return dict(zip(keys, rng.permutation(len(keys)).tolist()))


def _spread(frame: pd.DataFrame, by: list[str], count: int, rng: np.random.Generator) -> list:
    """Index labels of ``count`` rows of ``frame``, spread evenly over the groups of ``by``
    (seeded ties), the rows of a group a seeded random choice."""
    groups = dict(list(frame.groupby(by, sort=True, dropna=False)))
    shares = even_shares(
        {k: len(v) for k, v in groups.items()}, count, _seeded_ties(list(groups), rng)
    )
    chosen: list = []
    for key, group in groups.items():
        chosen.extend(group.index[rng.permutation(len(group))[: shares[key]]].tolist())
    return chosen


def choose_tasks(
    candidates: pd.DataFrame, n: int, seed: int = 0, first: int | None = None
) -> pd.DataFrame:
    """Up to ``n`` click tasks from ``candidates``: :func:`first_count` first clicks on distinct
    targets, the rest corrections of masks that are not perfect, spread over models, then targets.

    Args:
        candidates: A run's rows with a saved ``mask_file``, as
            :func:`intrabench.review.sampling.candidate_masks` gives them.
        n: The most tasks.
        seed: Seeds the choice and the shuffle.
        first: The first-click tasks asked for; None: :func:`first_count`'s default.

    Returns:
        Columns ``task``, ``kind``, ``click_step`` (the ``recorded`` map's step), the target's
        keys and, for a correction, the mask's keys (``mask_step`` its result step) and
        ``mask_file``; shuffled, in the order people see them.
    """
    rng = np.random.default_rng(seed)
    targets = candidates.drop_duplicates(TARGET_KEYS)[TARGET_KEYS].reset_index(drop=True)
    n_first = first_count(n, len(targets), first)
    picked = targets.loc[rng.permutation(len(targets))[:n_first]]
    firsts = picked.assign(kind="first", click_step=0)
    imperfect = candidates[candidates["dice"] < 1.0] if "dice" in candidates else candidates
    corrections = pd.DataFrame(columns=[*MASK_KEYS, "mask_file"])
    wanted = n - n_first
    if wanted > 0 and len(imperfect):
        models = dict(list(imperfect.groupby("model", sort=True)))
        shares = even_shares(
            {k: len(v) for k, v in models.items()}, wanted, _seeded_ties(list(models), rng)
        )
        chosen = []
        for model, rows in models.items():
            chosen.extend(_spread(rows, TARGET_KEYS, shares[model], rng))
        corrections = imperfect.loc[chosen, [*MASK_KEYS, "mask_file"]]
    corrections = corrections.rename(columns={"step": "mask_step"}).assign(kind="correction")
    corrections["click_step"] = corrections["mask_step"].astype(int) + 1
    tasks = pd.concat([firsts, corrections], ignore_index=True)
    for column in ("seed", "mask_step", "click_step"):  # whole numbers, empty for first clicks
        tasks[column] = tasks[column].astype("Int64")
    tasks = tasks.iloc[rng.permutation(len(tasks))].reset_index(drop=True)
    width = max(3, len(str(len(tasks))))
    tasks.insert(0, "task", [f"task-{i + 1:0{width}d}" for i in range(len(tasks))])
    return tasks


def describe_tasks(tasks: pd.DataFrame) -> list[str]:
    """What was chosen, one line each: kinds, models (corrections), targets.

    Args:
        tasks: The tasks as :func:`choose_tasks` gives them.

    Returns:
        ``kind: ...``, ``model (corrections): ...`` (when there are corrections) and
        ``targets: N, a to b tasks each``.
    """
    kinds = tasks["kind"].value_counts().sort_index()
    lines = ["kind: " + ", ".join(f"{k} {v}" for k, v in kinds.items())]
    corrections = tasks[tasks["kind"] == "correction"]
    if len(corrections):
        models = corrections["model"].value_counts().sort_index()
        lines.append("model (corrections): " + ", ".join(f"{k} {v}" for k, v in models.items()))
    per_target = tasks.groupby(TARGET_KEYS).size()
    lines.append(f"targets: {len(per_target)}, {per_target.min()} to {per_target.max()} tasks each")
    return lines


def collection_id(tasks: pd.DataFrame, seed: int) -> str:
    """A short name of this collection (its tasks and seed), shared by its page, key and
    click files.

    Args:
        tasks: The tasks as :func:`choose_tasks` gives them.
        seed: The collection's seed.

    Returns:
        10 hex digits of a SHA-256 of the seed and the tasks.
    """
    digest = hashlib.sha256(f"clicks|{seed}".encode())
    columns = ["task", "kind", "click_step", *MASK_KEYS, "mask_step"]
    for values in tasks.reindex(columns=columns).itertuples(index=False):
        digest.update("|".join("" if pd.isna(v) else str(v) for v in values).encode())
    return digest.hexdigest()[:10]
