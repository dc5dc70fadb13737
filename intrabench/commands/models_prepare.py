"""``intrabench models prepare``: export and check the models' CPU encoders ahead of a run.

A 2D model whose encoder runs from an export (ONNX Runtime, OpenVINO) exports it and checks it
against torch at its first use, once per machine. That is most of the demo's first run; the
install step runs this command, so the first ``intrabench run`` is as fast as the next ones.
"""

from __future__ import annotations

import argparse
import time

from intrabench.errors import UserError


def exportable_demo_models() -> list[str]:
    """The built-in demo's models whose encoder runs from an export on the CPU, in its order.

    Returns:
        Their registered names, without repeats.
    """
    from intrabench import registry
    from intrabench.config import builtin_demo_path, load_config

    names = [spec.name for spec in load_config(builtin_demo_path()).models]
    return [
        name
        for name in dict.fromkeys(names)
        if getattr(registry.models.get(name), "EXPORTABLE_ENCODER", False)
    ]


def prepare_model(name: str) -> str:
    """Build model ``name`` with its default parameters and prepare it (export, check and
    compile its encoder and decoder where it has them).

    Args:
        name: A registered model's name.

    Returns:
        One line saying what runs it and how long preparing took (seconds, on this machine).

    Raises:
        UserError: The model has no exported encoder, or is not ready (its checkpoint missing).
    """
    from intrabench import registry

    model = registry.models.create(name, {})
    if not getattr(type(model), "EXPORTABLE_ENCODER", False):
        raise UserError(f"model '{name}' has no exported encoder to prepare")
    availability = getattr(model, "availability", None)
    if callable(availability):
        state = str(availability())
        if not state.startswith("ready"):
            raise UserError(f"model '{name}' is not ready: {state}")
    started = time.perf_counter()
    model.prepare()
    parts = []
    for part in ("encoder", "decoder"):
        exported = getattr(model, f"exported_{part}", None)
        if exported is not None:
            parts.append(f"{part} on {exported.backend}")
    seconds = time.perf_counter() - started
    what = ", ".join(parts) if parts else "torch (no export usable here)"
    return f"{name}: ready in {seconds:.1f} s ({what})"


def cmd_models_prepare(args: argparse.Namespace) -> int:
    """Prepare the named models (default: the demo's); returns the exit status.

    Args:
        args: The parsed command line: ``names`` (model names; empty: the demo's exportable
            models).

    Returns:
        0 once every model is prepared.
    """
    names = list(dict.fromkeys(args.names)) or exportable_demo_models()
    for name in names:
        print(prepare_model(name), flush=True)
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``models prepare`` to the CLI.

    Args:
        commands: The top-level subcommand parsers (unused: ``prepare`` is in a group).
        groups: The command groups' subparsers by group name; ``groups["models"]`` is used.
    """
    prepare = groups["models"].add_parser(
        "prepare",
        help="export and check the CPU encoders ahead of a run (default: the demo's models)",
    )
    prepare.add_argument("names", nargs="*", help="model names (default: the demo's trained ones)")
    prepare.set_defaults(func=cmd_models_prepare)
