"""Results by target attribute: which targets are hard, and for which model.

The VizWiz-SalientObject analysis (its Table 3) for 3D targets. From the result rows (with their
``attr_*`` columns, see :mod:`intrabench.attributes.catalogue`):

1. **Targets.** One row per (dataset, case, target) with its attributes and, per configuration
   (model, prompter, refiner), its scores averaged over seeds: final Dice and NSD; with
   refinement also the normalised Dice AUC over the steps and the interactions to Dice 0.8
   (:mod:`intrabench.evaluation.episode_metrics`).
2. **Groups** (:func:`assign_groups`). A ``tertiles`` attribute splits each dataset's targets at
   its 1/3 and 2/3 quantiles (linear interpolation): ``low`` (value <= first cut), ``mid``,
   ``high`` (value > second cut). Values are rounded to 4 significant digits first (floating-point
   noise in a spacing forms no group); values tied at a cut go to the lower group; an attribute
   with fewer than :data:`MIN_TARGETS_TERTILES` (9: three per group) targets or fewer than three
   distinct values in a dataset gets no groups there (the cuts table's ``note`` says which). A
   ``presence`` attribute gives ``no``/``yes``. Groups are relative to each dataset; several
   datasets are then pooled.
3. **Means** (:func:`stratified_table`). Per configuration x attribute x group x metric: the mean
   over the group's targets, a percentile-bootstrap 95% CI resampling targets (seeded; only from
   :data:`MIN_TARGETS_INTERVAL` targets, the ``note`` says "n too small (at least 5 targets)"
   below), and the number of targets.
4. **Extremes** (:func:`extremes_table`). Per configuration x attribute: the mean of the last
   group minus the first (``high - low``, ``yes - no``) with a bootstrap CI (each group resampled
   on its own; both groups need :data:`MIN_TARGETS_INTERVAL` targets), and Spearman's rank
   correlation of final Dice with the attribute's value over all targets (SciPy), with its
   p-value, from :data:`MIN_PAIRS_CORRELATION` targets (fewer: NaN and a note).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from intrabench.attributes.catalogue import ATTRIBUTES, BY_NAME
from intrabench.evaluation.statistics import bootstrap_mean_ci, spearman

CONFIG = ["model", "prompter", "refiner"]
TARGET = ["dataset", "case", "target"]
TERTILE_GROUPS = ("low", "mid", "high")
PRESENCE_GROUPS = ("no", "yes")


def target_scores(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and target: the episode scores averaged over seeds, and the
    target's ``attr_*`` columns.

    Args:
        rows: Result rows (one per step) with ``attr_*`` columns where measured.

    Returns:
        One row per (model, prompter, refiner, dataset, case, target): the final scores
        (fractions, e.g. ``dice_final``), with refinement the refinement scores too, and the
        target's ``attr_*`` values.
    """
    from intrabench.evaluation.episode_metrics import episode_table
    from intrabench.evaluation.metric_registry import attribute_scores

    episodes = episode_table(rows)
    scores = list(attribute_scores().values())  # final values; then those of refinement
    metrics = [m for m in scores if m.endswith("_final") and m in episodes]
    if "n_steps" in episodes and (episodes["n_steps"] > 0).any():
        metrics += [m for m in scores if not m.endswith("_final") and m in episodes]
    scores = (
        episodes.groupby(CONFIG + TARGET, sort=True, dropna=False)[metrics].mean().reset_index()
    )
    attributes = [c for c in rows.columns if c.startswith("attr_")]
    if attributes:
        per_target = rows.groupby(TARGET, sort=False)[attributes].first().reset_index()
        scores = scores.merge(per_target, on=TARGET, how="left")
    return scores


#: a dataset's targets are cut into tertiles only from this many (three per group: a mean of
#: fewer than three targets says nothing about a third of a dataset); fewer: no groups
MIN_TARGETS_TERTILES = 9
#: fewest targets in a group for a bootstrap interval of its mean, and in each of the two
#: groups of a difference (the tables' fewest cases: with 2 the "interval" is their range)
MIN_TARGETS_INTERVAL = 5
#: fewest (value, score) pairs for Spearman's rho (as many as the tertiles need)
MIN_PAIRS_CORRELATION = MIN_TARGETS_TERTILES
#: values are rounded to this many significant digits before they are compared or cut, so that
#: floating-point noise (a spacing of 3.07062 vs 3.07063 mm) forms no groups
SIGNIFICANT_DIGITS = 4


