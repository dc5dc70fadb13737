"""The ``intrabench`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from intrabench import __version__
from intrabench.engine import interrupts
from intrabench.engine.subprocess_executor import WorkerDied
from intrabench.errors import UserError

_DASK_OPTIONS = (
    "scheduler",
    "cluster_config",
    "workers",
    "gpus",
    "workers_per_gpu",
    "memory_limit",
    "task_resources",
)


def _check_executor_options(args: argparse.Namespace) -> None:
    """Options that would be silently ignored are errors instead."""
    given = [name for name in _DASK_OPTIONS if getattr(args, name, None) not in (None, [])]
    if args.executor == "local" and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UserError(f"{flags}: only used with --executor dask")
    if getattr(args, "workers_per_gpu", None) is not None and not getattr(args, "gpus", None):
        raise UserError("--workers-per-gpu: only used with --gpus")
    _check_local_cluster_size(args)


#: local Dask worker processes per core at most (each imports the stack and holds its models)
WORKERS_PER_CORE = 4
#: the least memory a local Dask worker may be given (it imports numpy, SciPy, torch and the
#: models' code before its first task)
MIN_WORKER_MEMORY = 512 * 2**20


def _check_local_cluster_size(args: argparse.Namespace) -> None:
    """A local cluster the machine can hold: 1 to 4 workers per core, each with a memory
    bound it can start in. ``--workers -3`` waited forever, ``--workers 100000`` began to
    start that many processes and failed with a traceback, ``--memory-limit lots`` was a
    traceback and ``--memory-limit 1KB`` restarted killed workers until interrupted."""
    cores = os.cpu_count() or 1
    most = WORKERS_PER_CORE * cores
    workers = getattr(args, "workers", None)
    if workers is not None and not 1 <= workers <= most:
        raise UserError(
            f"--workers {workers}: a local Dask cluster takes 1 to {most} worker "
            f"processes on this machine ({cores} cores)"
        )
    per_gpu = getattr(args, "workers_per_gpu", None)
    if per_gpu is not None and not 1 <= per_gpu <= most:
        raise UserError(
            f"--workers-per-gpu {per_gpu}: give 1 to {most} workers per GPU on "
            f"this machine ({cores} cores)"
        )
    if getattr(args, "cluster_config", None):  # before the run's folder is written
        from intrabench.engine.dask_executor import read_cluster_spec

        read_cluster_spec(Path(args.cluster_config))
    if getattr(args, "task_resources", None):  # tasks no local worker could start
        from intrabench.engine.dask_executor import check_local_resources, parse_resources

        check_local_resources(args, parse_resources(args.task_resources))
    limit = getattr(args, "memory_limit", None)
    if limit is not None and str(limit).strip().lower() != "auto":
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(str(limit))
        except (ValueError, TypeError):
            raise UserError(
                f"--memory-limit '{limit}': not a size; give e.g. 8GB, 512MiB or auto"
            ) from None
        if size < MIN_WORKER_MEMORY:
            raise UserError(
                f"--memory-limit {limit}: a worker needs at least {MIN_WORKER_MEMORY // 2**20} MiB"
            )


#: more seeds than this are worth a word before the run plans them
MANY_SEEDS = 100


def cmd_run(args: argparse.Namespace) -> int:
    """``intrabench run``: run a config (default: the built-in demo), resuming what is done;
    returns the exit status.
    """
    from intrabench.config import builtin_demo_path, load_config

    _check_executor_options(args)
    config_path = Path(args.config) if args.config else builtin_demo_path()
    config = load_config(config_path, overrides=args.set or [])
    if len(config.seeds) > MANY_SEEDS:
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
    if args.out is not None and not args.out.strip():
        raise UserError(
            f"--out is empty: give a folder, or leave --out out for intrabench-runs/{config.name}"
        )
    out = Path(args.out) if args.out else Path("intrabench-runs") / config.name
    if args.dry_run:
        from intrabench.engine.dry_run import print_dry_run

        return print_dry_run(config, out, extend=args.extend)
    print(
        f"IntraBench {__version__}: run '{config.name}' from {config_path} -> {out}",
        file=sys.stderr,
    )
    started = time.perf_counter()
    if args.executor != "local":
        from intrabench.engine.dask_executor import run_distributed

        plan, problems = run_distributed(config, out, args)
        failures, executed = _read_failures(out), None
    else:
        from intrabench.engine.progress import RunProgress
        from intrabench.engine.runner import Runner

        runner = Runner(config, out, progress=RunProgress, extend=args.extend)
        with _warnings_beside_the_bar():
            plan, problems = runner.run()
        failures, executed = runner.failures, runner.executed
    return _report_run(
        config, out, plan, problems, failures, executed, time.perf_counter() - started
    )


def _read_failures(out: Path) -> list:
    """The failed units a Dask run wrote to ``failures.csv``."""
    import pandas as pd

    from intrabench.engine.failures import UnitFailure

    path = out / "failures.csv"
    if not path.is_file():
        return []
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [
        UnitFailure(**{**record, "seed": int(record["seed"])})
        for record in frame.to_dict("records")
    ]


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


def _print_rows(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def cmd_models_list(args: argparse.Namespace) -> int:
    """``intrabench models list``: each registered model's card in a table; returns the exit
    status.
    """
    from intrabench.commands.models import model_rows  # the models' cards (model_cards.py)

    _print_rows(model_rows(), ["name", "dim", "accepts", "status", "licence", "description"])
    return 0


def cmd_prompters_list(args: argparse.Namespace) -> int:
    """``intrabench prompters list``: the registered prompters and refiners; returns the exit
    status.
    """
    from intrabench import registry

    rows = []
    for role, components in (("initial", registry.prompters), ("refiner", registry.refiners)):
        for name, cls in components.items():
            rows.append(
                [
                    role,
                    name,
                    "/".join(f"{d}D" for d in sorted(cls.dimensions)),
                    ",".join(sorted(cls.kinds)),
                    "realistic" if cls.takes_click_policy else "",
                    cls.effort_rule,
                ]
            )
    _print_rows(rows, ["role", "name", "models", "prompt kinds", "clicks", "effort"])
    print("\nclickability models (robustness runs, docs/realistic-clicks.md):")
    _print_rows(
        [
            [name, "yes" if cls.needs_image else "", cls.description]
            for name, cls in registry.clickability.items()
        ],
        ["name", "reads image", "description"],
    )
    return 0


def cmd_datasets_list(args: argparse.Namespace) -> int:
    """``intrabench datasets list``: the registered datasets and whether each is present; returns
    the exit status.
    """
    from intrabench import registry

    rows = []
    for name, cls in registry.datasets.items():
        status = cls.availability()
        rows.append([name, cls.modality, status, cls.description])
    _print_rows(rows, ["name", "modality", "status", "description"])
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``intrabench`` argument parser with every command and command group."""
    parser = argparse.ArgumentParser(
        prog="intrabench",
        description="Benchmark interactive segmentation models on 3D medical images.",
    )
    parser.add_argument("--version", action="version", version=f"intrabench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug logs")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

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
        default="local",
        help="local: this process; dask: a Dask cluster (local, --scheduler or --cluster-config)",
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

    groups: dict[str, argparse._SubParsersAction] = {}
    for group, lister in (
        ("models", cmd_models_list),
        ("prompters", cmd_prompters_list),
        ("datasets", cmd_datasets_list),
    ):
        sub = commands.add_parser(group, help=f"{group}: list (and more)")
        actions = sub.add_subparsers(dest="action", metavar="ACTION")
        listing = actions.add_parser("list", help=f"list registered {group}")
        listing.set_defaults(func=lister)
        sub.set_defaults(func=lister)
        groups[group] = actions
    _register_command_modules(commands, groups)
    return parser


