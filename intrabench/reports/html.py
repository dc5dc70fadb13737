"""A self-contained HTML report of one run (images embedded as base64 PNG).

``build_report(run_dir)`` writes ``RUN_DIR/report/report.html`` plus every figure as a PNG file
next to it (for papers). Overlays of image, prediction and ground truth need predictions saved
during the run (``save_predictions: true``); without them the report says so and carries on.
"""

from __future__ import annotations

import base64
import html
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from intrabench import __version__
from intrabench.display_text import escaped
from intrabench.evaluation.aggregate import count_targets, per_case_table
from intrabench.evaluation.episode_metrics import episode_table, success_summary
from intrabench.evaluation.metric_registry import metric_ranges
from intrabench.io.result_checks import checked_rows
from intrabench.io.results import load_results
from intrabench.io.run_directory import run_record
from intrabench.io.run_paths import prediction_file_name, prediction_folder
from intrabench.reports import plots
from intrabench.reports.tables import Layout

log = logging.getLogger(__name__)

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
.wide{overflow-x:auto;max-width:100%}img{height:auto}figure{margin:1em 0}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.5em 1em}
.explain{color:#555;font-size:.92em}img{max-width:100%}
details{margin:.5em 0}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}
"""


@dataclass
class Figure:
    """One figure of the HTML report.

    Attributes:
        name: Its identifier.
        caption: The text under it (also the image's alt text).
        png: The image as PNG bytes, embedded in the page.
    """

    name: str
    caption: str
    png: bytes

    def html(self) -> str:
        """The figure as an HTML ``<figure>`` with the PNG embedded as a data URL, its caption
        escaped.

        Returns:
            The ``<figure>`` element's HTML.
        """
        data = base64.b64encode(self.png).decode("ascii")
        return (
            f'<figure><img alt="{html.escape(self.caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption class='explain'>{html.escape(self.caption)}</figcaption></figure>"
        )


def _config_details(path: Path) -> str:
    """The run's configuration, folded; a note instead when it is missing or larger than a
    config may be (:data:`~intrabench.config.MAX_CONFIG_BYTES`)."""
    from intrabench.config import MAX_CONFIG_BYTES

    if not path.is_file():
        return ""
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        return (
            f"<p class='note'>{html.escape(str(path))} is {size / 1e6:.1f} MB, more than a "
            "config may be: not shown.</p>"
        )
    return (
        "<details><summary>Run configuration</summary><pre>"
        + html.escape(path.read_text(errors="replace"))
        + "</pre></details>"
    )


def _frame_html(frame: pd.DataFrame, digits: int = 2) -> str:
    """A table in a box that scrolls sideways on its own when wider than the page."""
    if frame.empty:
        return "<p>(no results)</p>"
    table = frame.to_html(
        index=False, na_rep="", float_format=lambda v: f"{v:.{digits}f}", border=0, escape=True
    )
    return f"<div class='wide'>{table}</div>"


def prediction_path(
    run_dir: Path,
    dataset: str,
    model: str,
    prompter: str,
    refiner: str,
    seed: int,
    case: str,
    target: str,
) -> Path:
    """Where :class:`intrabench.execution.runner.Runner` saves a target's final prediction.

    Args:
        run_dir: The run directory.
        dataset: The dataset's key.
        model: The model's component key.
        prompter: The prompter's component key.
        refiner: The refiner's component key.
        seed: The configuration's seed.
        case: The case's id.
        target: The target's id.

    Returns:
        The ``.nii.gz`` path (it exists only when the run saved predictions).
    """
    return prediction_folder(
        run_dir, dataset, model, prompter, refiner, seed
    ) / prediction_file_name(case, target)


def configuration_summary(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: hierarchical scores (mean over datasets of the dataset score) of the
    episode summaries each registered metric shows in the report, plus mean effort and model
    time per step (plain means over targets).

    The summaries are each metric's ``report`` ones (Dice initial, final and normalised AUC, NSD
    final x100, HD95 final in mm), at the metric's display scale; metrics that count their missing
    values (HD95 of an empty prediction) get a column of those counts.

    Args:
        episodes: One row per episode
            (:func:`~intrabench.evaluation.episode_metrics.episode_table`).

    Returns:
        One row per (model, prompter, refiner), columns under their display labels, then
        ``interactions`` and ``model s/step``.
    """
    from intrabench.evaluation.aggregate import dataset_statistics, missing_counts
    from intrabench.evaluation.metric_registry import METRICS

    config = ["model", "prompter", "refiner"]
    parts, missing, headers = [], [], {}
    for metric in METRICS.values():
        for summary in metric.report:
            column = f"{metric.name}_{summary}"
            if column not in episodes or episodes[column].isna().all():
                continue
            stats = dataset_statistics(episodes, column, config=config, n_boot=1)
            score = stats.groupby(config)["mean"].mean().rename(column)
            parts.append(score * metric.scale if metric.scale != 1 else score)
            headers[column] = metric.shown_label(summary)
            if metric.count_missing and episodes[column].isna().any():
                # undefined (HD95 of an empty prediction) and left out of its mean: how many
                label = f"{metric.label} missing" if len(metric.report) == 1 else None
                shown = label or f"{metric.shown_label(summary)} missing"
                missing.append(missing_counts(episodes, column, config).rename(shown))
    plain = episodes.groupby(config)[["cumulative_effort", "model_seconds_per_step"]].mean()
    table = pd.concat(parts + missing + [plain], axis=1).reset_index()
    headers.update(cumulative_effort="interactions", model_seconds_per_step="model s/step")
    return table.rename(columns=headers)


def attribute_section(
    run_dir: Path, rows: pd.DataFrame, n_boot: int = 1000
) -> tuple[list[Figure], list[str]]:
    """Figures and HTML of "which targets are hard": final Dice by target attribute group per
    model (see :mod:`intrabench.attributes.stratify`), or a note saying why there is none.

    Args:
        run_dir: The run directory (its target attributes are read or computed).
        rows: The run's result rows.
        n_boot: Bootstrap resamples for the groups' intervals.

    Returns:
        ``(figures, html parts)``; no figure and a note when there are no attributes or too few
        targets.
    """
    from intrabench.attributes import figures as attribute_figures
    from intrabench.attributes.analysis import analyse
    from intrabench.attributes.stratify import (
        MIN_TARGETS_TERTILES,
        collapse,
        displayed_summary,
        printable_summary,
    )
    from intrabench.errors import UserError

    try:
        analysis = analyse(rows, run_dir, ["model"], n_boot=n_boot)
    except UserError as error:
        return [], [f"<p class='note'>No target attributes: {html.escape(str(error))}</p>"]
    per_model = collapse(analysis.targets, ["model"])
    if not attribute_figures.grouped_attributes(per_model):
        return [], [
            "<p class='note'>Too few targets to split them into attribute groups (tertiles "
            f"need at least {MIN_TARGETS_TERTILES} targets in a dataset).</p>"
        ]
    summary = displayed_summary(printable_summary(analysis.groups, analysis.extremes), digits=2)
    figures = [
        Figure(
            "dice-by-attribute-group",
            "Final Dice x100 per target attribute group (each "
            "dataset's tertiles low/mid/high, or no/yes), one box per model over its "
            "targets (mean over the model's prompters).",
            attribute_figures.box_plots(per_model),
        ),
        Figure(
            "dice-vs-attributes",
            "Final Dice x100 against target attributes, one point per model and target.",
            attribute_figures.scatter_plots(per_model),
        ),
    ]
    parts = [
        "<p class='explain'>Every target is measured once (size, shape, holes, contrast with its "
        "surroundings, position; definitions in docs/attributes.md) and split into thirds of "
        "its dataset (low/mid/high) or by presence (no/yes). Difference: last group minus "
        "first, with a bootstrap 95% CI over targets; rho: Spearman's rank correlation of Dice "
        "with the attribute. <code>intrabench attributes RUN_DIR</code> writes every number "
        "as CSV.</p>",
        _frame_html(summary, digits=2),
        *[f.html() for f in figures],
    ]
    return figures, parts


def robustness_section(rows: pd.DataFrame) -> tuple[list[Figure], list[str]]:
    """Figures and HTML of a robustness run (RClicks): its table, IoU against clicks for the
    baseline, G1 and Gn, and each target's mean against std of the first click's IoU; nothing
    when the run is not a robustness run.

    Args:
        rows: The run's result rows.

    Returns:
        ``(figures, html parts)``, both empty for another kind of run.
    """
    from intrabench.clicks import figures as click_figures
    from intrabench.clicks.robustness import robustness_rows, robustness_table

    clicked = robustness_rows(rows)
    if clicked.empty:
        return [], []
    display, _, targets = robustness_table(clicked)
    n_groups = int(clicked["click_groups"].iloc[0])
    figures = [
        Figure(
            "iou-vs-clicks",
            f"IoU x100 after each round of clicks: the baseline "
            f"strategy (centre of the region), the least likely clicks (G1) and the "
            f"most likely (G{n_groups}).",
            click_figures.iou_curves(clicked),
        )
    ]
    if not targets.empty:
        figures.append(
            Figure(
                "iou1-mean-vs-std",
                "One point per target and model: mean and "
                "standard deviation of the first click's IoU over the clicking "
                "groups. High std for its mean: the result depends on where the "
                "person clicks.",
                click_figures.mean_std_scatter(targets),
            )
        )
    parts = [
        "<h2>Robustness to where people click</h2>",
        f"<p class='explain'>Every target was prompted once per clicking group of the "
        f"'{html.escape(str(clicked['clickability'].iloc[0]))}' clickability map: the region's "
        f"voxels sorted by how likely a person clicks them and cut into {n_groups} groups of "
        "equal probability (G1 least likely), and once at the region's centre (the baseline "
        "strategy most benchmarks use). Sample: mean ± std over the groups; SB: an average "
        "user against the baseline; GR: G1 against the last group; HH: the less likely half "
        "against the more likely half, pair by pair (for NoC relative, in %; for IoU-AUC "
        "absolute differences x100, as RClicks' tables); NSR: std over mean of the first "
        "click's IoU, in %. Per dataset the target statistics are averaged over a case's "
        "targets, a class's cases and the dataset's classes, as every table here; RClicks' own "
        "tables take the plain mean over instances instead (<code>intrabench tables</code> "
        "writes that one as robustness-flat.md). Definitions: docs/realistic-clicks.md.</p>",
        _frame_html(display),
        *[f.html() for f in figures],
    ]
    return figures, parts


def time_section(
    run_dir: Path, rows: pd.DataFrame, styles: dict | None = None
) -> tuple[list[Figure], list[str]]:
    """Figures and HTML of time-aware evaluation (docs/time-aware.md): the ``time`` table,
    Dice against accumulated time, and the latency table; nothing for rows without latency.

    Args:
        run_dir: The run directory (its time model and machine are read).
        rows: The run's result rows.
        styles: Colour and line per configuration; None: made from ``rows``.

    Returns:
        ``(figures, html parts)``, both empty without latency columns.
    """
    from intrabench.io.run_directory import run_machine
    from intrabench.timing.figures import time_curve_plot
    from intrabench.timing.latency import has_latency, latency_table
    from intrabench.timing.table import run_time_model, time_table
    from intrabench.timing.waiting import waiting_description

    if not has_latency(rows):
        return [], []
    model = run_time_model(run_dir)
    mode = waiting_description(model, run_machine(run_dir))
    figures = [
        Figure(
            "dice-vs-time",
            "Dice x100 against the clinician's accumulated time "
            "(seconds of interaction from the run's time model plus seconds waiting "
            "for the model), up to the budget; dotted: 60 s.",
            time_curve_plot(
                rows,
                model,
                styles=styles,
                waiting="waiting as measured in this run"
                if model.waiting == "measured"
                else "waiting from the latency table",
            ),
        )
    ]
    parts = [
        "<h2>Quality against the clinician's time</h2>",
        f"<p class='explain'>Each interaction costs the clinician time (a click "
        f"{model.seconds['click']:g} s, a 2D box {model.seconds['box2d']:g} s, a scribble "
        f"{model.seconds['scribble']:g} s, {model.seconds_per_slice_scrolled:g} s per slice "
        f"scrolled) plus the wait for the model. Budget: {model.budget:g} s and at most "
        f"{model.max_interactions} interactions per target; an interaction that would exceed "
        "it is discarded (DAVIS interactive track). AUC-time: area under Dice against time over "
        "the budget; Dice@60s: the curve at 60 s. Definitions: docs/time-aware.md.</p>",
        f"<p class='explain'><b>{html.escape(mode[0].upper() + mode[1:])}.</b></p>",
        _frame_html(time_table(rows, model)),
        *[f.html() for f in figures],
        "<h3>Model latency</h3><p class='explain'>Cold: the case's set-up plus its first "
        "forward pass; warm: every later one, by interaction kind (ms, CUDA synchronised). "
        "Peak memory over the model's cases (MiB).</p>",
        _frame_html(latency_table(rows)),
    ]
    return figures, parts


def ratings_section(run_dir: Path) -> list[str]:
    """HTML of every imported review (``intrabench review import``): mean rating per
    configuration and step, agreement and the rank correlation with Dice; empty without one.

    Args:
        run_dir: The run directory (its ``reviews/*/summary.json`` are read).

    Returns:
        The HTML parts, a heading first; empty without an imported review.
    """
    parts = []
    for summary_path in sorted((run_dir / "reviews").glob("*/summary.json")):
        summary = json.loads(summary_path.read_text())
        table = pd.read_csv(summary_path.parent / "per-configuration.csv")
        if "mean_dice" in table:
            table["mean_dice"] = 100 * table["mean_dice"]
            table = table.rename(columns={"mean_dice": "mean Dice x100"})
        alpha = summary.get("krippendorff_alpha_ordinal")
        rho = (summary.get("spearman_rating_dice") or [None])[0]

        def shown(value: float | None) -> str:
            return "n/a" if value is None or value != value else f"{value:.3f}"

        parts += [
            f"<h3>Review {html.escape(str(summary['review']))}</h3>",
            f"<p class='explain'>{summary['ratings']} ratings (1-10) of {summary['masks']} "
            f"masks by {summary['raters']} rater(s), blinded. Agreement between raters "
            f"(Krippendorff's alpha, ordinal): {shown(alpha)}. Spearman's rho of a "
            f"mask's mean rating with its Dice: {shown(rho)}. CI: bootstrap 95% over "
            "masks.</p>",
            _frame_html(table, digits=2),
        ]
    return (["<h2>Ratings by people</h2>"] + parts) if parts else []


def success_table(episodes: pd.DataFrame, threshold: float = 0.8) -> pd.DataFrame:
    """Interactions to reach Dice ``threshold`` per configuration, in the report's x100 scale:
    success rate in %, the threshold as Dice x100.

    Args:
        episodes: One row per episode.
        threshold: The Dice to reach, on the 0-1 scale.

    Returns:
        One row per configuration, columns under their display names.
    """
    table = success_summary(episodes, threshold)
    table["success_rate"] = 100 * table["success_rate"]
    table["threshold"] = 100 * table["threshold"]
    return table.rename(
        columns={
            "threshold": "Dice x100 to reach",
            "success_rate": "reached %",
            "median_effort": "median interactions",
            "mean_effort_successes": "mean interactions (successes)",
        }
    )


def gallery_section(
    run_dir: Path,
    rows: pd.DataFrame,
    episodes: pd.DataFrame,
    cases: list[str] | None,
    per_model: int,
) -> tuple[list[Figure], list[str]]:
    """Figures and HTML of the failure gallery (:mod:`intrabench.reports.overlays`): the worst
    targets of each model, or the requested cases.

    Args:
        run_dir: The run directory.
        rows: The run's result rows.
        episodes: One row per episode.
        cases: ``dataset/case`` or ``case`` names to draw; None or empty: the worst targets.
        per_model: The most overlays per model.

    Returns:
        ``(figures, html parts)``.
    """
    from intrabench.reports.overlays import gallery

    items, notes = gallery(run_dir, rows, episodes, cases, per_model)
    figures = [Figure(item.name, item.caption, item.png) for item in items]
    what = (
        "the requested cases"
        if cases
        else f"the {per_model} target{'s' if per_model != 1 else ''} of lowest final Dice of "
        "each model (over its prompters, refiners and seeds)"
    )
    parts = [
        "<h2>Failure gallery: the worst targets per model</h2>",
        f"<p class='explain'>Shown: {what}. Axial, coronal and sagittal views through the "
        "target in radiological display (anterior up, the patient's right on the image's "
        "left; letters on the edges), slice indices as canonical voxel indices (z, y, x). "
        "With every step saved, the first step (top) and the last (bottom) are drawn on "
        "the same slices, with every interaction up to that step.</p>",
    ]
    parts += [f"<p class='note'>{note}</p>" for note in notes]
    current = None
    for item, figure in zip(items, figures):
        if item.model != current and not cases:
            current = item.model
            parts.append(f"<h3>{html.escape(current)}</h3>")
        parts.append(figure.html())
    return figures, parts


def summary_tables(
    rows: pd.DataFrame,
    layout: Layout | None,
    metric: str,
    failures: pd.DataFrame,
    n_boot: int = 1000,
) -> list[str]:
    """The report's summary tables as HTML, as ``intrabench tables`` writes them.

    Each score cell (x100) is followed by its 95% percentile-bootstrap interval over the cases
    (:func:`~intrabench.reports.tables.cell_statistics`, the interval of ``statistics.csv``;
    "[n too small (at least 5)]" below 5 cases), a line under each table gives each column's
    n (cases / targets), cells of a dataset the model was trained on carry a dagger, and a
    ``Failed units`` column counts the units of an incomplete run.

    Args:
        rows: The run's result rows.
        layout: How the paper tables are laid out; None: the default.
        metric: The metric the tables aggregate.
        failures: :func:`~intrabench.reports.failed_units.read_failures`' rows.
        n_boot: Bootstrap resamples of the cases for the intervals.

    Returns:
        HTML fragments: a heading, the table and its n line per table, then the line on
        training data.
    """
    from intrabench.reports.failed_units import add_failed_column
    from intrabench.reports.tables import (
        INTERVAL_NOTE,
        cell_statistics,
        cell_texts,
        marked_for_markdown,
        prompter_label,
        tables_with_rows,
        trained_cells,
        training_data_line,
    )

    parts = []
    marked_total = 0
    for _key, title, table, chosen in tables_with_rows(rows, layout, metric):
        cells = cell_statistics(table, chosen, layout, metric, n_boot=n_boot)
        suffixes, n_line = cell_texts(table, cells) if not cells.empty else ({}, "")
        if "Model" in table and "Prompter" in table:
            table = add_failed_column(
                table, failures, "Model", "Prompter", lambda p, r: prompter_label(p, r, layout)
            )
        marked = trained_cells(table, rows, layout)
        marked_total += len(marked)
        shown = (
            marked_for_markdown(table, marked, suffixes=suffixes) if marked or suffixes else table
        )
        parts.append(f"<h3>{html.escape(title)}</h3>{_frame_html(shown)}")
        if suffixes:
            said = "; ".join(part for part in (INTERVAL_NOTE, n_line) if part)
            parts.append(f"<p class='explain'>{html.escape(said)}</p>")
    parts.append(f"<p class='explain'>{html.escape(training_data_line(marked_total))}</p>")
    return parts


def build_report(
    run_dir: str | Path,
    out_dir: str | Path | None = None,
    metric: str = "dice",
    cases: list[str] | None = None,
    max_overlays: int = 3,
    layout: Layout | None = None,
    n_boot: int = 1000,
) -> Path:
    """Write ``report.html`` (self-contained) and the figures as PNG into ``out_dir``.

    Layout: the figures first, then the summary tables and the sections of the run's kind
    (time, robustness, attributes, ratings), the failure gallery, and the long per-case table
    last. Every overlap score is shown x100; one style per configuration throughout.

    Args:
        run_dir: The run directory.
        out_dir: Where the report goes; None: ``RUN_DIR/report``.
        metric: The metric of the curves and tables (``"dice"``).
        cases: ``dataset/case`` or ``case`` names for the failure gallery; None: the worst
            targets of each model.
        max_overlays: Targets drawn per model in the failure gallery.
        layout: How the paper tables are laid out (``--layout``); None: the default.
        n_boot: Bootstrap resamples of the cases for the intervals.

    Returns:
        The path of ``report.html``.

    Raises:
        UserError: The run directory is missing or holds no results.
    """
    run_dir = Path(run_dir)
    out = Path(out_dir) if out_dir else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    rows = checked_rows(load_results(run_dir), run_dir, metric_ranges())
    episodes = episode_table(rows)
    run_info = run_record(run_dir)
    if run_info is None:
        log.warning(
            "%s is damaged (not JSON): the report leaves out the software versions",
            run_dir / "run.json",
        )
        run_info = {}
    name = str(rows["run"].iloc[0]) if not rows.empty else run_dir.name
    refined = rows[rows["refiner"] != "none"]
    styles = plots.configuration_styles(rows)
    shown_metric = plots.metric_name(metric)

    figures: list[Figure] = [
        Figure(
            "dice-vs-interactions-per-dataset",
            f"{shown_metric} x100 against the interactions "
            "it took (mean cumulative per target, log scale), one panel per dataset, one "
            "point per refinement step; bands: 95% bootstrap confidence intervals over "
            "cases. Up and left is better.",
            plots.dataset_effort_curves(rows, metric, n_boot=n_boot, styles=styles),
        )
    ]
    if not refined.empty:
        figures.append(
            Figure(
                "dice-vs-iteration",
                f"{shown_metric} x100 per refinement iteration "
                "(mean over datasets). Dashed: scribble refinement. Higher is "
                "better.",
                plots.iteration_curves(refined, metric, styles=styles),
            )
        )
    figures.append(
        Figure(
            "dice-vs-effort",
            f"{shown_metric} x100 against the number of human "
            "interactions it took (mean per target, mean over datasets, log "
            "scale). Up and left is better.",
            plots.effort_curves(rows, metric, styles=styles),
        )
    )
    figures.append(
        Figure(
            "dice-per-dataset",
            f"Final {shown_metric} x100 per dataset; error bars are "
            "95% bootstrap confidence intervals over cases (a dataset with a "
            "single case has none: 'n=1' above its bar).",
            plots.dataset_bars(rows, metric, n_boot=n_boot, styles=styles),
        )
    )
    gallery_figures, gallery_parts = gallery_section(run_dir, rows, episodes, cases, max_overlays)
    attribute_figures, attribute_parts = attribute_section(run_dir, rows, n_boot=n_boot)
    robustness_figures, robustness_parts = robustness_section(rows)
    time_figures, time_parts = time_section(run_dir, rows, styles)
    from intrabench.reports.people import report_section as people_section

    found_people, people_parts = people_section(run_dir, rows)
    people_figures = [Figure(*figure) for figure in found_people]
    people_parts[1:1] = [figure.html() for figure in people_figures]
    from intrabench.reports.comparisons import report_section

    found, comparison_parts = report_section(rows, metric, n_boot=n_boot)
    comparison_figures = [Figure(*figure) for figure in found]
    comparison_parts += [figure.html() for figure in comparison_figures]
    for figure in (
        figures
        + gallery_figures
        + attribute_figures
        + robustness_figures
        + time_figures
        + comparison_figures
        + people_figures
    ):
        (out / f"{figure.name}.png").write_bytes(figure.png)

    last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
    final = rows[rows["step"] == last]
    cases_table = per_case_table(final, metric, config=("model", "prompter", "refiner"))
    cases_table[metric] = 100 * cases_table[metric]
    cases_table = cases_table.rename(columns={metric: f"final {metric} x100"})
    from intrabench.reports.failed_units import read_failures, warning_line

    failures = read_failures([run_dir])
    summary_parts = []
    if (line := warning_line(failures)) is not None:
        summary_parts.append(f"<p class='explain'><b>{html.escape(line)}</b></p>")
    summary_parts += summary_tables(rows, layout, metric, failures, n_boot)
    success = success_table(episodes, 0.8) if not refined.empty else pd.DataFrame()
    versions = run_info.get("versions") if isinstance(run_info.get("versions"), dict) else {}

    body = [
        f"<h1>IntraBench report: {html.escape(name)}</h1>",
        f"<p class='explain'>Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by IntraBench "
        f"{__version__} from <code>{html.escape(str(run_dir))}</code>. {len(rows)} result rows, "
        f"{count_targets(rows) if not rows.empty else 0} targets in "
        f"{rows['case'].nunique() if not rows.empty else 0} images, segmented in "
        f"{len(episodes)} episodes (a target under one model, prompter, refiner and seed).</p>",
        "<h2>How to read this page</h2>",
        "<p>A simulated clinician prompts a model (clicks, boxes or scribbles) to outline one "
        "structure (a lesion or an organ) in a 3D scan. <b>Dice</b> measures how much the model's "
        "outline overlaps the expert's: 100 is a perfect match, 0 no overlap; every overlap "
        "score on this page (Dice, NSD, IoU) is on that 0-100 scale. Scores are averaged "
        "per image, then over images, then over the kinds of structure of a dataset. "
        "<b>Interactions</b> count the clinician's effort (a click 1, a 2D box 2, a 3D box 3, a "
        "scribble 3; 'X' means once per slice). In refinement runs the clinician corrects the "
        "result several times (iterations). Each configuration (model | prompter + refiner) "
        "keeps its colour and marker in every figure.</p>",
        "<h2>Figures</h2>",
        *[f.html() for f in figures],
        "<h2>Summary</h2>",
        "<p class='explain'>Scores x100 per dataset (columns) for each way of prompting "
        "(rows). 'Average' is the mean over datasets.</p>",
        *summary_parts,
        "<h3>Per configuration</h3>",
        "<p class='explain'>Mean over datasets, x100. AUC (norm.): the area under the "
        "Dice curve over the refinement steps divided by its maximum, as in the CVPR 2025 "
        "challenge. Interactions: mean total effort per target. HD95 in mm (lower is "
        "better).</p>",
        _frame_html(configuration_summary(episodes), digits=1),
    ]
    if not success.empty:
        body += [
            "<h2>Interactions to reach Dice 80</h2>",
            "<p class='explain'>Reached: share of targets that got to Dice 80 (x100 scale). "
            "Median interactions counts targets that never got there as failures (infinite "
            "effort).</p>",
            _frame_html(success, digits=1),
        ]
    body += comparison_parts
    body += people_parts
    body += time_parts
    body += robustness_parts
    body += ["<h2>Which targets are hard, for which model</h2>", *attribute_parts]
    body += ratings_section(run_dir)
    body += gallery_parts
    body += [
        "<h2>Per-case results</h2>",
        f"<p class='explain'>One row per image and configuration: the final {metric} x100 "
        "averaged over the image's targets of each class, then over classes.</p>",
        f"<details><summary>{len(cases_table)} rows</summary>"
        + _frame_html(cases_table, digits=1)
        + "</details>",
    ]
    body += [
        "<h2>Run details</h2>",
        "<details><summary>Software versions</summary>"
        + _frame_html(pd.DataFrame({"package": list(versions), "version": list(versions.values())}))
        + "</details>",
    ]
    body.append(_config_details(run_dir / "config.yaml"))
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>IntraBench report: {html.escape(name)}</title><style>{STYLE}</style></head>"
        "<body>" + "\n".join(body) + "</body></html>"
    )
    # names from the data (cases, targets, labels) with a right-to-left override or another
    # hidden character are shown escaped ('\u202e'), not obeyed: 'evil' never reads 'live'
    page = escaped(page, keep="\n\r\t")
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
