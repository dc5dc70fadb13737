"""Rank stability: how the ranking of configurations moves when the cases are others
(the bootstrap rankings of challenge reports, challengeR's blob plots).

Per dataset the cases are resampled with replacement ``n_boot`` times (the same draws for every
configuration, the targets nested in their case), each resample's dataset scores computed as the
tables compute them (:func:`intrabench.evaluation.paired.resampled_scores`), and the
configurations ranked (1 = best; ties share the best rank). ``Overall`` ranks the mean over
datasets of each resample's dataset scores, among the configurations scored on every dataset of
the rows (a configuration run on some datasets only has no overall rank: its mean would average
other datasets). Dataset ``i`` (in sorted order) is resampled with seed ``seed + i``.

Per configuration and scope: the score and rank of the cases as they are, the median rank over
the resamples, its 95% interval (2.5 and 97.5 percentiles) and the share of resamples at rank 1.
With fewer cases than :data:`~intrabench.evaluation.paired.MIN_CASES_INTERVAL` a scope's resampled
numbers are NaN ("n too small").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import dataset_score
from intrabench.evaluation.paired import (
    CONFIG,
    MIN_CASES_INTERVAL,
    OVERALL,
    case_weights,
    config_label,
    dataset_cells,
    final_step_rows,
    resampled_scores,
)


def ranks_of(scores: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """Ranks along axis 0 (configurations) of ``scores`` (configurations, ...): 1 = best, ties
    share the best of their ranks (``method="min"``), NaN ranked last.

    Args:
        scores: (configurations, ...) scores, e.g. (configurations,) or (configurations,
            n_boot).
        higher_is_better: True for Dice-like metrics, False for distances (HD95).

    Returns:
        Ranks (1 = best) of ``scores``' shape, as floats.
    """
    from scipy.stats import rankdata

    keyed = -scores if higher_is_better else scores.copy()
    keyed = np.where(np.isfinite(keyed), keyed, np.inf)
    return rankdata(keyed, method="min", axis=0)


@dataclass
class RankDistribution:
    """The ranks of one scope: ``configs`` (labels), ``observed`` ranks, and ``resampled``
    ranks (configurations, n_boot); ``resampled`` is None when the scope has too few cases."""

    scope: str
    configs: list[str]
    observed: np.ndarray
    resampled: np.ndarray | None
    n_cases: int
    identities: list[tuple] = field(default_factory=list)
    scores: np.ndarray = field(default_factory=lambda: np.empty(0))


def rank_distributions(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = CONFIG,
    n_boot: int = 1000,
    seed: int = 0,
    higher_is_better: bool = True,
    final: bool = True,
) -> list[RankDistribution]:
    """A :class:`RankDistribution` per dataset (sorted) and one ``Overall`` (see the module's
    docstring); ``rows``: result rows (``final``: each episode's last step first).

    Args:
        rows: Step rows (or final-step rows with ``final=False``).
        metric: The metric column (e.g. ``"dice"``, 0-1).
        config: The configuration columns; those absent from ``rows`` are left out.
        n_boot: Bootstrap resamples of the cases.
        seed: The base seed; dataset ``i`` (sorted order) is resampled with ``seed + i``.
        higher_is_better: True for Dice-like metrics, False for distances (HD95).
        final: Keep only each episode's last step first.

    Returns:
        One distribution per dataset, then ``Overall`` when more than one dataset and more
        than one configuration scored on all of them; resampled ranks None below
        ``MIN_CASES_INTERVAL`` cases.
    """
    config = [c for c in config if c in rows]
    rows = final_step_rows(rows, config) if final else rows
    scopes: list[RankDistribution] = []
    # per dataset: configuration -> index, resampled scores, cases, observed scores
    per_dataset: list[tuple[dict, np.ndarray, int, np.ndarray]] = []
    for index, cells in enumerate(dataset_cells(rows, metric, config)):
        observed = np.array([dataset_score(v) for v in cells.values])
        draws = resampled_scores(cells.values, case_weights(len(cells.cases), n_boot, seed + index))
        n_cases = len(cells.cases)
        scopes.append(
            RankDistribution(
                cells.dataset,
                [config_label(c) for c in cells.configs],
                ranks_of(observed, higher_is_better),
                ranks_of(draws, higher_is_better) if n_cases >= MIN_CASES_INTERVAL else None,
                n_cases,
                list(cells.configs),
                observed,
            )
        )
        per_dataset.append(({c: i for i, c in enumerate(cells.configs)}, draws, n_cases, observed))
    if len(per_dataset) > 1:
        everywhere = sorted(
            set.intersection(*(set(p[0]) for p in per_dataset)), key=lambda c: tuple(map(str, c))
        )
        if len(everywhere) > 1:
            draws = np.mean([p[1][[p[0][c] for c in everywhere]] for p in per_dataset], axis=0)
            observed = np.mean([p[3][[p[0][c] for c in everywhere]] for p in per_dataset], axis=0)
            n_cases = sum(p[2] for p in per_dataset)
            scopes.append(
                RankDistribution(
                    OVERALL,
                    [config_label(c) for c in everywhere],
                    ranks_of(observed, higher_is_better),
                    ranks_of(draws, higher_is_better) if n_cases >= MIN_CASES_INTERVAL else None,
                    n_cases,
                    everywhere,
                    observed,
                )
            )
    return scopes


def rank_table(scopes: Sequence[RankDistribution], config: Sequence[str] = CONFIG) -> pd.DataFrame:
    """One row per scope and configuration: ``score``, ``rank`` (on the cases as they are),
    ``median_rank``, ``rank_low``/``rank_high`` (95% interval), ``rank1_share`` (share of
    resamples at rank 1), ``n_cases``, ``n_boot``; sorted by scope then rank.

    Args:
        scopes: The distributions of :func:`rank_distributions`.
        config: The configuration column names, one column each in the table.

    Returns:
        The table (``dataset`` names the scope); the interval columns NaN and ``n_boot`` 0
        where there were too few cases to resample.
    """
    records = []
    for scope in scopes:
        for i, label in enumerate(scope.configs):
            record = {
                "dataset": scope.scope,
                "configuration": label,
                **dict(zip(config, scope.identities[i] if scope.identities else ())),
                "score": float(scope.scores[i]) if scope.scores.size else float("nan"),
                "rank": int(scope.observed[i]),
                "median_rank": float("nan"),
                "rank_low": float("nan"),
                "rank_high": float("nan"),
                "rank1_share": float("nan"),
                "n_cases": scope.n_cases,
                "n_boot": 0,
            }
            if scope.resampled is not None:
                ranks = scope.resampled[i]
                low, high = np.quantile(ranks, [0.025, 0.975])
                record.update(
                    median_rank=float(np.median(ranks)),
                    rank_low=float(low),
                    rank_high=float(high),
                    rank1_share=float(np.mean(ranks == 1)),
                    n_boot=int(ranks.size),
                )
            records.append(record)
    table = pd.DataFrame.from_records(records)
    if table.empty:
        return table
    order = {s.scope: i for i, s in enumerate(scopes)}
    table["_scope"] = table["dataset"].map(order)
    return (
        table.sort_values(["_scope", "rank", "configuration"], kind="stable")
        .drop(columns="_scope")
        .reset_index(drop=True)
    )
