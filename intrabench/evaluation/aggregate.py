"""Aggregation of result rows, as the paper does (Maier-Hein et al., "Metrics reloaded").

target -> case (mean over the case's targets of one class) -> dataset class (mean over cases)
-> dataset (mean over classes). A pure function of the rows: re-aggregating never re-runs.

:func:`dataset_statistics` adds the spread over cases (median, standard deviation, quartiles)
and a percentile-bootstrap confidence interval that resamples cases (seeded, deterministic).
It works on step rows (``results.parquet``) and on episode rows
(:func:`intrabench.evaluation.episode_metrics.episode_table`) alike: pass the configuration columns.

Missing values (NaN: HD95 of an empty prediction, which has no surface) are left out of every
mean, which flatters the average: the statistics count them (``n_missing``) and every function
that averages takes ``missing_value``, a documented penalty substituted for them before
aggregating (e.g. the largest distance possible in the images, in mm, for HD95).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

#: Columns that identify one configuration (a table row before the dataset columns).
CONFIG_COLUMNS = ["model", "prompter", "refiner", "seed", "step"]


#: fewest cases for a bootstrap interval (2 cases: the "interval" is their range)
MIN_CASES_INTERVAL = 5
#: what a table says where a number needs more cases
TOO_FEW = "n too small"


def fill_missing(rows: pd.DataFrame, metric: str, missing_value: float | None) -> pd.DataFrame:
    """``rows`` with NaN values of ``metric`` replaced by ``missing_value`` (None: unchanged).

    Args:
        rows: Result rows (one per target and step, or per episode).
        metric: The metric column (e.g. ``"hd95"``).
        missing_value: The penalty substituted for NaN, in the metric's unit (e.g. mm for
            HD95); None leaves NaN as it is.

    Returns:
        ``rows`` itself when nothing is replaced, else a copy with the column as float.
    """
    if missing_value is None or metric not in rows or not rows[metric].isna().any():
        return rows
    return rows.assign(**{metric: rows[metric].astype(float).fillna(float(missing_value))})


def count_targets(rows: pd.DataFrame) -> int:
    """Distinct targets among ``rows`` (a target repeated over seeds, steps or configurations
    counts once); the row count when the rows carry no target identity.

    Args:
        rows: Result rows, with ``dataset``, ``case`` and ``target`` columns where known.

    Returns:
        The number of distinct (dataset, case, target) triples, or ``len(rows)``.
    """
    keys = [k for k in ("dataset", "case", "target") if k in rows]
    if "target" not in keys:
        return int(len(rows))
    return int(len(rows[keys].drop_duplicates()))


def per_case(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Mean of ``metric`` over the targets of each (configuration, dataset, case, class).

    Args:
        rows: Result rows with :data:`CONFIG_COLUMNS`, ``dataset``, ``case``, ``target_class``
            and the metric's column.
        metric: The metric column (e.g. ``"dice"``, 0-1).

    Returns:
        One row per (configuration, dataset, case, class), the mean in the metric's column.
    """
    keys = CONFIG_COLUMNS + ["dataset", "case", "target_class"]
    return rows.groupby(keys, sort=True, dropna=False)[metric].mean().reset_index()


