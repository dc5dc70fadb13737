"""The paper's result tables (Appendix B, Tables 2-6) from result rows.

Layout: ``Prompter | Model | Interactions | <one column per dataset> | Average`` for single
forward passes; refinement tables start with an ``Iterations`` column (one row per step).
A cell is the dataset score x100 (:func:`intrabench.evaluation.aggregate.per_dataset`: mean over classes of
the mean over cases of the mean over a case's targets), ``Average`` the mean over the dataset
columns present. A *layout* (``configs/paper/tables.yaml``) renames datasets to the paper's
D1..D10 (merging several datasets into one column where the paper does), models and prompters
to the paper's names, and says which runs feed which table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from intrabench.display_text import escaped, spreadsheet_safe
from intrabench.errors import ConfigError
from intrabench.evaluation.aggregate import (
    average_over,
    fill_missing,
    merge_datasets,
    missing_counts,
    per_dataset,
    to_markdown,
)


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
    """The ``Prompter`` cell of a table: the layout's name, with ``+ <refiner> Refine``."""
    layout = layout or Layout()
    name = layout.prompters.get(prompter, prompter)
    if refiner in ("none", "", None):
        return name
    return f"{name} + {layout.refiners.get(refiner, refiner)} Refine"


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
) -> str:
    """A booktabs LaTeX table (no jinja2 needed); numbers with ``digits`` decimals; the cells
    (row position, column) in ``marked`` carry a dagger (:func:`trained_cells`)."""
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
                cells.append("" if value != value else f"{value:.{digits}f}{dagger}")
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
    dataset with ``in_training_data`` "yes" (a merged column: any of its datasets)."""
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
    (model, dataset) pairs were left out (``--exclude-training-data``)."""
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
    table: pd.DataFrame, marked: frozenset[tuple[int, str]], digits: int = 2
) -> pd.DataFrame:
    """``table`` with the marked columns as text, a dagger after each marked cell's value."""
    shown = table.copy()
    for column in {c for _, c in marked}:
        values = table[column].tolist()
        shown[column] = [
            "" if v != v else f"{v:.{digits}f}" + ("†" if (i, column) in marked else "")
            for i, v in enumerate(values)
        ]
    return shown


def write_table(
    table: pd.DataFrame,
    out_dir: Path,
    name: str,
    title: str = "",
    marked: frozenset[tuple[int, str]] = frozenset(),
) -> list[Path]:
    """``<name>.md``, ``<name>.tex`` and ``<name>.csv`` under ``out_dir``; returns the paths.
    Names with hidden characters are shown escaped in all three; in the CSV, text a
    spreadsheet would run as a formula is quoted (:func:`~intrabench.display_text.spreadsheet_safe`).
    ``marked`` (:func:`trained_cells`): a dagger and a footnote in the Markdown and LaTeX, a
    ``Trained on`` column (the row's marked dataset columns) in the CSV."""
    out_dir.mkdir(parents=True, exist_ok=True)
    note = f"\n\n{TRAINED_NOTE} ({len(marked)} cell(s))" if marked else ""
    markdown = (
        (f"**{title}**\n\n" if title else "")
        + to_markdown(marked_for_markdown(table, marked) if marked else table)
        + note
        + "\n"
    )
    paths = [out_dir / f"{name}.md", out_dir / f"{name}.tex", out_dir / f"{name}.csv"]
    paths[0].write_text(markdown)
    caption = (f"{title}. {TRAINED_NOTE}" if title else TRAINED_NOTE) if marked else title
    paths[1].write_text(to_latex(table, caption=caption, label=f"tab:{name}", marked=marked))
    csv = table
    if marked:
        csv = table.assign(
            **{
                "Trained on": [
                    "; ".join(c for c in table.columns if (i, c) in marked)
                    for i in range(len(table))
                ]
            }
        )
    spreadsheet_safe(csv, escape=True).to_csv(paths[2], index=False, float_format="%.4f")
    return paths


def tables_for_runs(
    rows: pd.DataFrame,
    layout: Layout | None = None,
    metric: str = "dice",
    scale: float = 100.0,
    missing_value: float | None = None,
) -> list[tuple[str, str, pd.DataFrame]]:
    """(name, title, table) for every table the layout names whose runs are present; without
    tables in the layout: one ``initial`` table (final step of runs without refinement) and one
    ``refinement`` table (every step of runs with a refiner)."""
    layout = layout or Layout()
    built: list[tuple[str, str, pd.DataFrame]] = []
    if layout.tables:
        for spec in layout.tables:
            chosen = rows[rows["run"].isin(spec.runs)] if spec.runs else rows
            table = build_table(chosen, layout, metric, spec.iterations, scale, missing_value)
            if not table.empty:
                built.append((spec.key, spec.title, table))
        return built
    single = rows[rows["refiner"] == "none"]
    refined = rows[rows["refiner"] != "none"]
    if not single.empty:
        built.append(
            (
                "initial",
                f"{metric} x{scale:g}, single forward pass",
                build_table(single, layout, metric, False, scale, missing_value),
            )
        )
    if not refined.empty:
        built.append(
            (
                "refinement",
                f"{metric} x{scale:g} per refinement iteration",
                build_table(refined, layout, metric, True, scale, missing_value),
            )
        )
    return built


def load_runs(run_dirs: Sequence[str | Path]) -> dict[str | Path, pd.DataFrame]:
    """The rows of each run directory, read once."""
    from intrabench.evaluation.metric_registry import metric_ranges
    from intrabench.io.result_checks import checked_rows
    from intrabench.io.results import load_results

    return {d: checked_rows(load_results(d), d, metric_ranges()) for d in run_dirs}


def concat_runs(runs: Mapping[str | Path, pd.DataFrame]) -> pd.DataFrame:
    """The rows of several runs (:func:`load_runs`), concatenated."""
    frames = list(runs.values())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def dataset_columns(mapping: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Normalise a column mapping (a dataset key or a list of keys per column)."""
    return {k: [v] if isinstance(v, str) else list(v) for k, v in mapping.items()}
