"""Which masks people are asked to rate: a seeded sample of a run's saved predictions, spread
as evenly as its size allows over models, prompters, refiners, refinement steps and datasets,
in a shuffled, blinded order."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.io.run_paths import MASK_KEYS, mask_file  # noqa: F401 - the review's names

#: What the sample is spread over, the first most evenly (see :func:`sample_masks`).
FACTORS = ["model", "prompter", "refiner", "step", "dataset"]


def candidate_masks(rows: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Rows whose mask was saved and differs from the step before, with a ``mask_file``
    column.

    A converged step repeats its predecessor's mask: it is not a candidate, but its file is its
    predecessor's mask (with ``save_predictions: true`` the final file of an episode that reached
    a perfect mask is the perfect mask, kept on the converged last row), so that step, the one
    that made the mask, gets the file where it has none.

    Args:
        rows: A run's result rows (:func:`~intrabench.io.results.load_results`).
        run_dir: The run directory holding ``predictions/``.

    Returns:
        The candidate rows, sorted by episode and step, ``mask_file`` the saved file's path as
        text.
    """
    episode = [k for k in MASK_KEYS if k != "step"]
    rows = rows.sort_values([*episode, "step"], kind="stable").reset_index(drop=True)
    rows["final_step"] = rows.groupby(episode)["step"].transform("max")
    files = pd.Series(
        [mask_file(run_dir, row, int(row["final_step"])) for _, row in rows.iterrows()],
        index=rows.index,
        dtype=object,
    ).map(lambda f: None if f is None else str(f))
    if "converged" in rows:
        converged = rows["converged"].astype(bool)
        # the step whose mask each row shows: its own, or the last one before convergence
        maker = pd.Series(rows.index.where(~converged), index=rows.index, dtype=float)
        maker = maker.groupby([rows[k] for k in episode], dropna=False).ffill()
        for index in rows.index[converged & files.notna() & maker.notna()]:
            source = int(maker[index])
            if pd.isna(files[source]):
                files[source] = files[index]
        rows, files = rows[~converged], files[~converged]
    rows = rows.assign(mask_file=files)
    return rows[rows["mask_file"].notna()].reset_index(drop=True)


def even_shares(capacity: dict, n: int, preference: dict) -> dict:
    """``n`` split over the keys of ``capacity`` as evenly as their capacities allow.

    Water filling: equal shares, a full key's surplus goes to the others; what does not divide
    evenly goes one each to the keys first in ``preference`` order (smaller first).

    Args:
        capacity: Key -> the most it can be given (masks available).
        n: How many to give in all (at most the capacities' sum is given).
        preference: Key -> a sortable value; smaller keys get the remainder first.

    Returns:
        Key -> its share, each within its capacity.
    """
    given = dict.fromkeys(capacity, 0)
    remaining = min(n, sum(capacity.values()))
    open_keys = [k for k in capacity if capacity[k] > 0]
    while remaining > 0 and open_keys:
        share = remaining // len(open_keys)
        if share == 0:
            for key in sorted(open_keys, key=lambda k: preference[k])[:remaining]:
                given[key] += 1
            break
        for key in open_keys:
            extra = min(share, capacity[key] - given[key])
            given[key] += extra
            remaining -= extra
        open_keys = [k for k in open_keys if given[k] < capacity[k]]
    return given


def sample_masks(candidates: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """Up to ``n`` candidates, spread as evenly as ``n`` allows over :data:`FACTORS` in turn.

    ``n`` is split evenly over the models (one with too few masks gives its surplus to the
    others), each model's share evenly over its prompters, then refiners, steps and datasets; what
    does not divide evenly goes to the values sampled least so far within the model, then over the
    whole sample (seeded ties), so that, e.g., 3 models and 2 steps with ``n = 3`` give steps 0, 1
    and one of them, not three times step 0. Within the last group the masks are a seeded random
    choice. The chosen masks are shuffled from the seed.

    Args:
        candidates: Rows as :func:`candidate_masks` gives them.
        n: The most masks to sample.
        seed: Seeds the choice, the ties and the shuffle.

    Returns:
        The sampled rows in shuffled order with a ``job`` column (``job-001``...), the only name
        a rater sees.
    """
    rng = np.random.default_rng(seed)
    used: Counter = Counter()  # (scope, factor, value) -> masks given so far
    chosen: list[int] = []

    def take(group: pd.DataFrame, count: int, level: int, model: tuple) -> None:
        if count <= 0:
            return
        if level == len(FACTORS):
            chosen.extend(group.index[rng.permutation(len(group))[:count]].tolist())
            return
        factor = FACTORS[level]
        parts = dict(list(group.groupby(factor, sort=True, dropna=False)))
        ties = dict(zip(parts, rng.permutation(len(parts))))
        # least used within this model first, then over the whole sample
        preference = {k: (used[(model, factor, k)], used[((), factor, k)], ties[k]) for k in parts}
        shares = even_shares({k: len(v) for k, v in parts.items()}, count, preference)
        for key in parts:
            used[(model, factor, key)] += shares[key]
            if model:
                used[((), factor, key)] += shares[key]
        for key, part in parts.items():
            take(part, shares[key], level + 1, model or (key,))

    take(candidates, n, 0, ())
    sample = candidates.loc[chosen].iloc[rng.permutation(len(chosen))].reset_index(drop=True)
    width = max(3, len(str(len(sample))))
    sample.insert(0, "job", [f"job-{i + 1:0{width}d}" for i in range(len(sample))])
    return sample


def describe_sample(sample: pd.DataFrame) -> list[str]:
    """What was sampled, one line per factor: ``model: a 4, b 4, c 4``.

    Args:
        sample: Rows as :func:`sample_masks` gives them.

    Returns:
        One line per factor of :data:`FACTORS`, values sorted.
    """
    lines = []
    for factor in FACTORS:
        counts = sample[factor].value_counts(sort=False).sort_index()
        lines.append(
            f"{factor}: " + ", ".join(f"{value} {count}" for value, count in counts.items())
        )
    return lines


def review_id(sample: pd.DataFrame, seed: int) -> str:
    """A short name of this review (its masks and seed), shared by its page, key and ratings.

    Args:
        sample: The sampled rows (their :data:`MASK_KEYS`, in the sample's order).
        seed: The sample's seed.

    Returns:
        10 hex digits of a SHA-256 of the seed and the masks' keys.
    """
    digest = hashlib.sha256(str(seed).encode())
    for values in sample[MASK_KEYS].astype(str).itertuples(index=False):
        digest.update("|".join(values).encode())
    return digest.hexdigest()[:10]
