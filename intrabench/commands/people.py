"""``intrabench people seconds`` and ``intrabench people replay``: what people's sessions
give the benchmark (docs/measuring-people.md).

* ``people seconds SESSIONS... [--save FILE]``: seconds per interaction kind measured in the
  sessions, with t intervals, written as the time model's ``seconds:`` (docs/time-aware.md);
* ``people replay RUN --model NAME ... [--k K]``: the run's sessions (``RUN/sessions``)
  replayed on other models, into ``RUN/people/replays.csv``, which ``intrabench tables`` and
  the report put beside the people and the simulated user.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_seconds(args: argparse.Namespace) -> int:
    """``intrabench people seconds``: seconds per interaction kind from people's sessions, as a
    time model's seconds; returns the exit status.

    Args:
        args: The parsed command line: ``sessions`` (logs or folders), ``save`` (a YAML file
            for the ``time_model:`` section; None: printed only), ``confidence``.

    Returns:
        0 once the table is printed (and saved).
    """
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.people.replay import SessionLibrary
    from intrabench.people.versus import seconds_by_kind

    library = SessionLibrary.read(args.sessions)
    for line in library.problems:
        print(f"warning: {line}", file=sys.stderr)
    if not library.sessions:
        from intrabench.errors import UserError

        raise UserError(f"{', '.join(args.sessions)}: no session with an interaction")
    seconds = seconds_by_kind(library, args.confidence)
    print(
        f"## Seconds per interaction kind, {len(library.sessions)} session(s) by "
        f"{len({s.header['rater'] for s in library.sessions})} rater(s); "
        f"{args.confidence:g} t interval\n\n{to_markdown(seconds.round(3))}\n"
    )
    text = seconds_yaml(seconds, len(library.sessions), args.confidence)
    if args.save:
        Path(args.save).write_text(text, encoding="utf-8")
        print(f"written: {args.save} (paste its time_model: into a run config)", file=sys.stderr)
    else:
        print(text)
    return 0


def seconds_yaml(seconds, sessions: int, confidence: float) -> str:
    """The ``time_model: {seconds: ...}`` section of a run config from
    :func:`~intrabench.people.versus.seconds_by_kind`'s rows: each kind's mean (0.1 s), its
    interval and count in a comment; the kinds not measured keep their defaults.

    Args:
        seconds: :func:`~intrabench.people.versus.seconds_by_kind`'s rows.
        sessions: The number of sessions measured, for the heading comment.
        confidence: The intervals' confidence level (0-1), for the comments.

    Returns:
        The YAML text.
    """
    from intrabench.people.versus import seconds_table

    table = seconds_table(seconds)
    lines = [
        f"# measured in {sessions} session(s) (intrabench people seconds); kinds not listed",
        "# keep the defaults (docs/time-aware.md)",
        "time_model:",
        "  seconds:",
    ]
    for kind, n, low, high in zip(seconds["kind"], seconds["n"], seconds["low"], seconds["high"]):
        bounds = (
            "no interval (1 interaction)" if n < 2 else f"{confidence:g} CI {low:.2f}-{high:.2f}"
        )
        lines.append(f"    {kind}: {table[kind]}   # n={n}, {bounds}")
    return "\n".join(lines) + "\n"


def cmd_replay(args: argparse.Namespace) -> int:
    """``intrabench people replay``: people's sessions replayed on models, each step scored;
    returns the exit status.

    Args:
        args: The parsed command line: ``run_dir``, ``model`` (the models to replay on), ``k``
            (the most corrections; None: all), ``sessions`` (default ``RUN/sessions``).

    Returns:
        0 once the replays are written into the run folder.
    """
    from intrabench import registry
    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.people.cases import session_cases
    from intrabench.people.replay import SessionLibrary, replay_library
    from intrabench.reports.people import REPLAYS_FILE, SESSIONS_FOLDER

    run_dir = Path(args.run_dir)
    sessions = Path(args.sessions) if args.sessions else run_dir / SESSIONS_FOLDER
    library = SessionLibrary.read([sessions])
    for line in library.problems:
        print(f"warning: {line}", file=sys.stderr)
    cases = session_cases(library, run_dir)
    models = {name: registry.models.create(name, {}) for name in args.model}
    result = replay_library(library, cases, models, args.k)
    for line in result.problems[len(library.problems) :]:
        print(f"warning: {line}", file=sys.stderr)
    out = run_dir / REPLAYS_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    from intrabench.display_text import spreadsheet_safe

    spreadsheet_safe(result.rows, escape=True).to_csv(out, index=False)  # Dice to the bit
    said = result.rows.drop_duplicates(["session_id", "model"])[["session_id", "model", "replayed"]]
    print(f"## Replayed\n\n{to_markdown(said)}\n")
    print(
        f"{len(library.sessions)} session(s) replayed on {len(models)} model(s); "
        f"{result.skipped_targets} target(s) of their cases have no session and were skipped"
    )
    print(f"written: {out}", file=sys.stderr)
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add the ``people`` commands to the CLI.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    from intrabench.commands._arguments import count

    people = commands.add_parser("people", help="people's sessions: seconds, replays")
    actions = people.add_subparsers(dest="people_command", required=True)
    seconds = actions.add_parser(
        "seconds", help="seconds per interaction kind from sessions, as the time model's seconds:"
    )
    seconds.add_argument("sessions", nargs="+", help="session logs (*.jsonl) or their folders")
    seconds.add_argument("--save", help="write the time_model: section to this YAML file")
    seconds.add_argument(
        "--confidence", type=float, default=0.95, help="the t interval's level (0.95)"
    )
    seconds.set_defaults(func=cmd_seconds)
    replay = actions.add_parser("replay", help="replay a run's sessions on other models")
    replay.add_argument("run_dir", help="the run folder (its sessions/, its config's datasets)")
    replay.add_argument(
        "--model", action="append", required=True, help="a registered model (repeat for more)"
    )
    replay.add_argument(
        "--k", type=count, default=None, help="replay the first K corrections (default: all)"
    )
    replay.add_argument("--sessions", help="read the sessions here instead of RUN/sessions")
    replay.set_defaults(func=cmd_replay)
