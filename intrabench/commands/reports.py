"""``intrabench tables``, ``intrabench report`` and ``intrabench compare``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from intrabench.commands._arguments import count, positive_number, resamples
from intrabench.display_text import spreadsheet_safe


def cmd_tables(args: argparse.Namespace) -> int:
    """``intrabench tables``: the paper-style tables of one or more runs; returns the exit status.

    Args:
        args: The parsed command line: ``run_dirs``, ``out`` (default
            :func:`default_tables_folder`), ``layout``, ``metric``, ``scale`` (100: x100),
            ``missing_value``, ``exclude_training_data``, ``split_training_data``,
            ``noc_metric`` and ``noc_threshold``, ``latency_table``, ``n_boot``.

    Returns:
        0 once the tables are written; 1 when the runs hold no rows or no table could be built.

    Raises:
        UserError: A run is missing, the metric is not in the results, or the layout is not a
            layout file.
    """
    from intrabench.evaluation.metric_registry import require_metric
    from intrabench.io.results import incompleteness_warning
    from intrabench.reports.tables import (
        Layout,
        cell_statistics,
        concat_runs,
        load_runs,
        tables_with_rows,
        write_table,
    )

    for run_dir in args.run_dirs:
        if (warning := incompleteness_warning(run_dir)) is not None:
            print(warning, file=sys.stderr)
    runs = load_runs(args.run_dirs)
    rows = concat_runs(runs)
    rows, left_out = _without_training_data(rows, args.exclude_training_data)
    from intrabench.reports.failed_units import read_failures, warning_line

    failures = read_failures(args.run_dirs)
    if rows.empty:
        print(
            f"no result rows in {', '.join(map(str, args.run_dirs))}: nothing finished"
            + (
                f" ({len(failures)} work unit(s) failed, see failures.csv)"
                if len(failures)
                else ""
                if any(incompleteness_warning(r) for r in args.run_dirs)
                else " (run it first, or let it finish)"
            ),
            file=sys.stderr,
        )
        return 1
    if (line := warning_line(failures)) is not None:
        print(line)
    require_metric(
        rows.columns, args.metric, rows.select_dtypes("number").columns if len(rows) else None
    )
    layout = Layout.load(args.layout) if args.layout else None
    built = tables_with_rows(rows, layout, args.metric, args.scale, args.missing_value)
    if args.split_training_data:
        built += _training_data_tables(rows, layout, args)
    if not built:
        print(
            "no table could be built from these runs (are the run names those the layout lists?)",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out) if args.out else default_tables_folder(args.run_dirs)
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.reports.comparisons import incomplete_note
    from intrabench.reports.failed_units import add_failed_column
    from intrabench.reports.tables import prompter_label, trained_cells

    # an incomplete run is marked in every file: the title, the caption and a CSV column
    note = incomplete_note([incompleteness_warning(r) for r in args.run_dirs])
    marked_total = 0
    for name, title, table, chosen in built:
        # n and the 95% bootstrap interval of every cell, the intervals of statistics.csv
        cells = cell_statistics(
            table, chosen, layout, args.metric, args.scale, args.missing_value, args.n_boot
        )
        if "Model" in table and "Prompter" in table:
            table = add_failed_column(
                table, failures, "Model", "Prompter", lambda p, r: prompter_label(p, r, layout)
            )
        marked = trained_cells(table, rows, layout)
        marked_total += len(marked)
        shown_title = f"{note} {title or name}" if note else title
        paths = write_table(table, out, name, shown_title, marked, cells)
        if note:
            import pandas as pd

            written = pd.read_csv(paths[2], keep_default_na=False, dtype=str)
            written.assign(note=note).to_csv(paths[2], index=False)
        print(f"## {title or name}\n\n{to_markdown(table)}\n")
        if marked:
            print(f"{len(marked)} cell(s) marked \u2020: the model was trained on that dataset\n")
        print(f"written: {', '.join(str(p) for p in paths)}\n", file=sys.stderr)
    from intrabench.reports.tables import training_data_line

    print(training_data_line(marked_total, left_out))
    from intrabench.evaluation.metric_registry import PROTOCOLS

    for protocol in (name for name, found in PROTOCOLS.items() if found.challenge_tables):
        if "protocol" in rows and (rows["protocol"] == protocol).any():
            _write_cvpr25_tables(rows[rows["protocol"] == protocol], out, protocol)
    if "click_group" in rows and rows["click_group"].notna().any():
        _write_robustness_tables(rows, out, args.noc_metric, args.noc_threshold)
    _write_time_tables(runs, out, args.latency_table)
    _write_people_tables(runs, out)
    from intrabench.evaluation.aggregate import dataset_statistics

    statistics = dataset_statistics(
        rows,
        args.metric,
        config=("run", "model", "prompter", "refiner", "step"),
        n_boot=args.n_boot,
        missing_value=args.missing_value,
    )
    spreadsheet_safe(statistics, escape=True).to_csv(
        out / "statistics.csv", index=False, float_format="%.6f"
    )
    print(
        f"per-dataset mean, median, std, quartiles and bootstrap 95% CI over cases: "
        f"{out / 'statistics.csv'}",
        file=sys.stderr,
    )
    _write_comparisons(rows, out, args)
    return 0


def _write_comparisons(rows, out: Path, args: argparse.Namespace) -> None:
    """The paired comparisons of every two configurations and the rank distributions
    (``comparisons`` and ``ranks`` .md/.tex/.csv, docs/evaluation.md); across runs a
    configuration is (run, model, prompter, refiner)."""
    from intrabench.evaluation.aggregate import fill_missing, to_markdown
    from intrabench.io.results import incompleteness_warning
    from intrabench.reports.comparisons import (
        comparison_results,
        incomplete_note,
        write_comparison_tables,
    )

    config = (("run",) if rows["run"].nunique() > 1 else ()) + ("model", "prompter", "refiner")
    scored = fill_missing(rows, args.metric, args.missing_value)
    comparisons, scopes = comparison_results(scored, args.metric, config, args.n_boot)
    note = incomplete_note([incompleteness_warning(r) for r in args.run_dirs])
    _, ranks, paths = write_comparison_tables(
        comparisons, scopes, out, args.metric, args.scale, args.n_boot, note, config
    )
    from intrabench.reports.supplement import write_supplement

    supplement = write_supplement(scored, out, args.metric, args.scale, args.n_boot, note)
    print(f"per-class and per-target tables: {', '.join(map(str, supplement))}", file=sys.stderr)
    if not paths:
        return
    tested = comparisons["p_holm"].notna()
    print(
        f"## Paired comparisons: {len(comparisons)} pairs x datasets, {int(tested.sum())} with "
        f"a test, {int((comparisons['p_holm'] < 0.05).sum())} with a Holm-adjusted p < 0.05 "
        f"(the table: {out / 'comparisons.md'})\n"
    )
    print(
        f"## Rank stability ({args.n_boot} bootstrap resamples of the cases)\n\n"
        f"{to_markdown(ranks)}\n"
    )
    print(f"written: {', '.join(map(str, paths))}\n", file=sys.stderr)


def _without_training_data(rows, exclude: bool):
    """``rows`` without those of (model, dataset) pairs the model was trained on when
    ``exclude`` (``--exclude-training-data``), and how many (model, dataset) pairs that left out."""
    from intrabench.training_data import COLUMN

    if not exclude or COLUMN not in rows:
        return rows, 0
    trained = rows[COLUMN].eq("yes")
    pairs = rows.loc[trained, ["model", "dataset"]].drop_duplicates()
    return rows[~trained].reset_index(drop=True), len(pairs)


def default_tables_folder(run_dirs: list[str]) -> Path:
    """Where ``tables`` writes without ``--out``: inside the run (``RUN_DIR/tables``, beside
    ``RUN_DIR/report``) for one run; ``./intrabench-tables`` for tables across several runs.

    Args:
        run_dirs: The run directories given.

    Returns:
        The folder.
    """
    return Path(run_dirs[0]) / "tables" if len(run_dirs) == 1 else Path("intrabench-tables")


def _training_data_tables(rows, layout, args: argparse.Namespace) -> list:
    """Each table again for the rows of each ``in_training_data`` value (yes / no / unknown:
    was the case's dataset in the model's training data)."""
    from intrabench.reports.tables import tables_with_rows
    from intrabench.training_data import split_rows

    built = []
    for value, part in split_rows(rows):
        for name, title, table, chosen in tables_with_rows(
            part, layout, args.metric, args.scale, args.missing_value
        ):
            built.append(
                (
                    f"{name}-training-data-{value}",
                    f"{title or name}: dataset in the model's training data: {value}",
                    table,
                    chosen,
                )
            )
    return built


def _write_cvpr25_tables(rows, out: Path, protocol: str = "cvpr25") -> None:
    """The challenge's per-image CSV and its leaderboard means for ``protocol: cvpr25`` rows
    (``cvpr25-corrected-*.csv`` for the corrected variant's)."""
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.evaluation.cvpr25 import image_table, leaderboard

    images = image_table(rows)
    board = leaderboard(images)
    out.mkdir(parents=True, exist_ok=True)
    image_file, board_file = out / f"{protocol}-images.csv", out / f"{protocol}-leaderboard.csv"
    spreadsheet_safe(images, escape=True).to_csv(image_file, index=False, float_format="%.6f")
    spreadsheet_safe(board, escape=True).to_csv(board_file, index=False, float_format="%.6f")
    print(
        f"## CVPR 2025 challenge metrics (protocol: {protocol}), mean over images\n\n"
        f"{to_markdown(board, digits=4)}\n"
    )
    print(f"written: {image_file}, {board_file}\n", file=sys.stderr)


def _write_robustness_tables(rows, out: Path, noc_metric: str, threshold: float) -> None:
    """The robustness table of robustness runs (RClicks tables 9-11), its per-dataset values
    and per-target statistics (docs/realistic-clicks.md)."""
    from intrabench.clicks.robustness import AVERAGING, robustness_table
    from intrabench.evaluation.aggregate import to_markdown

    for run, part in rows[rows["click_group"].notna()].groupby("run", sort=True):
        base = "robustness" if rows["run"].nunique() == 1 else f"robustness-{run}"
        out.mkdir(parents=True, exist_ok=True)
        groups = int(part["click_groups"].iloc[0])
        # both averages: IntraBench's own (as every table) and RClicks' flat one, each labelled
        for averaging, stem in (("hierarchical", base), ("flat", f"{base}-flat")):
            display, long, targets = robustness_table(part, noc_metric, threshold, averaging)
            title = (
                f"Robustness to where people click ({run}: {part['clickability'].iloc[0]} "
                f"map, {groups} clicking groups), mean over datasets; per dataset: "
                f"{AVERAGING[averaging]}"
            )
            (out / f"{stem}.md").write_text(
                f"{title}\n\n{to_markdown(display)}\n", encoding="utf-8"
            )
            spreadsheet_safe(long, escape=True).to_csv(
                out / f"{stem}-datasets.csv", index=False, float_format="%.6f"
            )
            written = [out / f"{stem}.md", out / f"{stem}-datasets.csv"]
            if averaging == "hierarchical":
                spreadsheet_safe(targets, escape=True).to_csv(
                    out / f"{base}-targets.csv", index=False, float_format="%.6f"
                )
                written.append(out / f"{base}-targets.csv")
            print(f"## {title}\n\n{to_markdown(display)}\n")
            print(f"written: {', '.join(map(str, written))}\n", file=sys.stderr)


def _write_time_tables(runs: dict, out: Path, latency_table_file: str | None = None) -> None:
    """The ``time`` table (quality against the clinician's accumulated time, per run's time
    model; ``latency_table_file``: wait as that latency table says instead) and the
    ``latency`` table of the runs (run directory -> rows) whose rows carry latencies."""
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.io.run_directory import run_machine
    from intrabench.timing.latency import has_latency, latency_table
    from intrabench.timing.table import run_time_model, time_summary, time_table
    from intrabench.timing.waiting import waiting_description

    for run_dir, part in runs.items():
        if part.empty or not has_latency(part):
            continue
        model = run_time_model(run_dir)
        if latency_table_file:
            model = model.waiting_from(latency_table_file)
        mode = waiting_description(model, run_machine(run_dir))
        out.mkdir(parents=True, exist_ok=True)
        name = str(part["run"].iloc[0])
        stem = "" if len(runs) == 1 else f"-{name}"
        display = time_table(part, model)
        (out / f"time{stem}.md").write_text(f"{mode}\n\n{to_markdown(display)}\n", encoding="utf-8")
        spreadsheet_safe(time_summary(part, model), escape=True).to_csv(
            out / f"time{stem}.csv", index=False, float_format="%.6f"
        )
        latency = latency_table(part)
        (out / f"latency{stem}.md").write_text(to_markdown(latency) + "\n", encoding="utf-8")
        spreadsheet_safe(latency, escape=True).to_csv(
            out / f"latency{stem}.csv", index=False, float_format="%.4f"
        )
        print(
            f"## Quality against the clinician's time ({name}: budget {model.budget:g} s per "
            f"target, at most {model.max_interactions} interactions), mean over datasets\n\n"
            f"{mode}\n\n{to_markdown(display)}\n"
        )
        print(f"## Model latency ({name})\n\n{to_markdown(latency)}\n")
        print(
            f"written: {out / f'time{stem}.md'}, {out / f'time{stem}.csv'}, "
            f"{out / f'latency{stem}.md'}, {out / f'latency{stem}.csv'}\n",
            file=sys.stderr,
        )


def _write_people_tables(runs: dict, out: Path) -> None:
    """The people-beside-the-simulated-user tables of the runs with people's sessions
    (``RUN/sessions/*.jsonl``; docs/measuring-people.md)."""
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.reports.people import people_title, run_comparison, write_people_tables

    for run_dir, part in runs.items():
        comparison = run_comparison(run_dir, part)
        if comparison is None:
            continue
        stem = out if len(runs) == 1 else out / f"people-{Path(run_dir).name}"
        paths = write_people_tables(comparison, stem)
        for line in comparison.problems:
            print(f"warning: {line}", file=sys.stderr)
        print(f"{people_title(comparison)}\n\n{to_markdown(comparison.table())}\n")
        print(f"written: {', '.join(str(p) for p in paths)}\n", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    """``intrabench report``: a run's HTML report with its figures; returns the exit status.

    Args:
        args: The parsed command line: ``run_dir``, ``out`` (default ``RUN_DIR/report``),
            ``metric``, ``case`` (cases for the failure gallery), ``max_overlays``, ``layout``.

    Returns:
        0 once the report is written; 1 when the run has no result rows yet.

    Raises:
        UserError: A case named is not in the run, or the metric is not in the results.
    """
    from intrabench.evaluation.metric_registry import require_metric
    from intrabench.io.results import has_rows, incompleteness_warning, result_columns
    from intrabench.reports.html import build_report
    from intrabench.reports.tables import Layout

    if (warning := incompleteness_warning(args.run_dir)) is not None:
        print(warning, file=sys.stderr)
    if not has_rows(args.run_dir):
        print(
            f"no result rows in {args.run_dir}: nothing finished, no report to build",
            file=sys.stderr,
        )
        return 1
    if args.case:
        _check_cases(args.run_dir, args.case)
    require_metric(result_columns(args.run_dir), args.metric)
    layout = Layout.load(args.layout) if args.layout else None
    path = build_report(
        args.run_dir,
        args.out,
        metric=args.metric,
        cases=args.case or None,
        max_overlays=args.max_overlays,
        layout=layout,
    )
    print(f"report written to {path} (open it in a web browser); figures as PNG in {path.parent}")
    return 0


def _check_cases(run_dir: str, wanted: list[str]) -> None:
    """UserError naming the ``--case`` values that are no case of the run (``DATASET/CASE``
    or ``CASE``): the report was written without them and without a word."""
    from intrabench.errors import UserError
    from intrabench.io.results import load_results

    pairs = load_results(run_dir)[["dataset", "case"]].drop_duplicates()
    known = {f"{d}/{c}" for d, c in zip(pairs["dataset"], pairs["case"])} | set(pairs["case"])
    unknown = [name for name in wanted if name not in known]
    if unknown:
        shown = sorted({f"{d}/{c}" for d, c in zip(pairs["dataset"], pairs["case"])})
        raise UserError(
            f"--case {', '.join(unknown)}: not a case of {run_dir} (its cases: "
            f"{', '.join(shown[:5])}{' ...' if len(shown) > 5 else ''})"
        )


def cmd_compare(args: argparse.Namespace) -> int:
    """Paired comparisons (:mod:`intrabench.evaluation.paired`, as ``tables`` writes them) of
    configurations of two runs, or of two configurations (``--a``, ``--b``) of one run or two,
    on the x100 scale.

    Args:
        args: The parsed command line: ``run_a``, ``run_b`` (optional), ``a`` and ``b``
            (``MODEL/PROMPTER[/REFINER]``), ``metric``, ``n_boot``, ``seed``, ``out`` (a folder
            for the CSV files; None: printed only).

    Returns:
        0 once the comparison is printed; 1 when the configurations share no case.

    Raises:
        UserError: As :func:`compare_pairs`, or the metric is not in the results.
    """
    import pandas as pd

    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.evaluation.metric_registry import require_metric
    from intrabench.evaluation.paired import paired_cases, paired_comparisons
    from intrabench.io.results import load_results
    from intrabench.reports.comparisons import comparison_csv, comparison_display

    sources = {"A": load_results(args.run_a)}
    if args.run_b:
        sources["B"] = load_results(args.run_b)
    for rows in sources.values():
        require_metric(rows.columns, args.metric)
    rows = pd.concat(
        [part.assign(source=name) for name, part in sources.items()], ignore_index=True
    )
    pairs = compare_pairs(rows, args)
    config = ("source", "model", "prompter", "refiner")
    summary = paired_comparisons(
        rows, args.metric, config=config, pairs=pairs, n_boot=args.n_boot, seed=args.seed
    )
    if summary.empty:
        print("the two configurations have no case in common to compare", file=sys.stderr)
        return 1
    runs = f"A = {args.run_a}" + (f"\nB = {args.run_b}" if args.run_b else " (both sides)")
    print(
        f"{runs}\nFinal-step {args.metric} x100 of each configuration (run / model / "
        f"prompter / refiner); B - A with {args.n_boot} paired bootstrap resamples of the "
        "cases (95% CI), Wilcoxon signed-rank p on case scores, Holm-corrected over the pairs "
        "of each dataset.\n"
    )
    print(to_markdown(comparison_display(summary), digits=2))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        per_case = paired_cases(rows, args.metric, config=config, pairs=pairs)
        for column in ("score_A", "score_B", "difference"):
            per_case[column] = 100 * per_case[column]
        per_case = per_case.rename(
            columns={"score_A": "A x100", "score_B": "B x100", "difference": "B - A x100"}
        )
        spreadsheet_safe(comparison_csv(summary), escape=True).to_csv(
            out / "compare-summary.csv", index=False
        )
        spreadsheet_safe(per_case, escape=True).to_csv(out / "compare-per-case.csv", index=False)
        print(
            f"\nwritten: {out / 'compare-summary.csv'}, {out / 'compare-per-case.csv'}",
            file=sys.stderr,
        )
    return 0


def _configuration(text: str, option: str, rows) -> tuple[str, str, str]:
    """``MODEL/PROMPTER[/REFINER]`` (refiner default ``none``) of ``rows``, or UserError naming
    the configurations there are."""
    from intrabench.errors import UserError
    from intrabench.wording import listed

    parts = text.split("/")
    if len(parts) == 2:
        parts.append("none")
    known = sorted(
        {"/".join(map(str, c)) for c in rows.groupby(["model", "prompter", "refiner"]).groups}
    )
    if len(parts) != 3 or "/".join(parts) not in known:
        raise UserError(
            f"{option} {text}: not a configuration (MODEL/PROMPTER[/REFINER]) of the "
            f"run; its configurations: {listed(known, limit=8)}"
        )
    return parts[0], parts[1], parts[2]


def compare_pairs(rows, args: argparse.Namespace) -> list[tuple[tuple, tuple]]:
    """The (A, B) pairs of (source, model, prompter, refiner) ``compare`` tests: ``--a`` against
    ``--b``; without them every configuration both runs have, or the one of each run when each
    has one.

    Args:
        rows: Both runs' rows, with a ``source`` column (``"A"``, ``"B"``).
        args: The parsed command line (``run_b``, ``a``, ``b``).

    Returns:
        The pairs, each side ``(source, model, prompter, refiner)``.

    Raises:
        UserError: Only one of ``--a`` and ``--b``, a configuration not in its run, or nothing
            left to pair.
    """
    from intrabench.errors import UserError

    side_b = "B" if args.run_b else "A"
    if args.a or args.b:
        if not (args.a and args.b):
            raise UserError("give both --a and --b (MODEL/PROMPTER[/REFINER]), or neither")
        a = _configuration(args.a, "--a", rows[rows["source"] == "A"])
        b = _configuration(args.b, "--b", rows[rows["source"] == side_b])
        return [(("A", *a), (side_b, *b))]
    if not args.run_b:
        raise UserError(
            "comparing two configurations of one run needs --a and --b "
            "(MODEL/PROMPTER[/REFINER], e.g. --a litemedsam/box-3d --b "
            "litemedsam/box-per-slice)"
        )
    groups = {
        name: list(part.groupby(["model", "prompter", "refiner"]).groups)
        for name, part in rows.groupby("source")
    }
    shared = [c for c in groups["A"] if c in set(groups["B"])]
    if shared:
        return [(("A", *c), ("B", *c)) for c in shared]
    if len(groups["A"]) == 1 and len(groups["B"]) == 1:
        return [(("A", *groups["A"][0]), ("B", *groups["B"][0]))]
    raise UserError(
        "the two runs share no configuration: name the two to compare with --a "
        "and --b (MODEL/PROMPTER[/REFINER])"
    )


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add the reporting subcommands (heavy imports happen inside the command functions).

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    from intrabench.evaluation.metric_registry import metrics_with  # declarations, no numpy

    #: NoC's metrics: those the robustness summaries take, RClicks' IoU first
    noc_metrics = sorted((m.name for m in metrics_with("robustness")), key=lambda n: n != "iou")
    tables = commands.add_parser(
        "tables", help="the paper's result tables (Markdown, LaTeX, CSV) from run directories"
    )
    tables.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    tables.add_argument(
        "--out",
        help="folder for .md/.tex/.csv files (default: RUN_DIR/tables "
        "for one run, as report writes RUN_DIR/report; "
        "./intrabench-tables for several runs)",
    )
    tables.add_argument(
        "--layout",
        help="table layout YAML (e.g. configs/paper/tables.yaml): "
        "dataset columns, display names, runs per table",
    )
    tables.add_argument("--metric", default="dice", help="column of results to tabulate")
    tables.add_argument(
        "--scale", type=positive_number, default=100.0, help="multiply scores (default 100)"
    )
    tables.add_argument(
        "--missing-value",
        type=float,
        metavar="VALUE",
        help="substitute VALUE for missing values before averaging (HD95 of an "
        "empty prediction is NaN; e.g. the images' diagonal in mm); default: "
        "leave them out and count them in a Missing column",
    )
    tables.add_argument(
        "--exclude-training-data",
        action="store_true",
        help="leave out every (model, dataset) pair the model was trained on "
        "(model cards' training_data); by default such cells are marked "
        "with a dagger",
    )
    tables.add_argument(
        "--split-training-data",
        action="store_true",
        help="each table again per in_training_data value (was the case's "
        "dataset in the model's training data: yes / no / unknown / n/a)",
    )
    tables.add_argument(
        "--noc-metric",
        choices=noc_metrics,
        default="iou",
        help="robustness runs: NoC counts rounds to this metric (default iou)",
    )
    tables.add_argument(
        "--noc-threshold",
        type=float,
        choices=(0.8, 0.85, 0.9),
        default=0.9,
        help="robustness runs: NoC's threshold (default 0.9, as RClicks)",
    )
    tables.add_argument(
        "--latency-table",
        metavar="FILE",
        help="time table: wait for each model as this latency table says "
        "(written by 'intrabench latency RUN --save FILE'), not as "
        "measured in the run",
    )
    tables.add_argument(
        "--n-boot",
        type=resamples,
        default=1000,
        help="bootstrap resamples of the cases for every interval: the tables' cells, "
        "statistics.csv, the comparison and rank tables (default 1000)",
    )
    tables.set_defaults(func=cmd_tables)

    report = commands.add_parser("report", help="a self-contained HTML report of one run")
    report.add_argument("run_dir", metavar="RUN_DIR")
    report.add_argument("--out", help="folder for report.html and PNGs (default RUN_DIR/report)")
    report.add_argument("--metric", default="dice")
    report.add_argument(
        "--case",
        action="append",
        metavar="DATASET/CASE",
        help="case to draw (repeatable); default: the worst targets of each model",
    )
    report.add_argument(
        "--max-overlays",
        type=count,
        default=3,
        help="targets drawn per model in the failure gallery (default 3)",
    )
    report.add_argument("--layout", help="table layout YAML for the summary tables")
    report.set_defaults(func=cmd_report)

    compare = commands.add_parser(
        "compare",
        help="paired differences, Wilcoxon p and effect size (x100) between two "
        "runs' configurations or any two configurations (--a, --b)",
    )
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument(
        "run_b",
        metavar="RUN_B",
        nargs="?",
        help="second run (default: --a and --b are both of RUN_A)",
    )
    compare.add_argument(
        "--a", metavar="MODEL/PROMPTER[/REFINER]", help="configuration A (of RUN_A)"
    )
    compare.add_argument(
        "--b",
        metavar="MODEL/PROMPTER[/REFINER]",
        help="configuration B (of RUN_B, or of RUN_A without RUN_B)",
    )
    compare.add_argument("--metric", default="dice")
    compare.add_argument(
        "--n-boot", type=resamples, default=2000, help="bootstrap resamples (default 2000)"
    )
    compare.add_argument("--seed", type=count, default=0)
    compare.add_argument("--out", help="folder for compare-summary.csv and compare-per-case.csv")
    compare.set_defaults(func=cmd_compare)