def rounded(values: pd.Series) -> pd.Series:
    """The numeric ``values`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (NaN,
    inf and non-numbers as NaN/inf).

    Args:
        values: Attribute values (numbers, booleans or text).

    Returns:
        Float values on the same index.
    """
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    finite = np.isfinite(numbers)
    out = numbers.copy()
    out[finite] = [float(f"{v:.{SIGNIFICANT_DIGITS}g}") for v in numbers[finite]]
    return out


def tertile_cuts(values: pd.Series) -> tuple[float, float] | None:
    """The 1/3 and 2/3 quantiles of the finite ``values`` (:func:`rounded`); None with fewer
    than :data:`MIN_TARGETS_TERTILES` values or fewer than three distinct ones.

    Args:
        values: One dataset's values of one attribute, one per target.

    Returns:
        The (low, high) cuts in the attribute's unit, or None.
    """
    return tertile_cuts_and_note(values)[0]


def too_few_targets(minimum: int) -> str:
    """What a table says where a number needs ``minimum`` targets and has fewer.

    Args:
        minimum: The fewest targets the number needs.

    Returns:
        ``"n too small (at least <minimum> targets)"``.
    """
    return f"n too small (at least {minimum} targets)"


def tertile_cuts_and_note(values: pd.Series) -> tuple[tuple[float, float] | None, str]:
    """:func:`tertile_cuts` and, when None, why ("n too small (at least 9 targets)", ...).

    Args:
        values: One dataset's values of one attribute, one per target.

    Returns:
        The (low, high) cuts or None, and the reason for None (``""`` with cuts).
    """
    finite = rounded(values)
    finite = finite[np.isfinite(finite)]
    if len(finite) < MIN_TARGETS_TERTILES:
        return None, too_few_targets(MIN_TARGETS_TERTILES)
    if finite.nunique() < 3:
        return None, (f"fewer than 3 distinct values (at {SIGNIFICANT_DIGITS} significant digits)")
    low, high = np.quantile(finite.to_numpy(), [1.0 / 3.0, 2.0 / 3.0])
    return (float(low), float(high)), ""


def tertile_group(values: pd.Series, cuts: tuple[float, float] | None) -> pd.Series:
    """``low``/``mid``/``high`` per value (see the module docstring; values :func:`rounded`
    as the cuts were); missing stays missing.

    Args:
        values: Attribute values of one dataset's targets.
        cuts: The dataset's (low, high) cuts (:func:`tertile_cuts`); None: no groups.

    Returns:
        Object series on the same index: ``"low"``, ``"mid"``, ``"high"`` or NA (a missing
        value, or no cuts).
    """
    numbers = rounded(values)
    out = pd.Series(pd.NA, index=values.index, dtype="object")
    if cuts is None:
        return out
    finite = np.isfinite(numbers)
    out[finite & (numbers <= cuts[0])] = "low"
    out[finite & (numbers > cuts[0]) & (numbers <= cuts[1])] = "mid"
    out[finite & (numbers > cuts[1])] = "high"
    return out


