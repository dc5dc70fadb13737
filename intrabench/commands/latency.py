"""``intrabench latency RUN... [--save FILE]``: the models' latency, and a latency table for
reproducible time-aware numbers (``time_model: {waiting: table, latency_table: FILE}``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_latency(args: argparse.Namespace) -> int:
    """``intrabench latency``: the measured model latencies of runs as a table; returns the exit
    status.

    Args:
        args: The parsed command line: ``run_dirs``, ``save`` (a YAML file for the latency
            table; None: printed only).

    Returns:
        0 once the table is printed (and saved).

    Raises:
        UserError: The runs hold no measured latencies.
    """
    import pandas as pd

    from intrabench.errors import UserError
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.io.machine import machine_text
    from intrabench.io.results import load_results
    from intrabench.io.run_directory import run_machine
    from intrabench.timing.latency import has_latency
    from intrabench.timing.waiting import measure_table, save_table

    rows = pd.concat([load_results(run) for run in args.run_dirs], ignore_index=True)
    if not has_latency(rows):
        raise UserError(
            f"{', '.join(args.run_dirs)}: no measured latencies in the results "
            "(runs made before IntraBench recorded them)"
        )
    machines = [run_machine(run) for run in args.run_dirs]
    described = {machine_text(m) for m in machines}
    if len(described) > 1:
        print(
            "warning: the runs come from different machines ("
            + "; ".join(sorted(described))
            + "); the table keeps the first's",
            file=sys.stderr,
        )
    table = measure_table(rows)
    kinds = sorted({k for entry in table.values() for k in entry} - {"first", "warm"})

    def ms(value: float | None) -> float | None:
        return None if value is None else round(1000 * value, 2)

    frame = pd.DataFrame(
        [
            {
                "model": model,
                "first ms": ms(entry.get("first")),
                "warm ms": ms(entry.get("warm")),
                **{f"{k} ms": ms(entry.get(k)) for k in kinds},
            }
            for model, entry in table.items()
        ]
    )
    print(
        f"## Median latency per call (ms), measured on {machine_text(machines[0])}\n\n"
        f"{to_markdown(frame)}\n"
    )
    if args.save:
        path = Path(args.save)
        save_table(table, path, machines[0], [str(Path(r).resolve()) for r in args.run_dirs])
        print(
            f"written: {path}; use it with 'time_model: {{waiting: table, latency_table: "
            f"{path}}}' in a config, or 'intrabench tables RUN --latency-table {path}'",
            file=sys.stderr,
        )
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench latency``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    latency = commands.add_parser(
        "latency",
        help="the models' median latency in runs; --save: a latency table for "
        "time-aware numbers that do not move with the machine's load",
    )
    latency.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    latency.add_argument(
        "--save",
        metavar="FILE",
        help="write the latency table (JSON, with the machine it was measured on)",
    )
    latency.set_defaults(func=cmd_latency)
