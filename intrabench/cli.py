"""The ``intrabench`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from intrabench import __version__
from intrabench.errors import UserError
from intrabench.execution import interrupts
from intrabench.execution.subprocess_worker import WorkerDied


def _print_rows(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def cmd_models_list(args: argparse.Namespace) -> int:
    """``intrabench models list``: each registered model's card in a table; returns the exit
    status.

    Args:
        args: The parsed command line (nothing of it is read).

    Returns:
        0.
    """
    from intrabench.commands.models import model_rows  # the models' cards (model_cards.py)

    _print_rows(model_rows(), ["name", "dim", "accepts", "status", "licence", "description"])
    return 0


def cmd_prompters_list(args: argparse.Namespace) -> int:
    """``intrabench prompters list``: the registered prompters and refiners; returns the exit
    status.

    The clickability models of robustness runs are listed after them.

    Args:
        args: The parsed command line (nothing of it is read).

    Returns:
        0.
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

    Args:
        args: The parsed command line (nothing of it is read here; the datasets command
            module gives ``list`` a ``--root`` and its own table).

    Returns:
        0.
    """
    from intrabench import registry

    rows = []
    for name, cls in registry.datasets.items():
        status = cls.availability()
        rows.append([name, cls.modality, status, cls.description])
    _print_rows(rows, ["name", "modality", "status", "description"])
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``intrabench`` argument parser with every command and command group.

    Returns:
        The parser: ``run`` first, the ``models``, ``prompters`` and ``datasets`` groups, then
        every command module's commands.
    """
    parser = argparse.ArgumentParser(
        prog="intrabench",
        description="Benchmark interactive segmentation models on 3D medical images.",
    )
    parser.add_argument("--version", action="version", version=f"intrabench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug logs")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from intrabench.commands import run as run_command  # the first command of the help

    run_command.register(commands, {})

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
        if module.name.startswith("_") or module.name == "run":  # helpers; run: registered first
            continue
        register = getattr(
            importlib.import_module(f"intrabench.commands.{module.name}"), "register", None
        )
        if register is not None:  # a module without one holds what its command's module uses
            register(commands, groups)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``).

    Args:
        argv: The arguments after the program name; None: ``sys.argv[1:]``.

    Returns:
        The exit status: 0 on success, 2 after a user error (printed in one line, no traceback),
        1 after a worker that died or a file-system error (one line), 130 after Ctrl-C and 143
        after SIGTERM (finished work is kept for a resume).
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
    interpreter's exit made short.

    Python's shutdown runs its cyclic garbage collector over every object the command left (the
    modules of pandas, SciPy, OpenVINO...), after every file is written (docs/performance.md).
    ``gc.freeze()`` moves them out of the collector's reach; everything else about the exit
    (atexit handlers, flushing, finalizers of objects that are not in cycles) happens as usual.
    Tests call :func:`main`, which leaves the interpreter as it was.

    Returns:
        :func:`main`'s exit status.
    """
    import gc

    status = main()
    gc.freeze()
    return status


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, SLURM's end of a job), raised where Ctrl-C's KeyboardInterrupt is:
    the run saves what is finished and stops its workers the same way."""


def describe_os_error(error: OSError) -> str:
    """One line for a file-system error, with what to do about it.

    Args:
        error: The ``OSError`` (a full disk, a quota, a missing permission, ...).

    Returns:
        The message, naming the file when the error does.
    """
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
