"""The comparison and rank tables and their figures.

:func:`comparison_display` and :func:`rank_display` turn
:func:`intrabench.evaluation.paired.paired_comparisons` and
:func:`intrabench.evaluation.ranking.rank_table` into the tables ``intrabench tables`` writes
(``comparisons.md/.tex/.csv``, ``ranks.md/.tex/.csv``; the CSVs keep every number unrounded in
the metric's scale x ``scale``), :func:`significance_matrix` and :func:`rank_blob_plot` draw the
report's figures. Where a scope has too few cases a cell says "n too small (at least N)".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.evaluation.paired import (
    MIN_CASES_INTERVAL,
    MIN_CASES_TEST,
    TOO_FEW,
)

#: level of the significance marks (Holm-adjusted p-values)
ALPHA = 0.05


def too_few(minimum: int) -> str:
    """The cell written instead of a number that needs ``minimum`` cases.

    Args:
        minimum: The cases the number needs.

    Returns:
        ``"<too few> (at least N)"``.
    """
    return f"{TOO_FEW} (at least {minimum})"


def _p_text(p: float, minimum: int) -> str:
    if p != p:
        return too_few(minimum)
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _interval_text(low: float, high: float, scale: float) -> str:
    if low != low or high != high:
        return too_few(MIN_CASES_INTERVAL)
    return f"[{low * scale:.2f}, {high * scale:.2f}]"


def comparison_display(table: pd.DataFrame, scale: float = 100.0) -> pd.DataFrame:
    """The comparison table as written in Markdown and LaTeX: one row per pair and scope.

    Args:
        table: :func:`~intrabench.evaluation.paired.paired_comparisons`'s rows (scores on the
            metric's own 0-1 scale).
        scale: Multiplies scores, differences and intervals (100: Dice x100).

    Returns:
        The display columns (dataset, A, B, scores, difference, 95% CI, n cases, B better in,
        p-values, rank-biserial r); empty for an empty table.
    """
    if table.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        {
            "Dataset": table["dataset"],
            "A": table["A"],
            "B": table["B"],
            f"A x{scale:g}": table["score_A"] * scale,
            f"B x{scale:g}": table["score_B"] * scale,
            f"B - A x{scale:g}": table["difference"] * scale,
            "95% CI": [
                _interval_text(lo, hi, scale) for lo, hi in zip(table["ci_low"], table["ci_high"])
            ],
            "n cases": table["n_cases"].astype(int),
            "B better in": table["b_better"].astype(int),
            "p (Wilcoxon)": [_p_text(p, MIN_CASES_TEST) for p in table["p"]],
            "p (Holm)": [_p_text(p, MIN_CASES_TEST) for p in table["p_holm"]],
            "r (rank-biserial)": [
                too_few(MIN_CASES_TEST) if r != r else f"{r:.2f}" for r in table["rank_biserial"]
            ],
        }
    )


def comparison_csv(table: pd.DataFrame, scale: float = 100.0) -> pd.DataFrame:
    """The comparison table's numbers for a spreadsheet: scores, difference and interval
    x ``scale``, p-values and the effect size as they are (NaN: too few cases).

    Args:
        table: :func:`~intrabench.evaluation.paired.paired_comparisons`'s rows.
        scale: Multiplies scores, differences and intervals.

    Returns:
        A copy with the scaled columns renamed (``A x100``, ``B x100``, ``B - A x100``).
    """
    out = table.copy()
    for column in ("score_A", "score_B", "difference", "ci_low", "ci_high"):
        out[column] = out[column] * scale
    return out.rename(
        columns={
            "score_A": f"A x{scale:g}",
            "score_B": f"B x{scale:g}",
            "difference": f"B - A x{scale:g}",
        }
    )


def rank_display(table: pd.DataFrame, scale: float = 100.0) -> pd.DataFrame:
    """The rank table as written in Markdown and LaTeX.

    Args:
        table: :func:`~intrabench.evaluation.ranking.rank_table`'s rows.
        scale: Multiplies the scores.

    Returns:
        Dataset, configuration, score, rank, median rank, 95% interval, share at rank 1 (%) and
        n cases; cells that need more cases say so. Empty for an empty table.
    """
    if table.empty:
        return pd.DataFrame()
    resampled = table["n_boot"] > 0
    shown = too_few(MIN_CASES_INTERVAL)
    return pd.DataFrame(
        {
            "Dataset": table["dataset"],
            "Configuration": table["configuration"],
            f"score x{scale:g}": table["score"] * scale,
            "rank": table["rank"].astype(int),
            "median rank": [
                f"{m:g}" if ok else shown for m, ok in zip(table["median_rank"], resampled)
            ],
            "95% interval": [
                f"[{lo:g}, {hi:g}]" if ok else shown
                for lo, hi, ok in zip(table["rank_low"], table["rank_high"], resampled)
            ],
            "at rank 1 %": [
                f"{100 * s:.1f}" if ok else shown for s, ok in zip(table["rank1_share"], resampled)
            ],
            "n cases": table["n_cases"].astype(int),
        }
    )


def comparison_results(
    rows: pd.DataFrame,
    metric: str = "dice",
    config: Sequence[str] = ("model", "prompter", "refiner"),
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[pd.DataFrame, list]:
    """(paired comparisons, rank distributions) of the final steps of ``rows``: every pair of
    configurations per dataset and Overall, and each configuration's ranks.

    Args:
        rows: Result rows (one or more runs).
        metric: The metric column compared (``"dice"``).
        config: The columns that make a configuration.
        n_boot: Bootstrap resamples of the cases.
        seed: Seeds the bootstrap.

    Returns:
        ``(comparisons, scopes)``: one row per pair and scope, and one rank distribution per
        scope.
    """
    from intrabench.evaluation.paired import paired_comparisons
    from intrabench.evaluation.ranking import rank_distributions

    comparisons = paired_comparisons(rows, metric, config=config, n_boot=n_boot, seed=seed)
    scopes = rank_distributions(rows, metric, config=config, n_boot=n_boot, seed=seed)
    return comparisons, scopes


def incomplete_note(warnings: Sequence[str | None]) -> str:
    """The mark an incomplete run leaves in every comparison file: the incompleteness
    warnings (:func:`intrabench.io.results.incompleteness_warning`) of the runs, joined.

    Args:
        warnings: One warning (or None) per run.

    Returns:
        ``"INCOMPLETE RUN: ..."``, or ``""`` when every run is complete.
    """
    shown = [w.removeprefix("warning: ") for w in warnings if w]
    return ("INCOMPLETE RUN: " + " ".join(shown)) if shown else ""


def write_comparison_tables(
    comparisons: pd.DataFrame,
    scopes: Sequence,
    out: Path,
    metric: str = "dice",
    scale: float = 100.0,
    n_boot: int = 1000,
    note: str = "",
    config: Sequence[str] = ("model", "prompter", "refiner"),
) -> tuple[pd.DataFrame, pd.DataFrame, list[Path]]:
    """``comparisons.{md,tex,csv}`` and ``ranks.{md,tex,csv}`` under ``out`` (from
    :func:`comparison_results`).

    Args:
        comparisons: The paired comparisons.
        scopes: The rank distributions.
        out: The tables folder.
        metric: The metric compared, for the titles.
        scale: Multiplies scores and differences (100: Dice x100).
        n_boot: The bootstrap resamples used, for the titles.
        note: An incomplete run's note (:func:`incomplete_note`): it heads the Markdown title
            and the LaTeX caption and is a column of the CSVs; empty: none.
        config: The columns that make a configuration.

    Returns:
        ``(comparison display, rank display, the paths written)``.
    """
    from intrabench.display_text import spreadsheet_safe
    from intrabench.evaluation.ranking import rank_table
    from intrabench.reports.tables import write_table

    ranks = rank_table(scopes, config)
    written: list[Path] = []
    shown = metric.replace("_", " ")
    prefix = f"{note} " if note else ""
    titles = {
        "comparisons": f"{prefix}Paired differences of final {shown} x{scale:g} (B - A) on the "
        f"same targets: {n_boot} bootstrap resamples of the cases, Wilcoxon "
        "signed-rank test on case scores, Holm-corrected over the pairs of each "
        "dataset; r: matched-pairs rank-biserial correlation",
        "ranks": f"{prefix}Rank stability of final {shown}: ranks over {n_boot} bootstrap "
        "resamples of the cases (1 = best)",
    }
    displays = {
        "comparisons": comparison_display(comparisons, scale),
        "ranks": rank_display(ranks, scale),
    }
    numbers = {"comparisons": comparison_csv(comparisons, scale), "ranks": _rank_csv(ranks, scale)}
    for name, display in displays.items():
        if display.empty:
            continue
        paths = write_table(display, out, name, titles[name])
        frame = numbers[name].assign(note=note) if note else numbers[name]
        spreadsheet_safe(frame, escape=True).to_csv(paths[2], index=False, float_format="%.6g")
        written += paths
    return displays["comparisons"], displays["ranks"], written


def _rank_csv(ranks: pd.DataFrame, scale: float) -> pd.DataFrame:
    if ranks.empty:
        return ranks
    return ranks.assign(score=ranks["score"] * scale).rename(columns={"score": f"score x{scale:g}"})


def significance_matrix(
    table: pd.DataFrame, scale: float = 100.0, scopes: Sequence[str] | None = None
) -> bytes | None:
    """One panel per scope (dataset, ``Overall``): configurations x configurations, the cell
    (row R, column C) coloured by R - C (x ``scale``), ``*`` where the Holm-adjusted Wilcoxon
    p-value is below 0.05, ``·`` where there are too few cases for the test.

    Args:
        table: The paired comparisons.
        scale: Multiplies the differences (100: Dice x100).
        scopes: The scopes to draw, in order; None: every scope of ``table``.

    Returns:
        The figure as PNG bytes, or None without pairs.
    """
    from intrabench.plotting import png_bytes, pyplot

    if table.empty:
        return None
    scopes = list(scopes) if scopes is not None else list(dict.fromkeys(table["dataset"]))
    labels_all = sorted(set(table["A"]) | set(table["B"]))
    size = min(8.0, max(3.5, 0.22 * len(labels_all) + 2.5))
    columns = min(len(scopes), 3 if len(labels_all) <= 12 else 2)
    rows_of_panels = -(-len(scopes) // columns)
    figure, grid = pyplot().subplots(
        rows_of_panels,
        columns,
        squeeze=False,
        layout="constrained",
        figsize=(size * columns + 1.0, size * rows_of_panels + 0.4),
    )
    for axis in grid.ravel()[len(scopes) :]:
        axis.axis("off")
    axes = list(grid.ravel()[: len(scopes)])
    limit = float(np.nanmax(np.abs(table["difference"]))) * scale or 1.0
    image = None
    for axis, scope in zip(axes, scopes):
        part = table[table["dataset"] == scope]
        labels = sorted(set(part["A"]) | set(part["B"]))
        where = {label: i for i, label in enumerate(labels)}
        cells = np.full((len(labels), len(labels)), np.nan)
        for a, b, difference, p in zip(part["A"], part["B"], part["difference"], part["p_holm"]):
            i, j = where[b], where[a]
            cells[i, j], cells[j, i] = difference * scale, -difference * scale
            mark = "·" if p != p else ("*" if p < ALPHA else "")
            for x, y in ((j, i), (i, j)):
                axis.text(x, y, mark, ha="center", va="center", fontsize=7)
        image = axis.imshow(cells, cmap="RdBu", vmin=-limit, vmax=limit)
        axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=5)
        axis.set_yticks(range(len(labels)), labels, fontsize=5)
        axis.set_title(f"{scope}: row - column", fontsize=8)
    if image is not None:
        bar = figure.colorbar(image, ax=axes, shrink=0.5)
        bar.set_label(f"difference x{scale:g}")
    figure.suptitle(
        f"*: Holm-adjusted Wilcoxon p < {ALPHA:g}; ·: fewer than {MIN_CASES_TEST} "
        "cases differ, no test",
        fontsize=8,
    )
    return png_bytes(figure)


def rank_blob_plot(scopes: Sequence) -> bytes | None:
    """Blob plot of rank distributions, as challenge reports draw it.

    One column per configuration (ordered by its rank on the cases as they are), a disc at each
    rank it took with area proportional to the share of resamples there, a black cross at the
    median rank and a line over the 95% interval. A scope with too few cases shows its observed
    ranks only, marked.

    Args:
        scopes: One :class:`~intrabench.evaluation.ranking.RankDistribution` per scope; scopes
            of one configuration are left out.

    Returns:
        The figure as PNG bytes, or None without scopes.
    """
    from intrabench.plotting import panel_grid, png_bytes

    scopes = [s for s in scopes if len(s.configs) > 1]
    if not scopes:
        return None
    width = min(9.0, max(3.5, 0.3 * max(len(s.configs) for s in scopes) + 2.0))
    figure, axes = panel_grid(len(scopes), 2, width, 3.6)
    for axis, scope in zip(axes, scopes):
        order = np.argsort(scope.observed, kind="stable")
        n = len(scope.configs)
        for x, i in enumerate(order):
            if scope.resampled is None:
                axis.scatter([x], [scope.observed[i]], s=30, facecolors="none", edgecolors="grey")
                continue
            ranks = scope.resampled[i]
            values, counts = np.unique(ranks, return_counts=True)
            axis.scatter(
                np.full(values.size, x),
                values,
                s=250 * counts / ranks.size,
                color="tab:blue",
                alpha=0.6,
                linewidths=0,
            )
            low, high = np.quantile(ranks, [0.025, 0.975])
            axis.vlines(x, low, high, color="black", linewidth=0.8)
            axis.scatter([x], [np.median(ranks)], marker="x", color="black", s=18)
        axis.set_xticks(range(n), [scope.configs[i] for i in order], rotation=90, fontsize=5)
        axis.set_ylim(n + 0.5, 0.5)
        axis.set_ylabel("rank (1 = best)", fontsize=7)
        title = f"{scope.scope} ({scope.n_cases} cases)"
        if scope.resampled is None:
            title += f": {too_few(MIN_CASES_INTERVAL)}"
        axis.set_title(title, fontsize=8)
        axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    return png_bytes(figure)


def report_section(
    rows: pd.DataFrame, metric: str = "dice", n_boot: int = 1000, scale: float = 100.0
) -> tuple[list[tuple[str, str, bytes]], list[str]]:
    """The report's "which configuration is better" section: the overall rank table and a line
    on the comparisons.

    Args:
        rows: Result rows.
        metric: The metric compared.
        n_boot: Bootstrap resamples of the cases.
        scale: Multiplies scores (100: Dice x100).

    Returns:
        ``(figures, html parts)``: each figure as (name, caption, PNG bytes), the HTML parts
        placed before them; both empty without pairs.
    """
    import html

    comparisons, scopes = comparison_results(rows, metric, n_boot=n_boot)
    if comparisons.empty:
        return [], []
    from intrabench.evaluation.ranking import rank_table

    ranks = rank_display(rank_table(scopes), scale)
    tested = comparisons["p_holm"].notna()
    below = int((comparisons["p_holm"] < ALPHA).sum())
    parts = [
        "<h2>Which configuration is better, and how sure</h2>",
        f"<p class='explain'>Every two configurations compared on the same targets, per dataset "
        f"and overall: {len(comparisons)} comparisons, {int(tested.sum())} with enough cases "
        f"for a Wilcoxon signed-rank test (at least {MIN_CASES_TEST} cases that differ), "
        f"{below} with a Holm-adjusted p below {ALPHA:g}. The bootstrap interval of a "
        f"difference needs at least {MIN_CASES_INTERVAL} cases. Ranks: each configuration's "
        f"rank over {n_boot} bootstrap resamples of the cases. <code>intrabench tables</code> "
        "writes both tables (comparisons, ranks) as Markdown, LaTeX and CSV; definitions in "
        "docs/evaluation.md.</p>",
    ]
    overall = ranks[ranks["Dataset"] == ranks["Dataset"].iloc[-1]]
    parts.append(
        f"<h3>Ranks: {html.escape(str(overall['Dataset'].iloc[0]))}</h3>"
        + overall.to_html(index=False, border=0, float_format=lambda v: f"{v:.2f}")
    )
    figures = []
    matrix = significance_matrix(comparisons, scale)
    if matrix is not None:
        figures.append(
            (
                "significance-matrix",
                f"Paired differences of final {metric} "
                f"x{scale:g} (row minus column) on the same targets, per dataset and "
                f"overall; *: Holm-adjusted Wilcoxon p < {ALPHA:g}; ·: too few cases "
                "for a test.",
                matrix,
            )
        )
    blobs = rank_blob_plot(scopes)
    if blobs is not None:
        figures.append(
            (
                "rank-stability",
                f"Rank of each configuration over {n_boot} bootstrap "
                "resamples of the cases: disc area = share of resamples at that rank, "
                "cross = median rank, line = 95% interval (scopes with too few cases: "
                "the observed rank only, grey).",
                blobs,
            )
        )
    return figures, parts