def per_dataset(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """Dataset score per configuration: mean over classes of (mean over cases of case means).

    Seeds are averaged last (each seed is a full repetition of the benchmark).

    Args:
        rows: Result rows, as for :func:`per_case`.
        metric: The metric column (e.g. ``"dice"``, 0-1).

    Returns:
        One row per (model, prompter, refiner, step, dataset), the score in the metric's column.
    """
    cases = per_case(rows, metric)
    classes = (
        cases.groupby(CONFIG_COLUMNS + ["dataset", "target_class"], dropna=False)[metric]
        .mean()
        .reset_index()
    )
    datasets = (
        classes.groupby(CONFIG_COLUMNS + ["dataset"], dropna=False)[metric].mean().reset_index()
    )
    keys = [c for c in CONFIG_COLUMNS if c != "seed"] + ["dataset"]
    return datasets.groupby(keys, dropna=False)[metric].mean().reset_index()


def dataset_means(episodes: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Each of ``columns`` (per-target values: one row per target and configuration) averaged
    as :func:`per_dataset` does, per model x prompter x refiner and dataset, plus a row per
    configuration with ``dataset = "Average"`` (the mean over datasets). Long format: model,
    prompter, refiner, dataset, then ``columns``.

    Args:
        episodes: Per-target rows (e.g. :func:`~intrabench.evaluation.episode_metrics.episode_table`),
            with model, prompter, refiner, seed, dataset, case and target_class.
        columns: The value columns to average (e.g. ``["dice_final", "dice_auc_norm"]``).

    Returns:
        The long table, sorted by model, prompter, refiner and dataset (empty, with those
        columns, when ``episodes`` is).
    """
    columns = list(columns)
    if episodes.empty:
        return pd.DataFrame(columns=["model", "prompter", "refiner", "dataset", *columns])
    frame = episodes.assign(step=0)
    merged = None
    for column in columns:
        part = per_dataset(frame, column)
        merged = (
            part
            if merged is None
            else merged.merge(
                part, on=["model", "prompter", "refiner", "step", "dataset"], how="outer"
            )
        )
    assert merged is not None
    average = (
        merged.groupby(["model", "prompter", "refiner", "step"], dropna=False)[columns]
        .mean()
        .reset_index()
        .assign(dataset="Average")
    )
    out = pd.concat([merged, average], ignore_index=True).drop(columns="step")
    return out.sort_values(
        ["model", "prompter", "refiner", "dataset"], kind="stable", ignore_index=True
    )


def effort_per_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean cumulative effort per target, and the paper-style label, per configuration.

    Args:
        rows: Rows with the configuration columns, ``cumulative_effort`` and ``effort_label``.

    Returns:
        One row per configuration (seeds pooled): ``mean_effort`` and ``effort_label``.
    """
    keys = [c for c in CONFIG_COLUMNS if c != "seed"]
    grouped = rows.groupby(keys, dropna=False)
    return pd.DataFrame(
        {
            "mean_effort": grouped["cumulative_effort"].mean(),
            "effort_label": grouped["effort_label"].first(),
        }
    ).reset_index()


def summary_table(
    rows: pd.DataFrame,
    metric: str = "dice",
    steps: str = "final",
    scale: float = 100.0,
    missing_value: float | None = None,
) -> pd.DataFrame:
    """One row per (model, prompter, refiner, step), one column per dataset, plus Average.

    Args:
        rows: Result rows, one per (dataset, case, target, model, prompter, refiner, seed,
            step).
        metric: The metric column to aggregate.
        steps: "final" keeps step 0 and each episode's last step; "all" keeps every step.
        scale: Factor applied to the scores (100: Dice x100 as in the paper's tables).
        missing_value: Value that replaces a missing (NaN) ``metric``; None leaves it out.

    Returns:
        The table. When some values of ``metric`` are missing and no ``missing_value`` is
        given, a ``missing`` column counts the rows left out of each table row's means.
    """
    if rows.empty:
        return pd.DataFrame()
    missing = missing_counts(rows, metric, ["model", "prompter", "refiner", "step"])
    rows = fill_missing(rows, metric, missing_value)
    if steps == "final":
        last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
        rows = rows[(rows["step"] == 0) | (rows["step"] == last)]
    scores = per_dataset(rows, metric)
    wide = (
        scores.pivot_table(
            index=["model", "prompter", "refiner", "step"],
            columns="dataset",
            values=metric,
            sort=True,
        )
        * scale
    )
    datasets = list(wide.columns)
    wide["Average"] = wide.mean(axis=1)
    covered = average_over(wide[datasets])
    if covered is not None:
        wide["Average over"] = covered
    effort = effort_per_configuration(rows).set_index(["model", "prompter", "refiner", "step"])
    wide.insert(0, "effort", effort["effort_label"].reindex(wide.index))
    wide.insert(1, "mean interactions", effort["mean_effort"].reindex(wide.index).round(1))
    if missing.any() and missing_value is None:
        wide["missing"] = missing.reindex(wide.index).fillna(0).astype(int)
    wide.columns.name = None
    return wide.reset_index()


def average_over(scores: pd.DataFrame) -> list[str] | None:
    """Per table row, the dataset columns its ``Average`` covers, when the rows do not all cover
    the same ones (a model run on some datasets only); None when they do.

    Args:
        scores: A table of scores, one column per dataset, NaN where a row has none.

    Returns:
        Per row, its covered columns joined by ", "; None when every row covers the same.
    """
    present = scores.notna()
    if present.empty or (present.eq(present.iloc[0], axis=1)).all().all():
        return None
    return [
        ", ".join(str(c) for c, there in zip(scores.columns, row) if there)
        for row in present.to_numpy()
    ]


def missing_counts(rows: pd.DataFrame, metric: str, keys: list[str]) -> pd.Series:
    """Rows whose ``metric`` is missing (NaN), per group of ``keys`` (0 where none is).

    Args:
        rows: Result rows.
        metric: The metric column.
        keys: The columns to group by (e.g. the configuration and ``dataset``).

    Returns:
        Int counts indexed by the groups of ``keys``.
    """
    return rows[metric].isna().groupby([rows[k] for k in keys]).sum().astype(int)


def merge_datasets(rows: pd.DataFrame, groups: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Rows with several datasets scored as one (e.g. the paper's D8 = HCC-TACE liver + lesion).

    ``groups`` maps a new dataset name to the dataset keys it merges; their classes become
    ``<dataset>/<class>`` so that the merged dataset's score is the mean over all their classes.

    Args:
        rows: Result rows with ``dataset`` and ``target_class``.
        groups: New dataset name to the dataset names it merges.

    Returns:
        A copy of ``rows`` with the merged datasets renamed and their classes prefixed.
    """
    rows = rows.copy()
    for new, members in groups.items():
        chosen = rows["dataset"].isin(list(members))
        rows.loc[chosen, "target_class"] = (
            rows.loc[chosen, "dataset"].astype(str)
            + "/"
            + rows.loc[chosen, "target_class"].astype(str)
        )
        rows.loc[chosen, "dataset"] = new
    return rows


def case_class_matrix(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Cases x classes of one dataset and configuration: mean of ``metric`` over each case's
    targets of that class (and over seeds); NaN where a case has no target of a class.

    Args:
        rows: The rows of one dataset and configuration (``case``, ``target_class``, metric).
        metric: The metric column.

    Returns:
        Cases (index, sorted) x classes (columns, sorted) of means.
    """
    return rows.pivot_table(
        index="case", columns="target_class", values=metric, aggfunc="mean", dropna=False, sort=True
    )


def seed_case_class_matrices(
    rows: pd.DataFrame,
    metric: str,
    cases: Sequence[Any] | None = None,
    classes: Sequence[Any] | None = None,
    seeds: Sequence[Any] | None = None,
) -> np.ndarray:
    """(seeds, cases, classes): :func:`case_class_matrix` of each seed on the same case and
    class axes (NaN where a seed has no value), seeds in ascending order. Rows without a
    ``seed`` column are one seed. ``cases``, ``classes``, ``seeds``: the axes to use (default:
    those of ``rows``), so that two sets of rows can be put on the same axes.

    Args:
        rows: The rows of one dataset and configuration, with ``seed`` where there are seeds.
        metric: The metric column.
        cases: The case axis, in order; None: the rows' cases, sorted.
        classes: The class axis, in order; None: the rows' classes, sorted.
        seeds: The seed axis, in order; None: the rows' seeds, sorted.

    Returns:
        Float64 array (seeds, cases, classes).
    """
    cases = sorted(rows["case"].unique(), key=str) if cases is None else list(cases)
    classes = sorted(rows["target_class"].unique(), key=str) if classes is None else list(classes)
    if "seed" not in rows:
        parts = {0: rows}
    else:
        parts = dict(iter(rows.groupby("seed", sort=True, dropna=False)))
    seeds = sorted(parts, key=str) if seeds is None else list(seeds)
    empty = np.full((len(cases), len(classes)), np.nan)
    return np.stack(
        [
            case_class_matrix(parts[seed], metric)
            .reindex(index=cases, columns=classes)
            .to_numpy(dtype=np.float64)
            if seed in parts
            else empty
            for seed in seeds
        ]
    )


def dataset_score(matrix: np.ndarray) -> float:
    """The paper's dataset score of a cases x classes matrix, or of (seeds, cases, classes)
    matrices: per seed, the mean over classes of the mean over cases; then the mean over
    seeds (each seed is a repetition of the benchmark: :func:`per_dataset`'s order).

    Args:
        matrix: Cases x classes, or (seeds, cases, classes), of case means; NaN where absent.

    Returns:
        The score in the metric's unit; NaN when there is no value.
    """
    import warnings

    matrices = matrix if matrix.ndim == 3 else matrix[None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(np.nanmean(np.nanmean(matrices, axis=1), axis=1)))


def case_scores(matrices: np.ndarray) -> np.ndarray:
    """Each case's score, (seeds, cases, classes) -> (cases,): per seed the mean over its
    classes, then the mean over seeds (NaN for a case without any value).

    Args:
        matrices: (seeds, cases, classes) of case means, NaN where absent.

    Returns:
        Float64 (cases,).
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.nanmean(matrices, axis=2), axis=0)


def _case_scores(matrices: np.ndarray) -> np.ndarray:
    """:func:`case_scores` without the cases that have no value."""
    scores = case_scores(matrices)
    return scores[np.isfinite(scores)]


def bootstrap_replicates(matrix: np.ndarray, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Dataset scores of ``n_boot`` resamples of the cases (rows) drawn with replacement.

    ``matrix``: cases x classes of case means (NaN = class absent in that case), or (seeds,
    cases, classes): the same cases are drawn for every seed. A resample's score is, per seed,
    the mean over classes of each class's mean over the drawn cases, then the mean over seeds. Deterministic for a
    given ``seed``; the same seed and number of cases give the same draws, so two configurations
    on the same cases (or a matrix of paired differences) are resampled pairwise.

    Args:
        matrix: Cases x classes or (seeds, cases, classes), as above.
        n_boot: The number of resamples.
        seed: The seed of the resampling generator.

    Returns:
        Float64 (n_boot,) of resampled dataset scores (all NaN when there is no case).
    """
    import warnings

    matrices = matrix if matrix.ndim == 3 else matrix[None]  # (seeds, cases, classes)
    n_seeds, n_cases, n_classes = matrices.shape
    if n_cases == 0:
        return np.full(n_boot, np.nan)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n_cases, size=(n_boot, n_cases))
    scores = np.empty(n_boot)
    chunk = max(1, 2_000_000 // max(1, n_seeds * n_cases * n_classes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for start in range(0, n_boot, chunk):
            drawn = matrices[:, indices[start : start + chunk]]  # (seeds, b, n_cases, n_classes)
            per_seed = np.nanmean(np.nanmean(drawn, axis=2), axis=2)  # (seeds, b)
            scores[start : start + chunk] = np.nanmean(per_seed, axis=0)
    return scores


def bootstrap_ci(
    matrix: np.ndarray, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the dataset score (see :func:`bootstrap_replicates`).

    Args:
        matrix: Cases x classes of case means (NaN: class absent), or (seeds, cases, classes).
        n_boot: The number of resamples of the cases.
        confidence: The interval's coverage (0.95: the 2.5th and 97.5th percentiles).
        seed: The resamples' seed.

    Returns:
        (low, high), in the matrix's scale.
    """
    scores = bootstrap_replicates(matrix, n_boot=n_boot, seed=seed)
    if not np.isfinite(scores).any():
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.nanquantile(scores, [alpha, 1.0 - alpha])
    return float(low), float(high)


def dataset_statistics(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = ("model", "prompter", "refiner", "step"),
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    missing_value: float | None = None,
) -> pd.DataFrame:
    """Per (configuration, dataset): the paper's score and its spread over cases.

    Columns: ``mean`` (mean over classes of the mean over cases of case means: the paper's
    number), ``median``, ``std``, ``q1``, ``q3`` (over per-case scores, a case's score being the
    mean over its classes), ``ci_low``/``ci_high`` (bootstrap over cases, see
    :func:`bootstrap_ci`; NaN below :data:`~intrabench.evaluation.paired.MIN_CASES_INTERVAL`
    cases, ``ci_note`` then saying "n too small (at least 5 cases)"), ``n_cases``, ``n_targets`` (distinct targets: a target scored
    with two seeds counts once), ``n_values`` (the target x seed values averaged) and
    ``n_missing`` (values that were NaN, e.g. HD95 of an empty prediction: left out of every
    mean, or replaced by ``missing_value`` when one is given, then counted in ``n_values`` too).
    Seeds are averaged last, as in :func:`per_dataset` and so in every table: ``mean`` is the
    table's number, missing values included (a case's score is the mean over seeds of its
    per-seed score; the bootstrap draws the same cases for every seed).

    Args:
        rows: Step or episode rows with ``dataset``, ``case``, ``target_class``, the metric
            and the configuration columns.
        metric: The metric column (e.g. ``"dice"``, 0-1; ``"hd95"``, mm).
        config: The configuration columns to group by; those absent from ``rows`` are left
            out.
        n_boot: Bootstrap resamples for the interval.
        confidence: The interval's coverage, in (0, 1).
        seed: The bootstrap's seed.
        missing_value: The penalty for NaN values (see :func:`fill_missing`); None leaves them
            out.

    Returns:
        One row per (configuration, dataset), with the columns above.
    """
    config = [c for c in config if c in rows]
    records = []
    for identity, group in rows.groupby(config + ["dataset"], sort=True, dropna=False):
        n_missing = int(group[metric].isna().sum())
        group = fill_missing(group, metric, missing_value)
        matrix = seed_case_class_matrices(group, metric)
        per_case_scores = _case_scores(matrix)
        # a bootstrap over 2 cases is the range of the two values, without a word: below
        # MIN_CASES_INTERVAL cases no interval (NaN; ``ci_note`` says "n too small")
        enough = per_case_scores.size >= MIN_CASES_INTERVAL
        low, high = (
            bootstrap_ci(matrix, n_boot=n_boot, confidence=confidence, seed=seed)
            if enough
            else (float("nan"), float("nan"))
        )
        record = dict(zip(config + ["dataset"], identity))
        record.update(
            {
                "metric": metric,
                "mean": dataset_score(matrix),
                "median": float(np.median(per_case_scores))
                if per_case_scores.size
                else float("nan"),
                "std": float(np.std(per_case_scores, ddof=1))
                if per_case_scores.size > 1
                else float("nan"),
                "q1": float(np.quantile(per_case_scores, 0.25))
                if per_case_scores.size
                else float("nan"),
                "q3": float(np.quantile(per_case_scores, 0.75))
                if per_case_scores.size
                else float("nan"),
                "ci_low": low,
                "ci_high": high,
                "ci_note": "" if enough else f"{TOO_FEW} (at least {MIN_CASES_INTERVAL} cases)",
                "n_cases": int(matrix.shape[1]),
                "n_targets": count_targets(group),
                "n_values": int(group[metric].notna().sum()),
                "n_missing": n_missing,
            }
        )
        records.append(record)
    return pd.DataFrame.from_records(records)


def per_case_table(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = ("model", "prompter", "refiner", "step"),
) -> pd.DataFrame:
    """One row per (configuration, dataset, case): the case score (per seed, the mean over its
    classes of the mean over that class's targets; then the mean over seeds: the definition
    every aggregate follows, see :func:`case_scores`), the number of targets and the case's
    classes.

    Args:
        rows: Result rows with ``dataset``, ``case``, ``target``, ``target_class`` and the
            metric.
        metric: The metric column; it names the score column of the table too.
        config: The configuration columns to group by (``seed`` is always averaged over).

    Returns:
        Columns: the configuration, ``dataset``, ``case``, the metric, ``targets`` and
        ``classes`` (sorted, joined by ", ").
    """
    config = [c for c in config if c in rows and c != "seed"]
    records = []
    for identity, group in rows.groupby(config + ["dataset"], sort=True, dropna=False):
        identity = identity if isinstance(identity, tuple) else (identity,)
        cases = sorted(group["case"].unique(), key=str)
        scores = case_scores(seed_case_class_matrices(group, metric, cases=cases))
        by_case = group.groupby("case", sort=False)
        targets = by_case["target"].nunique()
        classes = by_case["target_class"].agg(lambda c: ", ".join(sorted(set(map(str, c)))))
        for case, score in zip(cases, scores):
            records.append(
                {
                    **dict(zip(config + ["dataset"], identity)),
                    "case": case,
                    metric: float(score),
                    "targets": int(targets[case]),
                    "classes": classes[case],
                }
            )
    columns = config + ["dataset", "case", metric, "targets", "classes"]
    return pd.DataFrame.from_records(records, columns=columns)


def to_markdown(table: pd.DataFrame, digits: int = 2) -> str:
    """A GitHub Markdown table (no extra dependency); names with hidden characters (a
    right-to-left override, an escape sequence) shown escaped (``\u202e``).

    Args:
        table: The table to render; float cells are formatted, NaN left blank.
        digits: Decimals of float cells.

    Returns:
        The Markdown text (no final newline), or "(no results)" for an empty table.
    """
    from intrabench.display_text import escaped

    if table.empty:
        return "(no results)"
    header = [escaped(c) for c in table.columns]
    lines = [
        "| " + " | ".join(header) + " |",
        "|"
        + "|".join(
            "---:" if pd.api.types.is_numeric_dtype(table[c]) else "---" for c in table.columns
        )
        + "|",
    ]
    for _, row in table.iterrows():
        cells = []
        for value in row:
            if isinstance(value, float):
                cells.append("" if value != value else f"{value:.{digits}f}")
            else:
                cells.append(escaped(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
