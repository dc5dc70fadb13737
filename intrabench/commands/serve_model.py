"""``intrabench serve-model NAME``: serve a registered model over the model protocol, so that a
run in another environment (or on another machine) benchmarks it (``runs_in:`` in its config)."""

from __future__ import annotations

import argparse
import json
import os


def cmd_serve_model(args: argparse.Namespace) -> int:
    """``intrabench serve-model``: serve one registered model over stdio or TCP; returns the exit
    status.

    Args:
        args: The parsed command line: ``name`` (else ``$INTRABENCH_SERVE_MODEL``),
            ``params`` (JSON), ``stdio`` or ``listen`` (``HOST:PORT``, one of the two),
            ``imports`` (modules that register plugins).

    Returns:
        0 when the client closes the connection.

    Raises:
        UserError: No model named, neither or both of ``--stdio`` and ``--listen``, or a
            ``--listen`` without a port.
    """
    from intrabench import registry
    from intrabench.errors import UserError
    from intrabench.serving.server import claim_stdout, serve_stdio, serve_tcp

    name = args.name or os.environ.get("INTRABENCH_SERVE_MODEL")
    if not name:
        raise UserError("serve-model: name the model (or set INTRABENCH_SERVE_MODEL)")
    params = _params(
        args.params if args.params is not None else os.environ.get("INTRABENCH_SERVE_PARAMS", "{}")
    )
    if (args.listen is None) == (not args.stdio):
        raise UserError("serve-model: give --stdio or --listen HOST:PORT")
    protocol_out = claim_stdout() if args.stdio else None
    for module in args.imports or []:
        __import__(module)
    model = registry.models.create(name, params)
    if protocol_out is not None:
        serve_stdio(model, params, protocol_out)
        return 0
    host, _, port = args.listen.rpartition(":")
    if not port.isdigit():
        raise UserError(f"--listen {args.listen[:80]}: give HOST:PORT, e.g. 127.0.0.1:8765")
    serve_tcp(model, params, host or "127.0.0.1", int(port))
    return 0


def _params(text: str) -> dict:
    from intrabench.errors import UserError

    try:
        params = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(
            f'--params: not JSON ({error.msg}); give e.g. \'{{"variant": "vit_t"}}\''
        ) from None
    if not isinstance(params, dict):
        raise UserError("--params: give a JSON object of the model's parameters")
    return params


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add the ``serve-model`` command to the CLI.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    serve = commands.add_parser(
        "serve-model",
        help="serve a model to runs in other environments or machines (runs_in: in their config)",
    )
    serve.add_argument("name", nargs="?", help="the registered model (intrabench models list)")
    serve.add_argument("--params", help="the model's parameters as a JSON object")
    serve.add_argument(
        "--stdio",
        action="store_true",
        help="one session over standard input/output (a client started this)",
    )
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="sessions on a TCP port, one client at a time (127.0.0.1:8765; "
        "0.0.0.0 only on a trusted network: the protocol has no login)",
    )
    serve.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import this module first (a model registered by decorator)",
    )
    serve.set_defaults(func=cmd_serve_model)
