"""Paired comparisons of configurations scored on the same targets.

A *configuration* is one value of the ``config`` columns (model, prompter, refiner; a run or a
source column too when runs are compared). Two configurations are compared on what both scored:
per dataset, the (seed, case, class) cells of the tables' hierarchy (a cell is the mean over the
case's targets of that class) that both have, on the targets both scored.

For a pair (A, B) and one *scope* (a dataset, or ``Overall``: the datasets both were scored on):

* ``B - A``: the dataset score of the cell-wise differences (per seed, the mean over classes of
  the mean over cases; then the mean over seeds: :func:`~intrabench.evaluation.aggregate.
  dataset_score`'s order, so with the same targets it is the tables' B minus the tables' A);
  ``Overall``: the mean over the shared datasets, as the tables' ``Average``.
* its percentile-bootstrap interval: the cases of each dataset resampled with replacement
  (the targets stay nested in their case), the same draws for every pair of a dataset (paired),
  ``Overall`` the mean over datasets of each resample's dataset differences (a stratified
  bootstrap). Vectorised: a resample is a vector of case counts, so every pair's resampled
  class means are one matrix product.
* the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, two-sided, zero differences dropped)
  on the case differences (a case's score: the mean over its classes, then over seeds), pooled
  over the shared datasets for ``Overall``; Holm's correction (``statsmodels``' ``multipletests``)
  over the pairs of one scope.
* the effect size: the matched-pairs rank-biserial correlation ``r = (R+ - R-) / (R+ + R-)``
  (the signed-rank sums of the non-zero case differences; +1: B better on every case), from as
  many cases as the test.

Too few cases give no number (NaN, written "n too small"): an interval needs
:data:`MIN_CASES_INTERVAL` cases, a test :data:`MIN_CASES_TEST` non-zero case differences (with
fewer, the exact two-sided p-value cannot fall below 0.05: 2 / 2**5 = 0.0625).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from intrabench.evaluation.aggregate import (  # noqa: F401 - the minimums are re-exported
    MIN_CASES_INTERVAL,
    TOO_FEW,
    case_scores,
    dataset_score,
    seed_case_class_matrices,
)

#: configuration columns of one run's rows
CONFIG = ("model", "prompter", "refiner")
#: fewest non-zero case differences for a signed-rank test (6: the smallest exact p is 0.031)
MIN_CASES_TEST = 6
#: the scope of the mean over datasets
OVERALL = "Overall"


def final_step_rows(rows: pd.DataFrame, config: Sequence[str] = CONFIG) -> pd.DataFrame:
    """Each episode's last step (an episode: dataset, case, target, configuration, seed).

    Args:
        rows: Step rows (``results.parquet``) with a ``step`` column.
        config: The configuration columns that tell episodes apart.

    Returns:
        The rows at each episode's largest ``step``, in their original order.
    """
    keys = [c for c in ("dataset", "case", "target", *config, "seed") if c in rows]
    last = rows.groupby(keys, dropna=False)["step"].transform("max")
    return rows[rows["step"] == last]


def config_label(config: tuple) -> str:
    """A configuration's name in tables and figures: its values joined by `` / `` (never
    ``|``: it would split a Markdown cell).

    Args:
        config: The configuration's values (e.g. (model, prompter, refiner)).

    Returns:
        The values as text, joined by `` / `` (model / prompter / refiner).
    """
    return " / ".join(str(v) for v in config)


@dataclass
class DatasetCells:
    """One dataset's cells of every configuration on shared axes.

    ``values``: (configurations, seeds, cases, classes), NaN where a configuration has no cell;
    ``targets``: per configuration, the frozenset of (seed, case, target) it scored.
    """

    dataset: str
    configs: list[tuple]
    cases: list
    values: np.ndarray
    targets: list[frozenset]


def dataset_cells(rows: pd.DataFrame, metric: str, config: Sequence[str]) -> list[DatasetCells]:
    """:class:`DatasetCells` of each dataset of ``rows`` (final-step rows), datasets sorted.

    Args:
        rows: Final-step rows with ``dataset``, ``case``, ``target``, ``target_class``,
            optionally ``seed``, the metric and the configuration columns.
        metric: The metric column (e.g. ``"dice"``, 0-1).
        config: The configuration columns.

    Returns:
        One :class:`DatasetCells` per dataset, in sorted order.
    """
    config = list(config)
    out = []
    for dataset, part in rows.groupby("dataset", sort=True):
        cases = sorted(part["case"].unique(), key=str)
        classes = sorted(part["target_class"].unique(), key=str)
        seeds = sorted(part["seed"].unique(), key=str) if "seed" in part else None
        configs, values, targets = [], [], []
        for identity, group in part.groupby(config, sort=True, dropna=False):
            identity = identity if isinstance(identity, tuple) else (identity,)
            configs.append(identity)
            values.append(seed_case_class_matrices(group, metric, cases, classes, seeds))
            keys = zip(
                group["seed"] if "seed" in group else [0] * len(group),
                group["case"],
                group["target"],
                group[metric].notna(),
            )
            targets.append(frozenset((s, c, t) for s, c, t, ok in keys if ok))
        out.append(DatasetCells(str(dataset), configs, cases, np.stack(values), targets))
    return out


def _restricted(
    rows: pd.DataFrame, metric: str, config: Sequence[str], cells: DatasetCells, a: int, b: int
) -> tuple[np.ndarray, np.ndarray]:
    """The cells of configurations ``a`` and ``b`` recomputed on the targets both scored
    (an incomplete run: one of them lacks targets the other has)."""
    shared = cells.targets[a] & cells.targets[b]
    part = rows[rows["dataset"].astype(str) == cells.dataset]
    key = list(
        zip(part["seed"] if "seed" in part else [0] * len(part), part["case"], part["target"])
    )
    part = part[[k in shared for k in key]]
    classes = sorted(
        rows.loc[rows["dataset"].astype(str) == cells.dataset, "target_class"].unique(), key=str
    )
    seeds = sorted(part["seed"].unique(), key=str) if "seed" in part else None
    chosen = []
    for index in (a, b):
        mask = np.ones(len(part), bool)
        for column, value in zip(config, cells.configs[index]):
            mask &= (part[column] == value).to_numpy()
        chosen.append(seed_case_class_matrices(part[mask], metric, cells.cases, classes, seeds))
    return chosen[0], chosen[1]


def case_weights(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_cases): how often each case is drawn in each resample (cases drawn with
    replacement; the draws of :func:`~intrabench.evaluation.aggregate.bootstrap_replicates`
    for the same ``seed``, so the two agree).

    Args:
        n_cases: The number of cases.
        n_boot: The number of resamples.
        seed: The resampling generator's seed.

    Returns:
        Float64 (n_boot, n_cases) draw counts; each row sums to ``n_cases``.
    """
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n_cases, size=(n_boot, n_cases))
    weights = np.zeros((n_boot, n_cases))
    np.add.at(weights, (np.repeat(np.arange(n_boot), n_cases), indices.ravel()), 1.0)
    return weights


