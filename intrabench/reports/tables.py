"""The paper's result tables (Appendix B, Tables 2-6) from result rows.

Layout: ``Prompter | Model | Interactions | <one column per dataset> | Average`` for single
forward passes; refinement tables start with an ``Iterations`` column (one row per step).
A cell is the dataset score x100 (:func:`intrabench.evaluation.aggregate.per_dataset`: mean over classes of
the mean over cases of the mean over a case's targets), ``Average`` the mean over the dataset
columns present. A *layout* (``configs/paper/tables.yaml``) renames datasets to the paper's
D1..D10 (merging several datasets into one column where the paper does), models and prompters
to the paper's names, and says which runs feed which table.

The written tables (:func:`write_table` with :func:`cell_statistics`) give every cell its n
(cases and targets) and a 95% percentile-bootstrap interval over the cases, the targets nested
in their case: a dataset cell's interval is ``statistics.csv``'s (the same draws, seed 0); the
``Average``'s resamples each of its datasets on its own (dataset column ``i`` with seed
``seed + i``, as the rank distributions do) and averages the resampled dataset scores. Below
:data:`~intrabench.evaluation.aggregate.MIN_CASES_INTERVAL` cases (for ``Average``: in any of
its datasets) the interval says "n too small (at least 5 cases)".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from intrabench.display_text import escaped, spreadsheet_safe
from intrabench.errors import ConfigError
from intrabench.evaluation.aggregate import (
    MIN_CASES_INTERVAL,
    TOO_FEW,
    average_over,
    fill_missing,
    merge_datasets,
    missing_counts,
    per_dataset,
    to_markdown,
)

#: the columns of :func:`cell_statistics`
CELL_COLUMNS = ["row", "column", "ci_low", "ci_high", "n_cases", "n_targets", "ci_note"]
#: what the written tables say their intervals are (before the n line)
INTERVAL_NOTE = "95% CI: percentile bootstrap over the cases (targets nested in their case)"


@dataclass
class TableSpec:
    """One table: a title, the runs (config ``name``s) behind it, and whether it has steps."""

    key: str
    title: str = ""
    runs: list[str] = field(default_factory=list)
    iterations: bool | None = None  # None: refinement rows present -> iteration table


class _TableEntry(BaseModel):
    """One entry of a layout's ``tables``."""

    model_config = ConfigDict(extra="forbid")
    title: str = ""
    runs: list[str] = []
    iterations: bool | None = None