def _register_command_modules(
    commands: argparse._SubParsersAction, groups: dict[str, argparse._SubParsersAction]
) -> None:
    """Each module in ``intrabench.commands`` adds its own subcommands via ``register``.

    ``register(commands, groups)`` receives the top-level subparsers and the action subparsers
    of the ``models``, ``prompters`` and ``datasets`` groups. Modules must import their heavy
    dependencies inside the command functions, so ``intrabench --help`` stays fast.
    """
    import importlib
    import pkgutil

    from intrabench import commands as package

    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module.name.startswith("_"):  # helpers shared by the commands
            continue
        importlib.import_module(f"intrabench.commands.{module.name}").register(commands, groups)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 2 after a user error (printed in one line, no traceback).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    os.environ.setdefault("TQDM_MININTERVAL", "0.5")
    restore = interrupts.install(Terminated)
    try:
        status = int(args.func(args) or 0)
        interrupts.check()  # a stop request swallowed where nothing could raise it
        return status
    except Terminated:
        print(
            "terminated (SIGTERM): finished work is saved; re-run the same command to resume",
            file=sys.stderr,
        )
        return 143
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `intrabench models list | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(
            "interrupted: finished work is saved; re-run the same command to resume",
            file=sys.stderr,
        )
        return 130
    except WorkerDied as error:  # e.g. killed by the kernel when memory ran out
        print(
            f"error: {error}; finished work is saved, re-run the same command to resume",
            file=sys.stderr,
        )
        return 1
    except OSError as error:  # a full disk, an unwritable folder: one line, not a traceback
        print(f"error: {describe_os_error(error)}", file=sys.stderr)
        return 1
    finally:
        if restore is not None:
            restore()


def command() -> int:
    """The ``intrabench`` command (and ``python -m intrabench``): :func:`main`, then the
    interpreter's exit made short. Python's shutdown runs its cyclic garbage collector over every
    object the command left (the modules of pandas, SciPy, OpenVINO...), after every file is
    written (docs/performance.md). ``gc.freeze()`` moves them out of the collector's reach;
    everything else about the exit (atexit handlers, flushing, finalizers of objects that are
    not in cycles) happens as usual. Tests call :func:`main`, which leaves the
    interpreter as it was."""
    import gc

    status = main()
    gc.freeze()
    return status


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, SLURM's end of a job), raised where Ctrl-C's KeyboardInterrupt is:
    the run saves what is finished and stops its workers the same way."""


def describe_os_error(error: OSError) -> str:
    """One line for a file-system error, with what to do about it."""
    import errno

    where = f" ({error.filename})" if error.filename else ""
    if error.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return (
            f"the disk is full{where}; finished work is saved: free some space and re-run "
            "the same command to resume"
        )
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"no permission to write{where}: {error.strerror}; choose another folder"
    return f"{error.strerror or error}{where}"


if __name__ == "__main__":
    sys.exit(main())
