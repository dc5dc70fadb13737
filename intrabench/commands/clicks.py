"""``intrabench clicks collect build`` and ``intrabench clicks collect import``: clicks
collected from people (RClicks, in 3D), for the ``recorded`` clickability map."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from intrabench.commands._arguments import count


def cmd_collect_build(args: argparse.Namespace) -> int:
    """``intrabench clicks collect build``: a blinded click-collection site from a run; returns
    the exit status.

    Args:
        args: The parsed command line: ``run_dir``, ``out`` (the site's folder), ``n`` (tasks),
            ``seed``, ``first`` (first-click tasks; None: a quarter).

    Returns:
        0 once the site is written.
    """
    from intrabench.people.clicks.build import build_collection

    out = Path(args.out)
    built = build_collection(args.run_dir, out, n=args.n, seed=args.seed, first=args.first)
    print(
        f"click collection {built.collection}: {built.tasks} click tasks, blinded and shuffled:\n"
        + "".join(f"  {line}\n" for line in built.spread)
        + f"  open {built.site.resolve()} in a web browser (works offline, from file://), or "
        f"hand the folder {out} to the people who click;\n"
        f"  which mask each task shows stays in {built.key}.\n"
        f"  then: intrabench clicks collect import CLICKS.json ... --tasks {out} --to clicks.csv"
    )
    return 0


def cmd_collect_import(args: argparse.Namespace) -> int:
    """``intrabench clicks collect import``: the clicks people made, checked and written as CSV;
    returns the exit status.

    Args:
        args: The parsed command line: ``clicks`` (the exported files), ``tasks`` (the built
            site's folder), ``to`` (the CSV; earlier clicks in it are kept).

    Returns:
        0 once the CSV is written.

    Raises:
        UserError: No click fits the collection, or ``to`` holds another collection's clicks.
    """
    from intrabench.errors import UserError
    from intrabench.io.results import atomic_write_text
    from intrabench.people.clicks.build import read_manifest
    from intrabench.people.clicks.importing import (
        CSV_COLUMNS,
        merge_earlier,
        read_click_files,
        regions_with_clicks,
    )
    from intrabench.wording import counted

    manifest = read_manifest(args.tasks)
    read = read_click_files(args.clicks, manifest)
    for line in read.files_refused:
        print(line, file=sys.stderr)
    for reason, number in sorted(read.refused.items(), key=lambda item: -item[1]):
        examples = read.examples[reason]
        print(
            f"refused {number} click(s): {reason} (e.g. {', '.join(examples[:3])})",
            file=sys.stderr,
        )
    if read.clicks.empty:
        raise UserError(
            f"no click of {len(args.clicks)} file(s) fits collection {manifest['collection']}"
            f" ({len(read.files_refused)} file(s) refused, {sum(read.refused.values())} "
            "click(s) refused): nothing was written"
        )
    to = Path(args.to)
    clicks, kept = merge_earlier(read.clicks, to, str(manifest["collection"]))
    to.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(to, clicks[CSV_COLUMNS].to_csv(index=False))
    covered, regions = regions_with_clicks(clicks, manifest)
    raters = clicks["rater"].nunique()
    earlier = f" ({kept} kept from an earlier import into {to})" if kept else ""
    print(
        f"collection {manifest['collection']}: {counted(len(clicks), 'click')} of "
        f"{counted(raters, 'rater')} on {clicks['task'].nunique()} of {len(manifest['tasks'])} "
        f"tasks{earlier}; {covered} of {regions} regions (a target at a step) have clicks\n"
        f"written: {to}; use it with robustness: {{clickability: {{name: recorded, "
        f"clicks_file: {to}}}}}"
    )
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench clicks collect build|import``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    clicks = commands.add_parser("clicks", help="clicks collected from people (RClicks, in 3D)")
    actions = clicks.add_subparsers(dest="action", metavar="ACTION", required=True)
    collect = actions.add_parser(
        "collect", help="a blinded click page of tasks from a run, and its clicks imported"
    )
    steps = collect.add_subparsers(dest="collect_action", metavar="STEP", required=True)
    build = steps.add_parser("build", help="a self-contained click site of tasks from a run")
    build.add_argument("run_dir", metavar="RUN")
    build.add_argument("out", metavar="OUT", help="folder of the site")
    build.add_argument("--n", type=int, default=60, help="click tasks (default 60)")
    build.add_argument("--seed", type=count, default=0, help="choice and order seed")
    build.add_argument(
        "--first",
        type=count,
        help="first-click tasks of the --n (default a quarter, one per target at most)",
    )
    build.set_defaults(func=cmd_collect_build)
    imported = steps.add_parser(
        "import", help="click files from the page, checked, as the 'recorded' map's CSV"
    )
    imported.add_argument("clicks", nargs="+", metavar="CLICKS_FILE")
    imported.add_argument("--tasks", required=True, metavar="OUT", help="the built site's folder")
    imported.add_argument(
        "--to", required=True, metavar="CSV", help="the CSV to write (an earlier import's: merged)"
    )
    imported.set_defaults(func=cmd_collect_import)