def resampled_scores(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Dataset scores of resamples of the cases, for many matrices at once.

    ``values``: (M, seeds, cases, classes) NaN where absent; ``weights``: (n_boot, cases) from
    :func:`case_weights`. Returns (M, n_boot): per resample and seed, the mean over classes of
    each class's weighted mean over cases, then the mean over seeds (NaN-aware as the tables).

    Args:
        values: (M, seeds, cases, classes) case means, NaN where absent.
        weights: (n_boot, cases) draw counts from :func:`case_weights`.

    Returns:
        Float64 (M, n_boot) resampled dataset scores.
    """
    m, s, n, k = values.shape
    present = np.isfinite(values)
    flat = np.moveaxis(np.where(present, values, 0.0), 2, 0).reshape(n, m * s * k)
    count = np.moveaxis(present.astype(np.float64), 2, 0).reshape(n, m * s * k)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        class_means = (weights @ flat) / (weights @ count)  # (n_boot, m * s * k)
        class_means = class_means.reshape(-1, m, s, k)
        per_seed = np.nanmean(class_means, axis=3)
        return np.nanmean(per_seed, axis=2).T


def rank_biserial(differences: np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation of paired differences: (R+ - R-) / (R+ + R-)
    over the non-zero ones (ranks of their absolute values, ties averaged); NaN with fewer
    than :data:`MIN_CASES_TEST` non-zero ones (as the test it goes with).

    Args:
        differences: Per-case differences (B - A); NaN ones are dropped.

    Returns:
        The correlation in [-1, 1] (positive: B better), or NaN.
    """
    from scipy.stats import rankdata

    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d) & (d != 0)]
    if d.size < MIN_CASES_TEST:
        return float("nan")
    ranks = rankdata(np.abs(d))
    return float((ranks[d > 0].sum() - ranks[d < 0].sum()) / ranks.sum())