def assign_groups(targets: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``targets`` with a ``group_<attribute>`` column per groupable attribute present, and a
    table of the cuts (dataset, attribute, cut_low, cut_high) used for the tertiles.

    Args:
        targets: :func:`target_scores`' output.

    Returns:
        A copy of ``targets`` with the ``group_*`` columns; and one row per dataset x tertile
        attribute: ``dataset``, ``attribute``, ``cut_low``, ``cut_high`` (NaN without groups)
        and ``note`` (why there are none).
    """
    targets = targets.copy()
    cuts_rows = []
    for spec in ATTRIBUTES:
        if spec.column not in targets or spec.grouping == "none":
            continue
        column = f"group_{spec.name}"
        if spec.grouping == "presence":
            present = targets[spec.column]
            targets[column] = present.map(
                lambda v: pd.NA if pd.isna(v) else ("yes" if bool(v) else "no")
            )
            continue
        targets[column] = pd.Series(pd.NA, index=targets.index, dtype="object")
        # cuts over each dataset's distinct targets, not over configurations x targets
        distinct = targets.drop_duplicates(TARGET)
        for dataset, members in distinct.groupby("dataset", sort=True):
            cuts, note = tertile_cuts_and_note(members[spec.column])
            chosen = targets["dataset"] == dataset
            targets.loc[chosen, column] = tertile_group(targets.loc[chosen, spec.column], cuts)
            cuts_rows.append(
                {
                    "dataset": dataset,
                    "attribute": spec.name,
                    "cut_low": cuts[0] if cuts else np.nan,
                    "cut_high": cuts[1] if cuts else np.nan,
                    "note": note,
                }
            )
    return targets, pd.DataFrame(
        cuts_rows, columns=["dataset", "attribute", "cut_low", "cut_high", "note"]
    )


def _metrics(targets: pd.DataFrame) -> list[str]:
    from intrabench.evaluation.metric_registry import attribute_scores

    return [m for m in attribute_scores().values() if m in targets]


def _group_columns(targets: pd.DataFrame) -> list[str]:
    return [c for c in targets.columns if c.startswith("group_")]


def _order(attribute: str) -> tuple[str, ...]:
    return PRESENCE_GROUPS if BY_NAME[attribute].grouping == "presence" else TERTILE_GROUPS


def collapse(targets: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One row per ``by`` x target: the scores averaged over the configurations that ``by``
    pools (e.g. ``by=["model"]``: over each model's prompters and refiners), the target's
    attributes and groups kept.

    Args:
        targets: :func:`assign_groups`' first output.
        by: Columns of the configuration kept apart (a subset of model, prompter, refiner).

    Returns:
        The targets per ``by``; ``targets`` itself when ``by`` is the whole configuration.
    """
    by = list(by)
    if by == CONFIG:
        return targets
    metrics = _metrics(targets)
    fixed = [c for c in targets.columns if c.startswith(("attr_", "group_"))]
    grouped = targets.groupby(by + TARGET, sort=True, dropna=False)
    return pd.concat([grouped[metrics].mean(), grouped[fixed].first()], axis=1).reset_index()


def _panels(
    targets: pd.DataFrame, by: list[str]
) -> Iterator[tuple[dict[str, Any], pd.DataFrame, str, str]]:
    """(identity of a ``by`` group, its targets, attribute, group column) for every grouped
    attribute, the targets first averaged per ``by`` (:func:`collapse`)."""
    for config, members in collapse(targets, by).groupby(by, sort=True):
        for column in _group_columns(members):
            yield dict(zip(by, config)), members, column.removeprefix("group_"), column


def _finite_values(members: pd.DataFrame, metric: str, chosen: pd.Series) -> np.ndarray:
    values = members.loc[chosen, metric].to_numpy(dtype=np.float64)
    return values[np.isfinite(values)]


def stratified_table(
    targets: pd.DataFrame, n_boot: int = 1000, seed: int = 0, by: Sequence[str] = CONFIG
) -> pd.DataFrame:
    """Mean, bootstrap CI and target count per ``by`` (default: configuration) x attribute x
    group x metric (``targets``: :func:`assign_groups`'s first output).

    Args:
        targets: :func:`assign_groups`' first output.
        n_boot: Bootstrap resamples of the group's targets.
        seed: The bootstrap's seed.
        by: The columns a row is per (default: model, prompter, refiner).

    Returns:
        The ``by`` columns, then ``attribute``, ``group``, ``metric``, ``mean``, ``ci_low``,
        ``ci_high`` (the scores' own scale, 0-1 for Dice), ``n_targets`` and ``note``.
    """
    by = list(by)
    records = []
    for identity, members, attribute, column in _panels(targets, by):
        for group in _order(attribute):
            for metric in _metrics(members):
                finite = _finite_values(members, metric, members[column] == group)
                # a bootstrap over 2 targets is their range: none below MIN_TARGETS_INTERVAL
                enough = finite.size >= MIN_TARGETS_INTERVAL
                low, high = (
                    bootstrap_mean_ci(finite, n_boot=n_boot, seed=seed)
                    if enough
                    else (np.nan, np.nan)
                )
                records.append(
                    {
                        **identity,
                        "attribute": attribute,
                        "group": group,
                        "metric": metric,
                        "mean": float(finite.mean()) if finite.size else np.nan,
                        "ci_low": low,
                        "ci_high": high,
                        "n_targets": int(finite.size),
                        "note": ""
                        if enough or not finite.size
                        else too_few_targets(MIN_TARGETS_INTERVAL),
                    }
                )
    return pd.DataFrame(
        records,
        columns=by
        + ["attribute", "group", "metric", "mean", "ci_low", "ci_high", "n_targets", "note"],
    )


def extremes_table(
    targets: pd.DataFrame,
    metric: str = "dice_final",
    n_boot: int = 1000,
    seed: int = 0,
    by: Sequence[str] = CONFIG,
) -> pd.DataFrame:
    """Per ``by`` (default: configuration) x attribute: ``metric`` in the first and last group,
    their difference (last - first) with a bootstrap CI, and Spearman's rho of ``metric`` with
    the attribute's value over the targets.

    Args:
        targets: :func:`assign_groups`' first output.
        metric: The score column compared (e.g. ``dice_final``, 0-1).
        n_boot: Bootstrap resamples of each group.
        seed: The bootstrap's seed.
        by: The columns a row is per (default: model, prompter, refiner).

    Returns:
        One row per ``by`` x grouped attribute: the groups' names, means and sizes, the
        difference with its CI and note, and ``spearman_rho``, ``spearman_p``, ``n_pairs`` and
        ``spearman_note`` (NaN below :data:`MIN_PAIRS_CORRELATION` pairs).
    """
    by = list(by)
    records = []
    for identity, members, attribute, column in _panels(targets, by):
        first, last = _order(attribute)[0], _order(attribute)[-1]
        a = _finite_values(members, metric, members[column] == first)
        b = _finite_values(members, metric, members[column] == last)
        difference = float(b.mean() - a.mean()) if a.size and b.size else np.nan
        low = high = np.nan
        enough = min(a.size, b.size) >= MIN_TARGETS_INTERVAL  # a sample on both sides
        if enough:
            rng = np.random.default_rng(seed)
            draws = b[rng.integers(0, b.size, size=(n_boot, b.size))].mean(axis=1) - a[
                rng.integers(0, a.size, size=(n_boot, a.size))
            ].mean(axis=1)
            low, high = (float(q) for q in np.quantile(draws, [0.025, 0.975]))
        values = pd.to_numeric(members[f"attr_{attribute}"], errors="coerce")
        rho, p_value, n_pairs = spearman(values.astype(float), members[metric])
        correlated = n_pairs >= MIN_PAIRS_CORRELATION
        if not correlated:
            rho = p_value = np.nan
        records.append(
            {
                **identity,
                "attribute": attribute,
                "metric": metric,
                "first_group": first,
                "first_mean": float(a.mean()) if a.size else np.nan,
                "n_first": int(a.size),
                "last_group": last,
                "last_mean": float(b.mean()) if b.size else np.nan,
                "n_last": int(b.size),
                "difference": difference,
                "difference_ci_low": low,
                "difference_ci_high": high,
                "difference_note": ""
                if enough or not (a.size and b.size)
                else too_few_targets(MIN_TARGETS_INTERVAL),
                "spearman_rho": rho,
                "spearman_p": p_value,
                "n_pairs": n_pairs,
                "spearman_note": "" if correlated else too_few_targets(MIN_PAIRS_CORRELATION),
            }
        )
    return pd.DataFrame(records)


def rows_without_attributes(rows: pd.DataFrame) -> pd.Series:
    """Which rows lack their target's attributes (units of a run made before they existed, or
    with ``target_attributes: false``).

    Args:
        rows: Result rows.

    Returns:
        A boolean series on ``rows``' index (all True without an ``attr_volume_ml`` column).
    """
    if "attr_volume_ml" not in rows:
        return pd.Series(True, index=rows.index)
    return rows["attr_volume_ml"].isna()


def printable_summary(
    stratified: pd.DataFrame,
    extremes: pd.DataFrame,
    metric: str = "dice_final",
    scale: float = 100.0,
) -> pd.DataFrame:
    """One row per ``by`` x attribute: ``metric`` (x ``scale``) per group side by side
    (``low``/``mid``/``high`` or ``no``/``yes``), the last-minus-first difference with its CI,
    and Spearman's rho; for printing.

    Args:
        stratified: :func:`stratified_table`'s output.
        extremes: :func:`extremes_table`'s output (rows of other metrics are ignored).
        metric: The score shown.
        scale: Factor applied to the means and differences (100: Dice x100; rho unscaled).

    Returns:
        The ``by`` columns, ``attribute``, ``unit``, the group means, the difference and its
        CI, ``spearman_rho``, the notes and the ``n_<group>`` sizes; empty when ``stratified``
        has no row of ``metric``.
    """
    chosen = stratified[stratified["metric"] == metric]
    if chosen.empty:
        return pd.DataFrame()
    by = [
        c
        for c in chosen.columns
        if c
        not in ("attribute", "group", "metric", "mean", "ci_low", "ci_high", "n_targets", "note")
    ]
    records = []
    for key, members in chosen.groupby(by + ["attribute"], sort=False):
        key = key if isinstance(key, tuple) else (key,)
        attribute = key[-1]
        record = {
            **dict(zip(by, key[:-1])),
            "attribute": attribute,
            "unit": BY_NAME[attribute].unit,
        }
        means = dict(zip(members["group"], members["mean"] * scale))
        counts = dict(zip(members["group"], members["n_targets"]))
        for group in TERTILE_GROUPS + PRESENCE_GROUPS:
            if group in means:
                record[group] = means[group]
                record[f"n_{group}"] = int(counts[group])
        records.append(record)
    summary = pd.DataFrame(records)
    extremes = extremes[extremes["metric"] == metric]
    keys = by + ["attribute"]
    extra = ["difference", "difference_ci_low", "difference_ci_high", "spearman_rho"]
    notes = [c for c in ("difference_note", "spearman_note") if c in extremes]
    merged = summary.merge(extremes[keys + extra + notes], on=keys, how="left")
    for column in ("difference", "difference_ci_low", "difference_ci_high"):
        merged[column] = merged[column] * scale
    order = keys + ["unit"] + [c for c in ("no", "yes", "low", "mid", "high") if c in merged]
    counts = [c for c in merged.columns if c.startswith("n_")]
    return merged[order + extra + notes + counts]


def displayed_summary(summary: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """:func:`printable_summary` as printed and shown in the report: without the group sizes,
    the difference's interval as ``[low, high]`` text and rho with 2 decimals, each saying
    "n too small (at least N targets)" where its groups or targets are too few.

    Args:
        summary: :func:`printable_summary`'s output.
        digits: Decimals of the interval bounds.

    Returns:
        The table with ``difference 95% CI`` as text and ``spearman_rho`` as text, the notes
        and sizes columns dropped.
    """
    shown = summary.drop(columns=[c for c in summary.columns if c.startswith("n_")])
    lows, highs = shown.pop("difference_ci_low"), shown.pop("difference_ci_high")
    difference_notes = shown.pop("difference_note") if "difference_note" in shown else None
    spearman_notes = shown.pop("spearman_note") if "spearman_note" in shown else None

    def _note(notes: pd.Series | None, i: int) -> str:
        value = "" if notes is None else notes.iloc[i]
        return value if isinstance(value, str) else ""

    shown.insert(
        len(shown.columns) - 1,
        "difference 95% CI",
        [
            _note(difference_notes, i) if low != low else f"[{low:.{digits}f}, {high:.{digits}f}]"
            for i, (low, high) in enumerate(zip(lows, highs))
        ],
    )
    shown["spearman_rho"] = [
        _note(spearman_notes, i) if rho != rho else f"{rho:.2f}"
        for i, rho in enumerate(shown["spearman_rho"])
    ]
    return shown
