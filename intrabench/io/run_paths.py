"""Where a run keeps its files, by name: one low room that the engine, the reports, the review
and the attributes all use (before, each imported the engine's helpers, which ran back up).

* :func:`safe_file_name`: a text as a file-name part;
* :func:`prediction_folder`, :func:`prediction_file_name`, :func:`step_prediction_file_name`:
  ``RUN/predictions/<dataset>/<model>/<prompter>/<refiner>/seed<n>/<case>__<target>.nii.gz``;
* :data:`MASK_KEYS` and :func:`mask_file`: what identifies one step's mask in the results, and
  its saved file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

#: What identifies one step's mask in the results (and a rated mask in a review's key).
MASK_KEYS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]


def safe_file_name(text: Any) -> str:
    """``text`` as a file-name part: letters, digits and -_.= kept, others as _, 120 at most."""
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in str(text))[:120]


def prediction_folder(run_dir: Path, dataset: str, model: str, prompter: str, refiner: str,
                      seed: int) -> Path:
    """The folder of one configuration's prediction files (component keys as in the rows)."""
    parts = [safe_file_name(p) for p in (dataset, model, prompter, refiner, f"seed{seed}")]
    return Path(run_dir).joinpath("predictions", *parts)


def prediction_file_name(case_id: str, target_id: str) -> str:
    return f"{safe_file_name(case_id)}__{safe_file_name(target_id)}.nii.gz"


def step_prediction_file_name(case_id: str, target_id: str, step: int) -> str:
    """The file of one step's prediction (``save_predictions: all``)."""
    return f"{safe_file_name(case_id)}__{safe_file_name(target_id)}__step{int(step)}.nii.gz"


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