def signed_rank_p(differences: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired differences (``scipy.stats.wilcoxon``,
    zero differences dropped); NaN with fewer than :data:`MIN_CASES_TEST` non-zero ones.

    Args:
        differences: Per-case differences (B - A); NaN ones are dropped.

    Returns:
        The p-value in [0, 1], or NaN.
    """
    from scipy.stats import wilcoxon

    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    if np.count_nonzero(d) < MIN_CASES_TEST:
        return float("nan")
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (``statsmodels.stats.multitest.multipletests``, method holm) of
    the finite ones; NaN stays NaN.

    Args:
        p_values: Raw p-values of one family of tests, NaN for tests not made.

    Returns:
        Float64 adjusted p-values, in the input's order and shape.
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        adjusted[finite] = multipletests(p[finite], method="holm")[1]
    return adjusted


def _interval(draws: np.ndarray, n_cases: int, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    if n_cases < MIN_CASES_INTERVAL or not np.isfinite(draws).any():
        return float("nan"), float("nan")
    low, high = np.nanquantile(draws, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _pairs_of(
    configs: list[tuple], pairs: Sequence[tuple[tuple, tuple]] | None
) -> list[tuple[tuple, tuple]]:
    if pairs is not None:
        return [(tuple(a), tuple(b)) for a, b in pairs]
    ordered = sorted(configs, key=lambda c: tuple(map(str, c)))
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]


def _pair_cells(
    rows: pd.DataFrame,
    metric: str,
    config: list[str],
    pairs: Sequence[tuple[tuple, tuple]] | None,
    n_boot: int,
    seed: int,
):
    """Per dataset (sorted; dataset ``i`` resampled with seed ``seed + i``), per pair present
    there: (dataset cells, A, B, A's cells, B's cells on the cells both have, the resampled
    dataset differences (n_boot,))."""
    for number, cells in enumerate(dataset_cells(rows, metric, config)):
        index = {c: i for i, c in enumerate(cells.configs)}
        chosen = [(a, b) for a, b in _pairs_of(cells.configs, pairs) if a in index and b in index]
        if not chosen:
            continue
        sides = []
        for a, b in chosen:
            i, j = index[a], index[b]
            if cells.targets[i] == cells.targets[j]:
                va, vb = cells.values[i], cells.values[j]
            else:
                va, vb = _restricted(rows, metric, config, cells, i, j)
            both = np.isfinite(va) & np.isfinite(vb)
            sides.append((np.where(both, va, np.nan), np.where(both, vb, np.nan)))
        weights = case_weights(len(cells.cases), n_boot, seed + number)
        draws = resampled_scores(np.stack([vb - va for va, vb in sides]), weights)
        for (a, b), (va, vb), pair_draws in zip(chosen, sides, draws):
            yield cells, a, b, va, vb, pair_draws


def paired_comparisons(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = CONFIG,
    pairs: Sequence[tuple[tuple, tuple]] | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    final: bool = True,
) -> pd.DataFrame:
    """Every pair of configurations (or the ``pairs`` given, each (A, B)) per dataset and
    ``Overall``; see the module's docstring. ``rows``: result rows (``final``: keep each
    episode's last step first). Values in the metric's own scale (0-1 for Dice). Dataset ``i``
    (in sorted order) is resampled with seed ``seed + i``.

    Columns: ``A``, ``B`` (configuration labels), ``dataset``, ``score_A``, ``score_B``,
    ``difference`` (B - A), ``ci_low``, ``ci_high``, ``n_cases``, ``b_better`` (cases where B's
    score is higher), ``p``, ``p_holm``, ``rank_biserial``, plus each config column's value
    for A and B (``A_model``, ``B_model``, ...).

    Args:
        rows: Step rows (or final-step rows with ``final=False``).
        metric: The metric column (e.g. ``"dice"``, 0-1).
        config: The configuration columns; those absent from ``rows`` are left out.
        pairs: The (A, B) configurations to compare, each a tuple of ``config``'s values;
            None: every pair.
        n_boot: Bootstrap resamples for the interval of the difference.
        confidence: The interval's coverage, in (0, 1).
        seed: The bootstrap's base seed.
        final: Keep only each episode's last step first.

    Returns:
        One row per pair and dataset, plus the ``Overall`` rows, with the columns above.
    """
    config = [c for c in config if c in rows]
    rows = final_step_rows(rows, config) if final else rows
    records: list[dict] = []
    overall: dict[tuple, list] = {}
    for cells, a, b, va, vb, draws in _pair_cells(rows, metric, config, pairs, n_boot, seed):
        difference = vb - va
        case_diff = case_scores(difference)
        case_diff = case_diff[np.isfinite(case_diff)]
        if case_diff.size == 0:
            continue
        low, high = _interval(draws, case_diff.size, confidence)
        record = _record(
            a,
            b,
            config,
            cells.dataset,
            dataset_score(va),
            dataset_score(vb),
            dataset_score(difference),
            low,
            high,
            case_diff,
        )
        records.append(record)
        overall.setdefault((a, b), []).append((record, draws, case_diff))
    for (a, b), parts in overall.items():
        if len(parts) < 2:
            continue
        draws = np.mean(np.stack([p[1] for p in parts]), axis=0)
        case_diff = np.concatenate([p[2] for p in parts])
        low, high = _interval(draws, case_diff.size, confidence)
        means = [
            float(np.mean([p[0][k] for p in parts])) for k in ("score_A", "score_B", "difference")
        ]
        records.append(_record(a, b, config, OVERALL, *means, low, high, case_diff))
    table = pd.DataFrame.from_records(records, columns=_columns(config))
    for _, scope in table.groupby("dataset", sort=False):
        table.loc[scope.index, "p_holm"] = holm(scope["p"].to_numpy())
    return table


def paired_cases(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = CONFIG,
    pairs: Sequence[tuple[tuple, tuple]] | None = None,
    final: bool = True,
) -> pd.DataFrame:
    """Per pair, dataset and case the two case scores and their difference (``A``, ``B``,
    ``dataset``, ``case``, ``score_A``, ``score_B``, ``difference``): what the signed-rank
    test of :func:`paired_comparisons` ranks.

    Args:
        rows: Step rows (or final-step rows with ``final=False``).
        metric: The metric column (e.g. ``"dice"``, 0-1).
        config: The configuration columns; those absent from ``rows`` are left out.
        pairs: The (A, B) configurations to compare; None: every pair.
        final: Keep only each episode's last step first.

    Returns:
        One row per pair, dataset and case with a finite difference.
    """
    config = [c for c in config if c in rows]
    rows = final_step_rows(rows, config) if final else rows
    records = []
    for cells, a, b, va, vb, _ in _pair_cells(rows, metric, config, pairs, 1, 0):
        for case, sa, sb, d in zip(
            cells.cases, case_scores(va), case_scores(vb), case_scores(vb - va)
        ):
            if np.isfinite(d):
                records.append(
                    {
                        "A": config_label(a),
                        "B": config_label(b),
                        "dataset": cells.dataset,
                        "case": case,
                        "score_A": float(sa),
                        "score_B": float(sb),
                        "difference": float(d),
                    }
                )
    return pd.DataFrame.from_records(
        records, columns=["A", "B", "dataset", "case", "score_A", "score_B", "difference"]
    )


def _columns(config: Sequence[str]) -> list[str]:
    return (
        [
            "A",
            "B",
            "dataset",
            "score_A",
            "score_B",
            "difference",
            "ci_low",
            "ci_high",
            "n_cases",
            "b_better",
            "p",
            "p_holm",
            "rank_biserial",
        ]
        + [f"A_{c}" for c in config]
        + [f"B_{c}" for c in config]
    )


def _record(
    a: tuple,
    b: tuple,
    config: Sequence[str],
    dataset: str,
    score_a: float,
    score_b: float,
    difference: float,
    low: float,
    high: float,
    case_diff: np.ndarray,
) -> dict:
    return {
        "A": config_label(a),
        "B": config_label(b),
        "dataset": dataset,
        "score_A": score_a,
        "score_B": score_b,
        "difference": difference,
        "ci_low": low,
        "ci_high": high,
        "n_cases": int(case_diff.size),
        "b_better": int(np.sum(case_diff > 0)),
        "p": signed_rank_p(case_diff),
        "p_holm": float("nan"),
        "rank_biserial": rank_biserial(case_diff),
        **{f"A_{c}": v for c, v in zip(config, a)},
        **{f"B_{c}": v for c, v in zip(config, b)},
    }
