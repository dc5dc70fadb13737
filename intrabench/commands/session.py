"""``intrabench session serve`` and ``intrabench session import``: a person segments a target
with a live model, and the session logs are read back with the Dice after each step."""

from __future__ import annotations

import argparse
import json
import re
import sys


def _json_object(text: str | None, option: str) -> dict:
    from intrabench.errors import UserError

    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{option}: not JSON ({error.msg}); give e.g. '{{\"key\": 1}}'") from None
    if not isinstance(value, dict):
        raise UserError(f"{option}: give a JSON object")
    return value


def cmd_session_serve(args: argparse.Namespace) -> int:
    """``intrabench session serve``: a local page where a person segments a target with a live
    model; returns the exit status.

    Args:
        args: The parsed command line: ``model`` and ``params``, ``dataset`` and
            ``dataset_params``, ``case``, ``target``, ``rater``, ``out``, ``session``, ``runs_in``,
            ``show_dice``, ``host``, ``port``.

    Returns:
        0 when the server is stopped (Ctrl-C).
    """
    from pathlib import Path

    from intrabench.errors import UserError
    from intrabench.people.sessions.live import SAFE_NAME, LiveSession, session_header
    from intrabench.people.sessions.server import SessionServer
    from intrabench.people.sessions.setup import build_model, load_target

    params = _json_object(args.params, "--params")
    dataset_params = _json_object(args.dataset_params, "--dataset-params")
    default_id = re.sub(r"[^A-Za-z0-9._-]", "-", f"{args.rater}_{args.case}_{args.target}")
    session_id = args.session or default_id.lstrip("._-")
    if not SAFE_NAME.match(session_id):
        raise UserError(
            f"session id {session_id[:80]!r}: use letters, digits, '.', '_' and '-' only"
        )
    case, target = load_target(args.dataset, dataset_params, args.case, args.target)
    print(f"loading {args.model} ...", file=sys.stderr)
    runs_in = _json_object(args.runs_in, "--runs-in") if args.runs_in else None
    model = build_model(args.model, params, runs_in)
    header = session_header(
        session_id,
        args.rater,
        args.dataset,
        case,
        target,
        args.model,
        params,
        dataset_params,
        shows_dice=args.show_dice,
    )
    session = LiveSession.open(
        Path(args.out), case, target, model, session_id=session_id, header=header
    )
    server = SessionServer(session, args.host, args.port)
    resumed = f" (resumed at step {len(session.steps)})" if session.steps else ""
    print(
        f"session {session_id}{resumed}: open {server.url} in a web browser; the log is "
        f"{session.writer.path} (written as you go); Ctrl+C ends the server",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        session.writer.close()
    return 0


def cmd_session_import(args: argparse.Namespace) -> int:
    """``intrabench session import``: people's session logs checked against their cases and
    scored per step; returns the exit status.

    Args:
        args: The parsed command line: ``sessions`` (logs or folders), ``to`` (the table's
            folder).

    Returns:
        0 once ``session-steps.csv`` is written.

    Raises:
        UserError: No session log could be used.
    """
    from intrabench.errors import UserError
    from intrabench.people.sessions.importing import import_sessions, write_import
    from intrabench.wording import counted

    result = import_sessions(args.sessions)
    for line in result.refused:
        print(f"refused: {line}", file=sys.stderr)
    for line in result.skipped_lines:
        print(f"skipped: {line}", file=sys.stderr)
    if not result.sessions:
        raise UserError(
            f"no session imported ({counted(len(result.refused), 'file')} refused, listed above)"
        )
    path = write_import(result, args.to)
    print(
        f"imported {counted(result.sessions, 'session')} ({counted(len(result.rows), 'step')}); "
        f"refused {counted(len(result.refused), 'file')}, skipped "
        f"{counted(len(result.skipped_lines), 'line')}, "
        f"{counted(result.cut_lines, 'cut last line')} ignored; "
        f"written: {path}"
    )
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench session serve|import``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    session = commands.add_parser(
        "session", help="a person segments a target with a live model; the logs imported"
    )
    actions = session.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser("serve", help="a local page where a person segments one target")
    serve.add_argument("--model", required=True, help="a registered model (models list)")
    serve.add_argument("--params", help="the model's parameters as a JSON object")
    serve.add_argument(
        "--runs-in",
        metavar="JSON",
        help='where the model runs, as a config\'s runs_in: (e.g. \'{"url": "tcp://host:8765"}\')',
    )
    serve.add_argument("--dataset", required=True, help="a registered dataset (datasets list)")
    serve.add_argument("--dataset-params", help="the dataset's parameters as a JSON object")
    serve.add_argument("--case", required=True, help="the case id")
    serve.add_argument("--target", required=True, help="the target id, as a run names it")
    serve.add_argument("--rater", required=True, help="who segments")
    serve.add_argument("--out", required=True, help="folder of the study (logs in sessions/)")
    serve.add_argument("--session", help="session id (default RATER_CASE_TARGET; resumes)")
    serve.add_argument(
        "--show-dice",
        action="store_true",
        help="show the person the Dice against the reference after each step (a protocol "
        "that asks for it; default: never shown, the log's header says which)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine)")
    serve.add_argument("--port", type=int, default=8770, help="default 8770 (0: any free)")
    serve.set_defaults(func=cmd_session_serve)
    imported = actions.add_parser(
        "import", help="session logs checked, with the Dice after each step, as a table"
    )
    imported.add_argument("sessions", nargs="+", metavar="SESSIONS", help="logs or folders")
    imported.add_argument("--to", required=True, help="folder of the table")
    imported.set_defaults(func=cmd_session_import)
