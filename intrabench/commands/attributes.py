"""``intrabench attributes RUN``: which targets are hard, and for which model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from intrabench.commands._arguments import count, resamples

BY = {
    "model": ["model"],
    "configuration": ["model", "prompter", "refiner"],
    "prompter": ["prompter", "refiner"],
}


def cmd_attributes(args: argparse.Namespace) -> int:
    """``intrabench attributes``: the run's scores stratified by target attributes; returns the exit
    status.

    Args:
        args: The parsed command line: ``run_dir``, ``out`` (default ``RUN_DIR/attributes``),
            ``metric``, ``by`` (the grouping printed), ``n_boot``, ``seed``.

    Returns:
        0 once the CSV files are written; 1 when no attribute splits the targets into groups.

    Raises:
        UserError: The run holds no rows, or no such score (printed as one line, exit 2).
    """
    from intrabench.attributes.analysis import METRICS, analyse, regroup
    from intrabench.attributes.stratify import (
        MIN_PAIRS_CORRELATION,
        MIN_TARGETS_INTERVAL,
        MIN_TARGETS_TERTILES,
        displayed_summary,
        printable_summary,
    )
    from intrabench.errors import UserError
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.io.results import incompleteness_warning, load_results

    metric = METRICS[args.metric]
    if (warning := incompleteness_warning(args.run_dir)) is not None:
        print(warning, file=sys.stderr)
    rows = load_results(args.run_dir)
    if rows.empty:
        raise UserError(f"{args.run_dir} holds no result rows")
    # the files hold every configuration (model x prompter x refiner); the print follows --by
    analysis = analyse(rows, args.run_dir, BY["configuration"], args.n_boot, args.seed)
    if metric not in analysis.targets:
        raise UserError(
            f"--metric {args.metric}: this run has no such score (refinement "
            "metrics need a run with refiners)"
        )
    out = Path(args.out) if args.out else Path(args.run_dir) / "attributes"
    out.mkdir(parents=True, exist_ok=True)
    written = {
        "attribute-targets.csv": analysis.targets,
        "attribute-cuts.csv": analysis.cuts,
        "attribute-groups.csv": analysis.groups,
        "attribute-extremes.csv": analysis.extremes,
    }
    for name, frame in written.items():
        frame.to_csv(out / name, index=False, float_format="%.6g")
    if args.by != "configuration":
        analysis = regroup(analysis, BY[args.by], args.n_boot, args.seed)
    scale = 1.0 if metric.startswith("effort") else 100.0
    summary = printable_summary(analysis.groups, analysis.extremes, metric, scale=scale)
    if summary.empty:
        print(
            "no target attribute splits these targets into groups: tertiles need at least "
            f"{MIN_TARGETS_TERTILES} targets in a dataset (3 per group), see attribute-cuts.csv",
            file=sys.stderr,
        )
        return 1
    shown = displayed_summary(summary)
    n_targets = analysis.targets[["dataset", "case", "target"]].drop_duplicates().shape[0]
    what = f"{args.metric} x{scale:g}" if scale != 1 else args.metric
    print(
        f"{what} by target attribute ({n_targets} targets; groups: each dataset's tertiles "
        f"low/mid/high from {MIN_TARGETS_TERTILES} targets, or no/yes; difference = last "
        f"group - first, bootstrap 95% CI from {MIN_TARGETS_INTERVAL} targets per group; "
        f"rho: Spearman over targets, from {MIN_PAIRS_CORRELATION}). Per {args.by}.\n"
    )
    print(to_markdown(shown, digits=2))
    print(f"\nwritten: {', '.join(str(out / n) for n in written)}", file=sys.stderr)
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench attributes``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    from intrabench.attributes.scores import METRICS  # no pandas: every command builds this

    parser = commands.add_parser(
        "attributes",
        help="results by target attribute (size, shape, contrast...): which "
        "targets are hard, for which model (docs/attributes.md)",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--out", help="folder for the CSV files (default RUN_DIR/attributes)")
    parser.add_argument(
        "--metric",
        choices=sorted(METRICS),
        default="dice",
        help="score to print (all are written): final Dice or NSD, the Dice "
        "AUC over refinement steps, interactions to Dice 0.8",
    )
    parser.add_argument(
        "--by",
        choices=sorted(BY),
        default="model",
        help="printed rows per model (pooling its prompters), per "
        "configuration, or per prompting scheme; the CSV files hold every "
        "configuration",
    )
    parser.add_argument("--n-boot", type=resamples, default=1000, help="bootstrap resamples")
    parser.add_argument("--seed", type=count, default=0, help="bootstrap seed")
    parser.set_defaults(func=cmd_attributes)
