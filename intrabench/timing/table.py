"""The ``time`` table: quality against the clinician's time, per configuration (docs/time-aware.md).

The ranking columns, Dice AUC-time and Dice@60s, are DAVIS's own summary
(:mod:`intrabench.timing.davis_summary`: the mean curve over a dataset's episodes first, then
its AUC and value at 60 s). The other columns are episode metrics
(:func:`~intrabench.timing.budget.episode_time_metrics`) averaged like every other metric
(:mod:`intrabench.evaluation.aggregate`: targets -> cases -> classes -> datasets, then seeds),
then over datasets; among them the per-episode AUC and Dice@60s, kept as
``dice_auc_time`` and ``dice_at_60s``. ``time_to_dice_<t>`` is averaged over the episodes
that reached t within the budget; ``reached_dice_<t>`` gives their share.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from intrabench.evaluation.aggregate import dataset_means
from intrabench.timing.budget import episode_time_metrics
from intrabench.timing.davis_summary import davis_summary
from intrabench.timing.human import TimeModel

SUMMARISED = [
    "human_seconds",
    "model_seconds_waited",
    "interactions_in_budget",
    "dice_auc_time",
    "dice_at_60s",
    "nsd_auc_time",
    "time_to_dice_0.8",
    "reached_dice_0.8",
    "time_to_dice_0.9",
    "reached_dice_0.9",
]


def time_summary(rows: pd.DataFrame, model: TimeModel | None = None) -> pd.DataFrame:
    """Per model x prompter x refiner and dataset (plus ``Average``), every summarised column.

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model; None for the defaults.

    Returns:
        The long table: model, prompter, refiner, dataset, the episode means and the DAVIS
        columns.
    """
    episodes = episode_time_metrics(rows, model)
    if episodes.empty:
        return pd.DataFrame(columns=["model", "prompter", "refiner", "dataset", *SUMMARISED])
    for threshold in ("0.8", "0.9"):
        episodes[f"reached_dice_{threshold}"] = episodes[f"time_to_dice_{threshold}"].notna() * 1.0
    means = dataset_means(episodes, [c for c in SUMMARISED if c in episodes])
    return means.merge(
        davis_summary(rows, model), on=["model", "prompter", "refiner", "dataset"], how="left"
    )


def time_table(rows: pd.DataFrame, model: TimeModel | None = None) -> pd.DataFrame:
    """The display table (mean over datasets): one row per model x prompter x refiner.

    Args:
        rows: Step rows (``results.parquet``).
        model: The time model; None for the defaults.

    Returns:
        The table with display headers: seconds, interactions and Dice/NSD x100.
    """
    model = model or TimeModel()
    summary = time_summary(rows, model)
    average = summary[summary["dataset"] == "Average"]
    return pd.DataFrame(
        {
            "Model": average["model"],
            "Prompter": average["prompter"],
            "Refiner": average["refiner"],
            "Human s": average["human_seconds"].round(1),
            "Waiting s": average["model_seconds_waited"].round(2),
            "Interactions": average["interactions_in_budget"].round(2),
            f"Dice AUC-time x100 (/{model.budget:g} s)": (
                100 * average["dice_auc_time_davis"]
            ).round(2),
            "Dice@60s x100": (100 * average["dice_at_60s_davis"]).round(2),
            # NaN when some step has no NSD (surface metrics not computed there)
            "NSD AUC-time x100": (
                100
                * average.get("nsd_auc_time_davis", pd.Series(float("nan"), index=average.index))
            ).round(2),
            "s to Dice 80": average["time_to_dice_0.8"].round(1),
            "reached Dice 80 %": (100 * average["reached_dice_0.8"]).round(1),
        }
    ).reset_index(drop=True)


def run_time_model(run_dir: str | Path) -> TimeModel:
    """The ``time_model`` of the run in ``run_dir``: its ``config.yaml``'s section, checked as
    the run config's is (the tables and the report read it, so it may be edited after the run).

    A section that is not a valid time model (an edit with a negative, a string or a misspelt
    key) is a ConfigError naming the file and the key: falling back to the defaults without a
    word would measure the tables against a budget nobody chose. A run folder without a
    ``config.yaml`` (assembled by hand) or one written before time models (no section) gets the
    defaults, with a warning for the first.

    Args:
        run_dir: The run folder.

    Returns:
        The run's time model, or the defaults as above.

    Raises:
        ConfigError: The section is not a valid time model.
    """
    import logging

    from intrabench.safe_yaml import read_yaml_file

    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        logging.getLogger(__name__).warning(
            "%s has no config.yaml: the time tables use the default time model "
            "(docs/time-aware.md)",
            run_dir,
        )
        return TimeModel()
    data = read_yaml_file(path, "run's config.yaml")
    if not isinstance(data, dict) or "time_model" not in data:
        return TimeModel()
    return checked_time_model(data["time_model"], str(path))


def checked_time_model(section: object, source: str) -> TimeModel:
    """``section`` (a ``time_model:`` mapping) as a TimeModel; ConfigError in one line naming
    ``source`` and the first wrong key (``time_model.seconds.click: ...``).

    Args:
        section: The ``time_model:`` value as read from YAML.
        source: The file it came from, for the error line.

    Returns:
        The validated time model.

    Raises:
        ConfigError: A key is unknown or a value is refused.
    """
    from pydantic import ValidationError

    from intrabench.errors import ConfigError

    try:
        return TimeModel.model_validate(section)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(["time_model", *(str(part) for part in first["loc"])])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            message = f"unknown key; valid keys: {', '.join(TimeModel.model_fields)}"
        shown = (
            repr(first.get("input"))[:40]
            if first["loc"] and first["type"] != "extra_forbidden"
            else ""
        )
        raise ConfigError(
            f"{source}: {key}: {message}"
            + (f" (given {shown})" if shown else "")
            + "; fix it, or delete the section for the defaults"
        ) from None