class _LayoutFile(BaseModel):
    """What a table layout file may hold (checked by :meth:`Layout.load`)."""

    model_config = ConfigDict(extra="forbid")
    #: column -> dataset keys (one key may be given as a string)
    columns: dict[str, list[str]] = {}
    models: dict[str, str] = {}
    prompters: dict[str, str] = {}
    refiners: dict[str, str] = {}
    tables: dict[str, _TableEntry] = {}

    @field_validator("columns", mode="before")
    @classmethod
    def _one_key_as_a_list(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value


@dataclass
class Layout:
    """How to present tables: dataset columns, display names, and the tables to build."""

    columns: dict[str, list[str]] = field(default_factory=dict)  # column -> dataset keys
    models: dict[str, str] = field(default_factory=dict)
    prompters: dict[str, str] = field(default_factory=dict)
    refiners: dict[str, str] = field(default_factory=dict)
    tables: list[TableSpec] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> Layout:
        """The layout in the YAML file ``path`` (``configs/paper/tables.yaml`` shows every
        key); ConfigError in one line for a file that is not one (a run config given by
        mistake, a value of the wrong kind, YAML that does not parse)."""
        from pydantic import ValidationError

        from intrabench.config import read_yaml_file

        path = Path(path)
        if not path.exists():
            raise ConfigError(f"table layout not found: {path}")
        data = read_yaml_file(path, "table layout")
        try:
            parsed = _LayoutFile.model_validate({} if data is None else data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"]
            if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
                message = f"not a key of a table layout ({', '.join(_LayoutFile.model_fields)})"
            if isinstance(data, dict) and "datasets" in data:
                message += " (this looks like a run config; --layout takes a table layout)"
            raise ConfigError(f"{path}: {where + ': ' if where else ''}{message}") from None
        columns = {k: list(v) for k, v in parsed.columns.items()}
        tables = [
            TableSpec(key=k, title=v.title, runs=list(v.runs), iterations=v.iterations)
            for k, v in parsed.tables.items()
        ]
        return cls(
            columns=columns,
            models=dict(parsed.models),
            prompters=dict(parsed.prompters),
            refiners=dict(parsed.refiners),
            tables=tables,
        )


def prompter_label(prompter: str, refiner: str, layout: Layout | None = None) -> str:
    """The ``Prompter`` cell of a table: the layout's name, with ``+ <refiner> Refine``.

    Args:
        prompter: The prompter's key as in the result rows' ``prompter`` column.
        refiner: The refiner's key (``refiner`` column); ``"none"`` or empty: no refinement,
            the label is the prompter's name alone.
        layout: Display names for prompters and refiners (None: the keys as they are).

    Returns:
        The label, e.g. ``"3 points + SAM Refine"``.
    """
    layout = layout or Layout()
    name = layout.prompters.get(prompter, prompter)
    if refiner in ("none", "", None):
        return name
    return f"{name} + {layout.refiners.get(refiner, refiner)} Refine"


def _table_rows(
    rows: pd.DataFrame, layout: Layout, iterations: bool | None
) -> tuple[pd.DataFrame, bool]:
    """The rows a table aggregates (each episode's final step unless ``iterations``; the
    layout's datasets, merged and renamed to its columns) and whether it has iterations."""
    if iterations is None:
        iterations = bool((rows["refiner"] != "none").any())
    if not iterations:
        last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
        rows = rows[rows["step"] == last].assign(step=0)
    if layout.columns:
        known = {d for members in layout.columns.values() for d in members}
        rows = rows[rows["dataset"].isin(known)]
        merged = {c: m for c, m in layout.columns.items() if len(m) > 1}
        renamed = {m[0]: c for c, m in layout.columns.items() if len(m) == 1}
        rows = merge_datasets(rows, merged).assign(dataset=lambda f: f["dataset"].replace(renamed))
    return rows, iterations


def build_table(
    rows: pd.DataFrame,
    layout: Layout | None = None,
    metric: str = "dice",
    iterations: bool | None = None,
    scale: float = 100.0,
    missing_value: float | None = None,
) -> pd.DataFrame:
    """A paper-style table from step rows (one or several runs concatenated).

    Args:
        rows: Result rows, one per (dataset, case, target, model, prompter, refiner, seed,
            step).
        layout: Dataset columns, display names and tables (None: one column per dataset).
        metric: The metric column to aggregate.
        iterations: True keeps every step and adds an ``Iterations`` column; False keeps each
            episode's final step only; None decides from the rows (any refiner -> True).
        scale: Factor applied to the scores (100: Dice x100 as in the paper).
        missing_value: Substituted for missing values of ``metric`` (NaN, e.g. HD95 of an
            empty prediction) before aggregating; without it they are left out of the means
            and a ``Missing`` column counts them per table row (target x seed values).

    Returns:
        One row per prompter and model (and iteration), one column per dataset column, then
        ``Average`` (and ``Average over`` and ``Missing`` where they apply).
    """
    layout = layout or Layout()
    if rows.empty:
        return pd.DataFrame()
    rows, iterations = _table_rows(rows, layout, iterations)
    if rows.empty:
        return pd.DataFrame()
    index = ["model", "prompter", "refiner", "step"]
    missing = missing_counts(rows, metric, index)
    rows = fill_missing(rows, metric, missing_value)
    scores = per_dataset(rows, metric)
    wide = scores.pivot_table(index=index, columns="dataset", values=metric, sort=True) * scale
    order = [c for c in layout.columns if c in wide.columns] or sorted(wide.columns)
    wide = wide[order]
    wide["Average"] = wide.mean(axis=1)
    covered = average_over(wide[order])
    labels = rows.groupby(index)["effort_label"].first()
    wide = wide.reset_index()
    wide.columns.name = None
    table = pd.DataFrame(
        {
            "Iterations": wide["step"].astype(int),
            "Prompter": [
                prompter_label(p, r, layout) for p, r in zip(wide["prompter"], wide["refiner"])
            ],
            "Model": [layout.models.get(m, m) for m in wide["model"]],
            "Interactions": [labels.get(tuple(k), "") for k in wide[index].itertuples(index=False)],
        }
    )
    for column in order + ["Average"]:
        table[column] = wide[column].to_numpy()
    if covered is not None:  # rows average different datasets: say which
        table["Average over"] = covered
    if missing_value is None and missing.any():
        table["Missing"] = [
            int(missing.get(tuple(k), 0)) for k in wide[index].itertuples(index=False)
        ]
    table = table.sort_values(["Prompter", "Model", "Iterations"], kind="stable").reset_index(
        drop=True
    )
    if not iterations:
        table = table.drop(columns="Iterations")
    return table


def _dataset_draws(
    part: pd.DataFrame,
    metric: str,
    index: list[str],
    keys: list[tuple],
    n_boot: int,
    seed: int,
    average_seed: int,
) -> dict[tuple, tuple[int, int, bool, np.ndarray | None, np.ndarray | None]]:
    """Per configuration ``key`` of one dataset column's rows ``part``: its n cases and n
    targets, whether it has :data:`MIN_CASES_INTERVAL` cases with a value, and the resampled
    dataset scores with ``seed`` (its cell) and ``average_seed`` (its share of ``Average``).

    The draws are :func:`~intrabench.evaluation.aggregate.bootstrap_replicates`' of each
    configuration's own (seeds, cases, classes) matrix, vectorised: one groupby builds every
    matrix and the configurations with the same cases are resampled at once
    (:func:`~intrabench.evaluation.paired.resampled_scores` of the same draws)."""
    import warnings

    from intrabench.evaluation.paired import case_weights, resampled_scores

    if not keys:
        return {}
    seeds = "seed" in part
    part = part if seeds else part.assign(seed=0)
    cases = sorted(part["case"].unique(), key=str)
    classes = sorted(part["target_class"].unique(), key=str)
    seed_values = sorted(part["seed"].unique(), key=str)
    means = part.groupby([*index, "seed", "case", "target_class"], dropna=False)[metric].mean()
    key_of = {k: j for j, k in enumerate(keys)}
    case_of = {c: j for j, c in enumerate(cases)}
    class_of = {c: j for j, c in enumerate(classes)}
    seed_of = {v: j for j, v in enumerate(seed_values)}
    values = np.full((len(keys), len(seed_values), len(cases), len(classes)), np.nan)
    present = np.zeros((len(keys), len(cases)), dtype=bool)
    width = len(index)
    for identity, value in means.items():
        k = key_of.get(tuple(identity[:width]))
        if k is None:
            continue
        s, c, t = identity[width:]
        values[k, seed_of[s], case_of[c], class_of[t]] = value
        present[k, case_of[c]] = True
    targets = part[[*index, "case", "target"]].drop_duplicates().groupby(index, sort=False).size()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        case_means = np.nanmean(np.nanmean(values, axis=3), axis=1)  # (keys, cases)
    out: dict[tuple, tuple[int, int, bool, np.ndarray | None, np.ndarray | None]] = {}
    batches: dict[tuple[int, ...], list[int]] = {}
    for k, key in enumerate(keys):
        own = tuple(np.flatnonzero(present[k]).tolist())
        enough = int(np.isfinite(case_means[k, list(own)]).sum()) >= MIN_CASES_INTERVAL
        out[key] = (len(own), int(targets.get(key, 0)), enough, None, None)
        if enough and n_boot > 0:
            batches.setdefault(own, []).append(k)
    for own, members in batches.items():
        chosen = values[members][:, :, list(own), :]
        draws = resampled_scores(chosen, case_weights(len(own), n_boot, seed))
        shared = (
            draws
            if average_seed == seed
            else resampled_scores(chosen, case_weights(len(own), n_boot, average_seed))
        )
        for row, k in enumerate(members):
            n_cases, n_targets, enough, _, _ = out[keys[k]]
            out[keys[k]] = (n_cases, n_targets, enough, draws[row], shared[row])
    return out


def cell_statistics(
    table: pd.DataFrame,
    rows: pd.DataFrame,
    layout: Layout | None = None,
    metric: str = "dice",
    scale: float = 100.0,
    missing_value: float | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """The n and the 95% bootstrap interval of every score cell of ``table``
    (:func:`build_table` of ``rows`` with the same ``layout``, ``metric`` and
    ``missing_value``; an ``Iterations`` column: the table has every step).

    A dataset cell: the percentile interval of ``n_boot`` resamples of its cases (the targets
    nested in their case; :func:`~intrabench.evaluation.aggregate.bootstrap_replicates`, seed
    ``seed``: ``statistics.csv``'s interval). ``Average``: dataset column ``i`` resampled with
    seed ``seed + i``, each resample's dataset scores averaged over the row's columns (a
    stratified bootstrap). No interval (NaN, ``ci_note`` "n too small (at least 5 cases)")
    below :data:`~intrabench.evaluation.aggregate.MIN_CASES_INTERVAL` cases, for ``Average`` in
    any of its datasets.

    Args:
        table: A table of :func:`build_table` (its ``Model``, ``Prompter`` and, when it has
            every step, ``Iterations`` columns locate each configuration).
        rows: The result rows the table was built from.
        layout: The layout the table was built with (None: one column per dataset).
        metric: The metric column the table aggregates.
        scale: The table's factor on the scores (100: Dice x100); the bounds are scaled alike.
        missing_value: The value the table substituted for missing metric values (None: left
            out).
        n_boot: Bootstrap resamples per cell; 0: no intervals (NaN bounds, n still given).
        seed: The seed of every dataset cell's resamples; for ``Average``, dataset column
            ``i`` is resampled with ``seed + i``.

    Returns:
        One row per (table row position, score column): ``row``, ``column``, ``ci_low``,
        ``ci_high`` (x ``scale``), ``n_cases``, ``n_targets`` (``Average``: summed over its
        datasets), ``ci_note``.
    """
    layout = layout or Layout()
    if table.empty or rows.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    iterations = "Iterations" in table.columns
    rows, _ = _table_rows(rows, layout, iterations)
    rows = fill_missing(rows, metric, missing_value)
    present = set(rows["dataset"].astype(str).unique())
    datasets = [c for c in table.columns if c in present]
    # table position of each configuration, matched on the labels build_table gives it
    positions: dict[tuple, list[int]] = {}
    for position, key in enumerate(
        zip(
            table["Model"],
            table["Prompter"],
            table["Iterations"] if iterations else [0] * len(table),
        )
    ):
        positions.setdefault(tuple(key), []).append(position)
    index = ["model", "prompter", "refiner", "step"]
    position_of: dict[tuple, int] = {}
    for key in sorted(rows[index].drop_duplicates().itertuples(index=False, name=None)):
        model, prompter, refiner, step = key
        label = (layout.models.get(model, model), prompter_label(prompter, refiner, layout), step)
        if positions.get(label):
            position_of[key] = positions[label].pop(0)
    too_few = f"{TOO_FEW} (at least {MIN_CASES_INTERVAL} cases)"
    alpha = 0.025
    records = []
    # per table row: (resampled dataset scores, n cases, n targets, enough) of each dataset
    averaged: dict[int, list[tuple[np.ndarray | None, int, int, bool]]] = {}
    for i, column in enumerate(datasets):
        part = rows[rows["dataset"].astype(str) == column]
        distinct = part[index].drop_duplicates().itertuples(index=False, name=None)
        keys = sorted(k for k in distinct if k in position_of)
        cells = _dataset_draws(part, metric, index, keys, n_boot, seed, seed + i)
        for key, (n_cases, n_targets, enough, draws, average_draws) in cells.items():
            low = high = float("nan")
            if draws is not None and np.isfinite(draws).any():
                low, high = (float(q) for q in np.nanquantile(draws, [alpha, 1 - alpha]))
            position = position_of[key]
            records.append(
                (
                    position,
                    column,
                    low * scale,
                    high * scale,
                    n_cases,
                    n_targets,
                    "" if enough else too_few,
                )
            )
            averaged.setdefault(position, []).append((average_draws, n_cases, n_targets, enough))
    if "Average" in table.columns:
        for position, parts in sorted(averaged.items()):
            enough = all(p[3] for p in parts) and n_boot > 0
            low = high = float("nan")
            if enough:
                draws = np.mean([p[0] for p in parts], axis=0)
                if np.isfinite(draws).any():
                    low, high = (float(q) for q in np.nanquantile(draws, [alpha, 1 - alpha]))
            records.append(
                (
                    position,
                    "Average",
                    low * scale,
                    high * scale,
                    sum(p[1] for p in parts),
                    sum(p[2] for p in parts),
                    ""
                    if all(p[3] for p in parts)
                    else f"{TOO_FEW} (at least {MIN_CASES_INTERVAL} cases in each dataset)",
                )
            )
    cells = pd.DataFrame.from_records(records, columns=CELL_COLUMNS)
    return cells.sort_values(["row", "column"], kind="stable", ignore_index=True)


def interval_text(low: float, high: float, note: str = "", digits: int = 2) -> str:
    """A cell's interval as the written tables show it: ``[low, high]``, or, where there is
    none, the note in the short form of the other tables ("n too small (at least 5)", for an
    ``Average`` "n too small (at least 5 per dataset)"; the n line says they count cases).

    Args:
        low: The interval's lower bound, in the table's scale (NaN: no interval).
        high: The interval's upper bound, in the table's scale.
        note: The cell's ``ci_note`` (:func:`cell_statistics`), shown when there is no interval.
        digits: Decimals of the bounds.

    Returns:
        ``"[low, high]"``, ``"[<short note>]"``, or ``""`` for no interval and no note.
    """
    if low != low:
        short = note.replace(" cases in each dataset)", " per dataset)").replace(" cases)", ")")
        return f"[{short}]" if note else ""
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def cell_texts(
    table: pd.DataFrame, cells: pd.DataFrame, digits: int = 2
) -> tuple[dict[tuple[int, str], str], str]:
    """What follows each score cell's value in the written Markdown and LaTeX (its interval,
    and its n where the rows of its column differ in n), and the line that gives the n of the
    columns whose rows all have the same (``n (cases / targets): D1 5 / 12; ...``).

    Args:
        table: A table of :func:`build_table`.
        cells: Its :func:`cell_statistics`.
        digits: Decimals of the interval bounds.

    Returns:
        The text after each cell, keyed by (row position, column), starting with a space; and
        the n line (``""`` when no column has the same n in every row).
    """
    suffixes: dict[tuple[int, str], str] = {}
    uniform = []
    for column in [c for c in table.columns if c in set(cells["column"])]:
        chosen = cells[cells["column"] == column]
        same = len(chosen[["n_cases", "n_targets"]].drop_duplicates()) == 1
        if same:
            first = chosen.iloc[0]
            shown = escaped(column)  # a dataset label may carry hidden characters
            uniform.append(f"{shown} {int(first['n_cases'])} / {int(first['n_targets'])}")
        for cell in chosen.itertuples(index=False):
            text = " " + interval_text(cell.ci_low, cell.ci_high, cell.ci_note, digits)
            if not same:
                text += f" (n {int(cell.n_cases)} / {int(cell.n_targets)})"
            suffixes[(int(cell.row), column)] = text.rstrip()
    line = f"n (cases / targets): {'; '.join(uniform)}" if uniform else ""
    return suffixes, line


def cells_csv_columns(table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """``table`` with, per score column ``C``, the columns ``C ci_low``, ``C ci_high``, ``C n
    cases``, ``C n targets`` and ``C ci_note`` (as ``statistics.csv`` names them).

    Args:
        table: A table of :func:`build_table`.
        cells: Its :func:`cell_statistics`.

    Returns:
        A copy of ``table`` with the five columns added per score column (n columns as
        nullable integers, notes empty where there is an interval).
    """
    out = table.copy()
    for column in [c for c in table.columns if c in set(cells["column"])]:
        chosen = cells[cells["column"] == column].set_index("row")
        for name, source in (
            ("ci_low", "ci_low"),
            ("ci_high", "ci_high"),
            ("n cases", "n_cases"),
            ("n targets", "n_targets"),
            ("ci_note", "ci_note"),
        ):
            values = chosen[source].reindex(range(len(table)))
            if source.startswith("n_"):
                values = values.astype("Int64")
            elif source == "ci_note":
                values = values.fillna("")
            out[f"{column} {name}"] = values.to_numpy()
    return out


LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "\u2020": r"\textdagger{}",
}


def to_latex(
    table: pd.DataFrame,
    caption: str = "",
    label: str = "",
    digits: int = 2,
    marked: frozenset[tuple[int, str]] = frozenset(),
    suffixes: Mapping[tuple[int, str], str] | None = None,
) -> str:
    """A booktabs LaTeX table (no jinja2 needed); numbers with ``digits`` decimals; the cells
    (row position, column) in ``marked`` carry a dagger (:func:`trained_cells`), those in
    ``suffixes`` are followed by that text (an interval: :func:`cell_texts`).

    Args:
        table: The table to write (float columns right-aligned, NaN as an empty cell).
        caption: The caption text (LaTeX special characters escaped); empty: none.
        label: The LaTeX label key (e.g. ``tab:initial``); empty: none.
        digits: Decimals of the numbers.
        marked: Cells (row position, column) that get a dagger.
        suffixes: Text after a cell's number, keyed by (row position, column).

    Returns:
        The LaTeX source of a ``table`` environment, ending in a newline (``"% (no
        results)"`` for an empty table).
    """
    suffixes = suffixes or {}
    if table.empty:
        return "% (no results)\n"

    def escape(text: Any) -> str:
        return "".join(LATEX_ESCAPES.get(character, character) for character in escaped(text))

    numeric = [pd.api.types.is_float_dtype(table[c]) for c in table.columns]
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(escape(c) for c in table.columns) + r" \\",
        r"\midrule",
    ]
    for position, values in enumerate(table.itertuples(index=False)):
        cells = []
        for column, value, is_number in zip(table.columns, values, numeric):
            if is_number:
                dagger = r"$^\dagger$" if (position, column) in marked else ""
                after = escape(suffixes.get((position, column), ""))
                cells.append("" if value != value else f"{value:.{digits}f}{dagger}{after}")
            else:
                cells.append(escape(value))
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


TRAINED_NOTE = (
    "† the model was trained on this dataset (its model card's training_data; "
    "'intrabench tables --exclude-training-data' leaves these cells out)"
)


def trained_cells(
    table: pd.DataFrame, rows: pd.DataFrame, layout: Layout | None = None
) -> frozenset[tuple[int, str]]:
    """The cells (row position, dataset column) of ``table`` (:func:`build_table` of ``rows``)
    whose (model, dataset) pair the model was trained on: a row of that model, prompter and
    dataset with ``in_training_data`` "yes" (a merged column: any of its datasets).

    Args:
        table: A table of :func:`build_table` with ``Model`` and ``Prompter`` columns.
        rows: The result rows it was built from, with the ``in_training_data`` column.
        layout: The layout the table was built with (None: one column per dataset).

    Returns:
        The (row position, column) pairs to mark; empty when the rows say nothing on training
        data.
    """
    from intrabench.training_data import COLUMN

    if table.empty or COLUMN not in rows or not {"Model", "Prompter"} <= set(table.columns):
        return frozenset()
    layout = layout or Layout()
    trained = rows[rows[COLUMN].eq("yes")]
    if trained.empty:
        return frozenset()
    column_of = {member: column for column, members in layout.columns.items() for member in members}
    pairs = {
        (
            layout.models.get(m, m),
            prompter_label(p, r, layout),
            column_of.get(d, d) if layout.columns else d,
        )
        for m, p, r, d in trained[["model", "prompter", "refiner", "dataset"]]
        .drop_duplicates()
        .itertuples(index=False)
    }
    return frozenset(
        (position, column)
        for position, (model, prompter) in enumerate(zip(table["Model"], table["Prompter"]))
        for m, p, column in pairs
        if m == model and p == prompter and column in table.columns
    )


def training_data_line(marked: int, left_out: int = 0) -> str:
    """The tables' one line on training data: how many cells are marked, or how many
    (model, dataset) pairs were left out (``--exclude-training-data``).

    Args:
        marked: The number of cells marked with a dagger.
        left_out: The number of (model, dataset) pairs left out; non-zero wins over ``marked``.

    Returns:
        The line, without a newline.
    """
    if left_out:
        return (
            f"training data: {left_out} (model, dataset) pair(s) the model was trained on "
            "left out of every table (--exclude-training-data)"
        )
    if marked:
        return (
            f"training data: {marked} table cell(s) marked \u2020, the model was trained on "
            "that dataset; --exclude-training-data leaves them out"
        )
    return "training data: no table cell is of a dataset its model was trained on"


def marked_for_markdown(
    table: pd.DataFrame,
    marked: frozenset[tuple[int, str]],
    digits: int = 2,
    suffixes: Mapping[tuple[int, str], str] | None = None,
) -> pd.DataFrame:
    """``table`` with the marked columns (and those with ``suffixes``) as text: a dagger after
    each marked cell's value, then the cell's suffix (its interval: :func:`cell_texts`).

    Args:
        table: A table of :func:`build_table`.
        marked: Cells (row position, column) that get a dagger (:func:`trained_cells`).
        digits: Decimals of the numbers of the columns turned to text.
        suffixes: Text after a cell's number, keyed by (row position, column).

    Returns:
        A copy of ``table``; the columns with a marked cell or a suffix hold strings (NaN as
        ``""``), the other columns are unchanged.
    """
    suffixes = suffixes or {}
    shown = table.copy()
    for column in [c for c in table.columns if c in {c for _, c in [*marked, *suffixes]}]:
        values = table[column].tolist()
        shown[column] = [
            ""
            if v != v
            else f"{v:.{digits}f}"
            + ("†" if (i, column) in marked else "")
            + suffixes.get((i, column), "")
            for i, v in enumerate(values)
        ]
    return shown


def write_table(
    table: pd.DataFrame,
    out_dir: Path,
    name: str,
    title: str = "",
    marked: frozenset[tuple[int, str]] = frozenset(),
    cells: pd.DataFrame | None = None,
) -> list[Path]:
    """``<name>.md``, ``<name>.tex`` and ``<name>.csv`` under ``out_dir``; returns the paths.
    Names with hidden characters are shown escaped in all three; in the CSV, text a
    spreadsheet would run as a formula is quoted (:func:`~intrabench.display_text.spreadsheet_safe`).
    ``marked`` (:func:`trained_cells`): a dagger and a footnote in the Markdown and LaTeX, a
    ``Trained on`` column (the row's marked dataset columns) in the CSV. ``cells``
    (:func:`cell_statistics`): each score cell followed by its 95% interval in the Markdown and
    LaTeX, a line (the caption) giving the n, and the interval and n columns in the CSV.

    Args:
        table: A table of :func:`build_table`.
        out_dir: The folder to write to (created if missing).
        name: The files' stem, also the LaTeX label ``tab:<name>``.
        title: The Markdown heading and the start of the LaTeX caption; empty: none.
        marked: Cells (row position, column) the model was trained on.
        cells: The table's :func:`cell_statistics` (None: no intervals).

    Returns:
        The paths of the Markdown, LaTeX and CSV files, in that order.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    suffixes: dict[tuple[int, str], str] = {}
    n_line = ""
    if cells is not None and not cells.empty:
        suffixes, n_line = cell_texts(table, cells)
        n_line = "; ".join(part for part in (INTERVAL_NOTE, n_line) if part)
    note = f"\n\n{TRAINED_NOTE} ({len(marked)} cell(s))" if marked else ""
    markdown = (
        (f"**{title}**\n\n" if title else "")
        + to_markdown(
            marked_for_markdown(table, marked, suffixes=suffixes) if marked or suffixes else table
        )
        + (f"\n\n{n_line}" if n_line else "")
        + note
        + "\n"
    )
    paths = [out_dir / f"{name}.md", out_dir / f"{name}.tex", out_dir / f"{name}.csv"]
    paths[0].write_text(markdown)
    caption = ". ".join(part for part in (title, n_line, TRAINED_NOTE if marked else "") if part)
    paths[1].write_text(
        to_latex(table, caption=caption, label=f"tab:{name}", marked=marked, suffixes=suffixes)
    )
    csv = cells_csv_columns(table, cells) if cells is not None and not cells.empty else table
    if marked:
        csv = csv.assign(
            **{
                "Trained on": [
                    "; ".join(c for c in table.columns if (i, c) in marked)
                    for i in range(len(table))
                ]
            }
        )
    spreadsheet_safe(csv, escape=True).to_csv(paths[2], index=False, float_format="%.4f")
    return paths


def _table_inputs(
    rows: pd.DataFrame, layout: Layout
) -> list[tuple[str, str, pd.DataFrame, bool | None]]:
    """(name, title, rows, iterations) of every table :func:`tables_for_runs` builds."""
    if layout.tables:
        return [
            (
                spec.key,
                spec.title,
                rows[rows["run"].isin(spec.runs)] if spec.runs else rows,
                spec.iterations,
            )
            for spec in layout.tables
        ]
    return [
        (name, title, chosen, iterations)
        for name, title, chosen, iterations in (
            ("initial", "single forward pass", rows[rows["refiner"] == "none"], False),
            ("refinement", "per refinement iteration", rows[rows["refiner"] != "none"], True),
        )
        if not chosen.empty
    ]


def tables_for_runs(
    rows: pd.DataFrame,
    layout: Layout | None = None,
    metric: str = "dice",
    scale: float = 100.0,
    missing_value: float | None = None,
) -> list[tuple[str, str, pd.DataFrame]]:
    """(name, title, table) for every table the layout names whose runs are present; without
    tables in the layout: one ``initial`` table (final step of runs without refinement) and one
    ``refinement`` table (every step of runs with a refiner).

    Args:
        rows: The result rows of one or several runs, with a ``run`` column (the config
            ``name``) where the layout picks runs.
        layout: The tables, columns and display names (None: the two default tables).
        metric: The metric column to aggregate.
        scale: Factor applied to the scores (100: Dice x100).
        missing_value: Substituted for missing metric values (see :func:`build_table`).

    Returns:
        (name, title, table) per non-empty table, in the layout's order.
    """
    return [
        (name, title, table)
        for name, title, table, _ in tables_with_rows(rows, layout, metric, scale, missing_value)
    ]


def tables_with_rows(
    rows: pd.DataFrame,
    layout: Layout | None = None,
    metric: str = "dice",
    scale: float = 100.0,
    missing_value: float | None = None,
) -> list[tuple[str, str, pd.DataFrame, pd.DataFrame]]:
    """:func:`tables_for_runs` with each table's rows, for :func:`cell_statistics`.

    Args:
        rows: The result rows of one or several runs (see :func:`tables_for_runs`).
        layout: The tables, columns and display names (None: the two default tables).
        metric: The metric column to aggregate.
        scale: Factor applied to the scores (100: Dice x100).
        missing_value: Substituted for missing metric values (see :func:`build_table`).

    Returns:
        (name, title, table, the rows it was built from) per non-empty table; without tables
        in the layout the titles name the metric and scale (``"dice x100, single forward
        pass"``).
    """
    layout = layout or Layout()
    built = []
    for name, title, chosen, iterations in _table_inputs(rows, layout):
        if not layout.tables:
            title = (
                f"{metric} x{scale:g}, {title}"
                if name == "initial"
                else f"{metric} x{scale:g} {title}"
            )
        table = build_table(chosen, layout, metric, iterations, scale, missing_value)
        if not table.empty:
            built.append((name, title, table, chosen))
    return built


def load_runs(run_dirs: Sequence[str | Path]) -> dict[str | Path, pd.DataFrame]:
    """The rows of each run directory, read once.

    Args:
        run_dirs: Run directories (each holding a run's results).

    Returns:
        The checked result rows of each directory, keyed by the directory as given.
    """
    from intrabench.evaluation.metric_registry import metric_ranges
    from intrabench.io.result_checks import checked_rows
    from intrabench.io.results import load_results

    return {d: checked_rows(load_results(d), d, metric_ranges()) for d in run_dirs}


def concat_runs(runs: Mapping[str | Path, pd.DataFrame]) -> pd.DataFrame:
    """The rows of several runs (:func:`load_runs`), concatenated.

    Args:
        runs: Result rows keyed by run directory.

    Returns:
        One frame with a fresh index (empty without runs).
    """
    frames = list(runs.values())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def dataset_columns(mapping: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Normalise a column mapping (a dataset key or a list of keys per column).

    Args:
        mapping: Table column -> a dataset key or a sequence of dataset keys.

    Returns:
        Table column -> a list of dataset keys.
    """
    return {k: [v] if isinstance(v, str) else list(v) for k, v in mapping.items()}
