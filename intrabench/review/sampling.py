"""Which masks people are asked to rate: a seeded sample of a run's saved predictions,
stratified over configurations and steps, in a shuffled, blinded order."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.engine.finishing import (
    prediction_file_name,
    prediction_folder,
    step_prediction_file_name,
)

#: What identifies a rated mask in the results (and in the review's key).
MASK_KEYS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]
STRATUM = ["model", "prompter", "refiner", "step"]


def mask_file(run_dir: Path, row: pd.Series, final_step: int) -> Path | None:
    """The saved prediction of ``row``'s (configuration, target, step), or None: the final
    step's file (``save_predictions: true``), or a step's own (``save_predictions: all``)."""
    folder = prediction_folder(run_dir, row["dataset"], row["model"], row["prompter"],
                               row["refiner"], int(row["seed"]))
    own = folder / step_prediction_file_name(row["case"], row["target"], int(row["step"]))
    if own.exists():
        return own
    if int(row["step"]) == final_step:
        final = folder / prediction_file_name(row["case"], row["target"])
        if final.exists():
            return final
    return None


def candidate_masks(rows: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Rows whose mask was saved and differs from the step before (a converged step repeats
    its predecessor's mask), with a ``mask_file`` column."""
    rows = rows.copy()
    episode = [k for k in MASK_KEYS if k != "step"]
    rows["final_step"] = rows.groupby(episode)["step"].transform("max")
    if "converged" in rows:
        rows = rows[~rows["converged"].astype(bool)]
    files = [mask_file(run_dir, row, int(row["final_step"])) for _, row in rows.iterrows()]
    rows["mask_file"] = [str(f) if f is not None else None for f in files]
    return rows[rows["mask_file"].notna()].reset_index(drop=True)


def sample_masks(candidates: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """Up to ``n`` candidates, spread evenly over the strata (model, prompter, refiner, step):
    each stratum's candidates in a seeded random order, then taken one per stratum in turn;
    the chosen masks shuffled again from the seed. Adds ``job`` (``job-001``...), the only
    name a rater sees."""
    rng = np.random.default_rng(seed)
    queues = []
    for _key, members in candidates.groupby(STRATUM, sort=True, dropna=False):
        queues.append(list(members.index[rng.permutation(len(members))]))
    chosen: list[int] = []
    while len(chosen) < n and any(queues):
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    sample = candidates.loc[chosen].iloc[rng.permutation(len(chosen))].reset_index(drop=True)
    width = max(3, len(str(len(sample))))
    sample.insert(0, "job", [f"job-{i + 1:0{width}d}" for i in range(len(sample))])
    return sample


def review_id(sample: pd.DataFrame, seed: int) -> str:
    """A short name of this review (its masks and seed), shared by its page, key and ratings."""
    digest = hashlib.sha256(str(seed).encode())
    for values in sample[MASK_KEYS].astype(str).itertuples(index=False):
        digest.update("|".join(values).encode())
    return digest.hexdigest()[:10]
