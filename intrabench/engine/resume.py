"""What a resumed run still has to compute."""

from __future__ import annotations

from pathlib import Path

from intrabench.config import RunConfig
from intrabench.engine.plan import WorkUnit
from intrabench.io.results import ResultsStore
from intrabench.io.run_paths import case_file_prefix, prediction_folder


def needs_work(store: ResultsStore, config: RunConfig, run_dir: Path, unit: WorkUnit) -> bool:
    """Whether ``unit`` is to be (re)computed: it has no unit file in ``store``, or ``config``
    saves predictions and a run before it did not (its prediction files in ``run_dir`` are
    missing).

    Args:
        store: The run folder's results store (which units have a unit file).
        config: The run's config (its ``save_predictions``).
        run_dir: The run folder, where the unit's prediction files would be.
        unit: The work unit to check.

    Returns:
        True when the unit is to be computed again, False when its results (and predictions,
        if saved) are already there.
    """
    if not store.is_done(unit.key):
        return True
    if not config.save_predictions:
        return False
    folder = prediction_folder(
        run_dir,
        unit.dataset.key,
        unit.model.key,
        unit.prompter_key,
        unit.refiner_key,
        unit.seed,
    )
    return not any(folder.glob(f"{case_file_prefix(unit.case_id)}*.nii.gz"))
