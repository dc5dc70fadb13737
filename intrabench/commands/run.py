"""``intrabench run [CONFIG]``: run a benchmark config (no CONFIG: the built-in demo) into its
run folder, resuming what is there, and print the summary table.

The command is the boundary: it reads the flags, an optional execution settings file and the
environment into one :class:`~intrabench.execution.settings.ExecutionSettings`, which is all the
engine and the executors see of them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from pathlib import Path

from intrabench.errors import UserError
from intrabench.execution.settings import ExecutionSettings

#: more seeds than this are worth a word before the run plans them
MANY_SEEDS = 100

#: the flags that are fields of :class:`~intrabench.execution.settings.ExecutionSettings`
EXECUTION_FLAGS = (
    "executor",
    "scheduler",
    "cluster_config",
    "workers",
    "gpus",
    "workers_per_gpu",
    "memory_limit",
    "task_resources",
)


def execution_settings(args: argparse.Namespace) -> ExecutionSettings:
    """The run's :class:`~intrabench.execution.settings.ExecutionSettings` from its flags, the
    ``--execution`` file and the environment (UserError in one line for a value no run can
    use).

    Args:
        args: The parsed ``run`` command line; the flags of :data:`EXECUTION_FLAGS` (None:
            not given) and ``--execution`` (a YAML file path, or None) are read, flags winning
            over the file.

    Returns:
        The settings the executors see.

    Raises:
        UserError: A setting no run can use (from the flags, the file or the environment).
    """
    flags = {name: getattr(args, name, None) for name in EXECUTION_FLAGS}
    file = Path(args.execution) if getattr(args, "execution", None) else None
    return ExecutionSettings.from_sources(flags, file)


def cmd_run(args: argparse.Namespace) -> int:
    """``intrabench run``: plan, run (resuming what the run folder holds) and report.

    With ``--dry-run`` it prints the plan instead and runs nothing.

    Args:
        args: The parsed ``run`` command line: ``config`` (a YAML path, or None for the
            built-in demo), ``set`` (KEY=VALUE overrides), ``out`` (the run folder, default
            ``intrabench-runs/<name>``), ``dry_run``, ``extend`` and the execution flags.

    Returns:
        The exit status: 0 everything ran; 1 some work failed, was skipped for a problem, or a
        declared class was held by no case; 2 nothing to run (with ``--dry-run``: 0, or 2 when
        nothing would run).

    Raises:
        UserError: An empty ``--out``, or a config or execution setting that cannot be used
            (the command line prints it as one line, exit 2).
    """
    from intrabench import __version__
    from intrabench.config import builtin_demo_path, load_config
    from intrabench.execution.progress import RunProgress
    from intrabench.execution.runner import Runner

    settings = execution_settings(args)
    config_path = Path(args.config) if args.config else builtin_demo_path()
    config = load_config(config_path, overrides=args.set or [])
    _warn_many_seeds(config)
    if args.out is not None and not args.out.strip():
        raise UserError(
            f"--out is empty: give a folder, or leave --out out for intrabench-runs/{config.name}"
        )
    out = Path(args.out) if args.out else Path("intrabench-runs") / config.name
    if args.dry_run:
        from intrabench.execution.dry_run import print_dry_run

        return print_dry_run(config, out, extend=args.extend)
    print(
        f"IntraBench {__version__}: run '{config.name}' from {config_path} -> {out}",
        file=sys.stderr,
    )
    started = time.perf_counter()
    local = settings.executor == "local"
    runner = Runner(
        config, out, progress=RunProgress if local else None, settings=settings, extend=args.extend
    )
    with _warnings_beside_the_bar() if local else contextlib.nullcontext():
        plan, problems = runner.run()
    return _report_run(
        config,
        out,
        plan,
        problems,
        runner.failures,
        runner.executed,
        time.perf_counter() - started,
    )


def _warn_many_seeds(config) -> None:
    """A word before a run of more than :data:`MANY_SEEDS` seeds plans them."""
    if len(config.seeds) <= MANY_SEEDS:
        return
    combinations = sum(
        len(model.prompters if model.prompters is not None else config.prompters)
        * max(1, len(model.refiners if model.refiners is not None else config.refiners))
        for model in config.models
    )
    print(
        f"warning: {len(config.seeds)} seeds: every case runs {len(config.seeds)} x "
        f"{combinations} model/prompter/refiner combinations = "
        f"{len(config.seeds) * combinations:,} work units per case (see --dry-run)",
        file=sys.stderr,
    )


def _report_run(
    config,
    out: Path,
    plan,
    problems: list[str],
    failures: list,
    executed: int | None,
    seconds: float,
) -> int:
    """The end of ``intrabench run``: counts, warnings, the summary table; the exit status
    (0: everything ran; 1: some work failed or was skipped for a problem; 2: nothing to run)."""
    from intrabench.evaluation import aggregate
    from intrabench.io.results import load_results

    done = f"{executed} of {len(plan.units)}" if executed is not None else f"{len(plan.units)}"
    print(
        f"{done} work units executed in {seconds:.1f} s"
        + (f", {len(failures)} failed (see {out / 'failures.csv'})" if failures else ""),
        file=sys.stderr,
    )
    problems = list(dict.fromkeys(problems))  # a case's problem once, not once per model
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    for failure in failures[:10]:
        print(f"failed: {failure.describe()}", file=sys.stderr)
    if len(failures) > 10:
        print(f"... and {len(failures) - 10} more failed units", file=sys.stderr)
    if any(getattr(f, "details", "") or getattr(f, "traceback_file", "") for f in failures):
        print(f"full tracebacks: {out / 'failures'}", file=sys.stderr)
    if plan.skipped:
        print(f"{plan.skipped_line()} (see {out / 'skipped.csv'})", file=sys.stderr)
    if not plan.units:
        print(
            f"error: nothing to run: every combination of run '{config.name}' was skipped as "
            f"incompatible (see {out / 'skipped.csv'})",
            file=sys.stderr,
        )
        return 2
    rows = load_results(out)
    if "click_map_fallbacks" in rows and rows["click_map_fallbacks"].fillna(0).sum() > 0:
        fallbacks = int(rows["click_map_fallbacks"].fillna(0).sum())
        regions = int(rows["click_map_regions"].fillna(0).sum())
        print(
            f"note: {fallbacks} of {regions} click regions had no recorded clicks and took the "
            "clickability model's fallback map (per step: click_map_fallbacks in the "
            "results)",
            file=sys.stderr,
        )
    if len(rows):
        table = aggregate.summary_table(rows)
        if failures:
            import pandas as pd

            from intrabench.reports.failed_units import add_failed_column, warning_line

            failed = pd.DataFrame(
                [{"model": f.model, "prompter": f.prompter, "refiner": f.refiner} for f in failures]
            )
            print(warning_line(failed))
            table = add_failed_column(table, failed, "model", "prompter", refiner_column="refiner")
        print(aggregate.to_markdown(table))
        print(
            f"\nDice x100 per dataset (mean over classes of case means). "
            f"Rows: {out / 'results.csv'}"
        )
    coverage_errors = _class_coverage(config, rows)
    if problems:
        print(
            f"{len(problems)} problem(s): the work they name was skipped (see warnings above "
            f"and {out / 'problems.csv'})",
            file=sys.stderr,
        )
    if failures:
        print(f"{len(failures)} work unit(s) failed; {_retry_hint(failures)}", file=sys.stderr)
    return 1 if problems or failures or coverage_errors else 0


def _class_coverage(config, rows) -> int:
    """Say which declared classes no case (or only some) held, as ``datasets verify`` does;
    returns the number of classes that no case held (each an error of the dataset spec)."""
    from intrabench.datasets.class_coverage import run_coverage

    errors = 0
    for key, coverage in run_coverage(config, rows):
        for line in coverage.warnings:
            print(f"note: dataset {key}: {line}", file=sys.stderr)
        for line in coverage.errors:
            print(
                f"error: dataset {key}: {line} (intrabench datasets verify shows each case)",
                file=sys.stderr,
            )
        errors += len(coverage.errors)
    return errors


def _user_error_names() -> set[str]:
    """Names of :class:`UserError` and its subclasses (errors of the input, not of chance)."""
    names, pending = set(), [UserError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return names


def _retry_hint(failures: list) -> str:
    """What to do about failed units: rerunning retries them, but a failure of the input (a
    UserError: a missing modality, a bad file) fails again until the input is fixed."""
    names = _user_error_names()
    of_input = sum(f.cause.split(":", 1)[0].strip() in names for f in failures)
    if of_input == len(failures):
        return (
            "each failed on its input (the causes above): fix it, then rerun the same "
            "command to run them"
        )
    if of_input:
        return (
            f"{of_input} of them failed on their input (fix it first); rerun the same "
            "command to retry them"
        )
    return "rerun the same command to retry them"


class _warnings_beside_the_bar:  # noqa: N801 - used as a context manager
    """Library warnings and log records go through tqdm's writer while a bar is drawn, so
    they do not break it."""

    def __enter__(self):
        from tqdm.contrib.logging import logging_redirect_tqdm

        logging.captureWarnings(True)
        self._redirect = logging_redirect_tqdm()
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc):
        self._redirect.__exit__(*exc)
        logging.captureWarnings(False)
        return False


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench run`` to the command line.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    run = commands.add_parser("run", help="run a benchmark config (no CONFIG: the built-in demo)")
    run.add_argument("config", nargs="?", help="YAML run configuration")
    run.add_argument(
        "--out", help="run directory (default: intrabench-runs/<name>); re-running resumes"
    )
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config key (YAML value; dotted keys for nested ones), "
        "e.g. --set refinement_steps=3 --set 'seeds=[0,1]'; repeatable",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (work units, skipped pairs, forward passes) and exit",
    )
    run.add_argument(
        "--extend",
        action="store_true",
        help="continue a run folder whose recorded config differs (adds this "
        "config's work; results.csv then holds this config's rows, the "
        "earlier config's units stay in units/)",
    )
    run.add_argument(
        "--executor",
        choices=["local", "dask"],
        default=None,
        help="local (default): this process; dask: a Dask cluster (local, --scheduler or "
        "--cluster-config)",
    )
    run.add_argument(
        "--execution",
        metavar="FILE",
        help="YAML file of execution settings (executor, workers, user_workers, ...: "
        "docs/scaling.md); flags given here win",
    )
    run.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786)")
    run.add_argument(
        "--cluster-config",
        help="YAML for a SLURM/PBS/LSF cluster via dask-jobqueue (see docs/scaling.md)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes of a local Dask cluster (default 2)",
    )
    run.add_argument(
        "--gpus",
        help="local Dask cluster with one worker per GPU, e.g. 0,1,2,3 "
        "(each worker sees only its device)",
    )
    run.add_argument(
        "--workers-per-gpu",
        type=int,
        default=None,
        help="with --gpus: workers sharing each GPU (default 1); 2 keeps the card "
        "busy while one worker prompts and scores on the CPU",
    )
    run.add_argument("--memory-limit", help="memory bound per local Dask worker, e.g. 8GB")
    run.add_argument(
        "--task-resources",
        nargs="*",
        metavar="NAME=AMOUNT",
        help="Dask resources each task needs, e.g. GPU=1 (workers started with --resources GPU=1)",
    )
    run.set_defaults(func=cmd_run)
