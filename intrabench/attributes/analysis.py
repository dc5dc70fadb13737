"""The whole attribute analysis of one run's rows (what ``intrabench attributes`` and the
report show): targets with groups, tertile cuts, group means and extreme-group differences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from intrabench.attributes.join import rows_with_attributes
from intrabench.attributes.scores import METRICS
from intrabench.attributes.stratify import (
    CONFIG,
    assign_groups,
    extremes_table,
    stratified_table,
    target_scores,
)


@dataclass
class AttributeAnalysis:
    """What ``intrabench attributes`` computes from a run's rows and attributes.

    Attributes:
        targets: One row per configuration x target: its scores, ``attr_*`` and ``group_*``.
        cuts: Each dataset's tertile cuts per attribute.
        groups: The mean score per attribute group
            (:func:`~intrabench.attributes.stratify.stratified_table`).
        extremes: The extreme groups' differences for every score of ``METRICS`` the run has
            (:func:`~intrabench.attributes.stratify.extremes_table`).
    """

    targets: pd.DataFrame  # one row per configuration x target: scores, attr_*, group_*
    cuts: pd.DataFrame  # each dataset's tertile cuts per attribute
    groups: pd.DataFrame  # stratify.stratified_table
    extremes: pd.DataFrame  # stratify.extremes_table, every score in METRICS the run has


def analyse(
    rows: pd.DataFrame,
    run_dir: str | Path,
    by: Sequence[str] = CONFIG,
    n_boot: int = 1000,
    seed: int = 0,
) -> AttributeAnalysis:
    """The analysis of ``rows`` (result rows of ``run_dir``, whose config names the datasets
    for targets that lack attributes), tables per ``by`` columns.

    Args:
        rows: The run's result rows (one per step); targets without ``attr_*`` columns are
            measured (:func:`~intrabench.attributes.join.rows_with_attributes`).
        run_dir: The run directory, whose ``config.yaml`` names the datasets.
        by: The columns a table row is per (default: model, prompter, refiner).
        n_boot: Bootstrap resamples of the cases for the intervals.
        seed: The bootstrap's seed.

    Returns:
        The targets with their groups, the tertile cuts, the group means and the extreme-group
        differences.
    """
    targets, cuts = assign_groups(target_scores(rows_with_attributes(rows, run_dir)))
    return regroup(
        AttributeAnalysis(targets, cuts, pd.DataFrame(), pd.DataFrame()), by, n_boot, seed
    )


def regroup(
    analysis: AttributeAnalysis, by: Sequence[str], n_boot: int = 1000, seed: int = 0
) -> AttributeAnalysis:
    """The same targets with the tables per other ``by`` columns.

    Args:
        analysis: An analysis of :func:`analyse`; its targets and cuts are kept.
        by: The columns a table row is per (e.g. ``["model"]``).
        n_boot: Bootstrap resamples of the cases for the intervals.
        seed: The bootstrap's seed.

    Returns:
        A new analysis with ``groups`` and ``extremes`` computed per ``by``.
    """
    targets = analysis.targets
    extremes = [
        extremes_table(targets, metric, n_boot=n_boot, seed=seed, by=by)
        for metric in METRICS.values()
        if metric in targets
    ]
    return AttributeAnalysis(
        targets,
        analysis.cuts,
        stratified_table(targets, n_boot=n_boot, seed=seed, by=by),
        pd.concat(extremes, ignore_index=True),
    )
