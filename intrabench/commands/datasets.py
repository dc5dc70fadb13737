"""``intrabench datasets download|prepare|verify NAME...`` and the richer ``datasets list``.

Options shared by the actions: ``--root`` (data root; default ``$INTRABENCH_DATA`` or
~/.intrabench/data) and, for download, ``--zenodo-url`` / ``--tcia-url`` (service base URLs,
e.g. a mirror). Heavy imports happen inside the functions.
"""

from __future__ import annotations

import argparse


def _recipe_classes(names: list[str]) -> list[type]:
    from intrabench import registry
    from intrabench.errors import UserError

    classes = []
    for name in names:
        cls = registry.datasets.get(name)
        if cls.recipe is None:
            raise UserError(
                f"dataset '{name}' has no download recipe (it is built in or reads "
                "your own folder); nothing to download or prepare"
            )
        classes.append(cls)
    return classes


def _unique_recipes(classes: list[type]) -> list[tuple[object, list[str]]]:
    seen: dict[int, tuple[object, list[str]]] = {}
    for cls in classes:
        entry = seen.setdefault(id(cls.recipe), (cls.recipe, []))
        entry[1].append(cls.name)
    return list(seen.values())


def cmd_download(args: argparse.Namespace) -> int:
    """``intrabench datasets download``: fetch each named recipe's files; returns the exit status.

    Args:
        args: The parsed command line: ``names`` (recipes), ``root`` (the data root),
            ``zenodo_url``, ``tcia_url``, ``quiet``.

    Returns:
        0 once every recipe's files are present.

    Raises:
        UserError: A name has no download recipe, or a download fails (one line each).
    """
    from intrabench.datasets._recipe import Urls

    urls = Urls(zenodo=args.zenodo_url, tcia=args.tcia_url)
    for recipe, names in _unique_recipes(_recipe_classes(args.names)):
        result = recipe.download(args.root, urls, progress=not args.quiet)
        if result == "present":
            print(f"{', '.join(names)}: already downloaded ({recipe.raw_dir(args.root)})")
        elif result == "downloaded":
            print(
                f"{', '.join(names)}: downloaded to {recipe.raw_dir(args.root)}; next: "
                f"intrabench datasets prepare {' '.join(names)}"
            )
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """``intrabench datasets prepare``: convert each named recipe's downloaded files; returns the
    exit status.

    Args:
        args: The parsed command line: ``names`` (recipes), ``root``, ``force`` (convert again),
            ``quiet``.

    Returns:
        0 once every recipe is prepared (skipped cases are listed with their reason).

    Raises:
        UserError: A name has no recipe, or its files are not downloaded.
    """
    for recipe, names in _unique_recipes(_recipe_classes(args.names)):
        report = recipe.prepare(args.root, progress=not args.quiet, force=args.force)
        if report.up_to_date:
            print(f"{', '.join(names)}: up to date, nothing to do")
            continue
        print(
            f"{', '.join(names)}: {len(report.written)} cases prepared, "
            f"{len(report.skipped)} skipped"
        )
        for case_id, reason in sorted(report.skipped.items()):
            print(f"  skipped {case_id}: {reason}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Each case read as ``run`` reads it (:mod:`intrabench.commands.datasets_verify`), a line each.

    Args:
        args: The parsed command line: ``names`` (dataset names, nnU-Net folders, dataset specs
            or run configs), ``root``, ``trust_modality``.

    Returns:
        0 when every case reads; 1 when a case, a layout or the class coverage has a problem
            (or a dataset has no case).

    Raises:
        UserError: A name stands for no dataset.
    """
    from intrabench.commands.datasets_verify import check_dataset, dataset_coverage, resolve
    from intrabench.wording import counted

    failed = 0
    for name in args.names:
        for item in resolve(name, args.root):
            for problem in item.layout_problems:
                print(f"{item.label}: {problem}", flush=True)
            reports = []
            for report in check_dataset(item, args.trust_modality):
                reports.append(report)
                if not (report.ok and args.quiet):
                    print(f"{item.label}/{report.line()}", flush=True)
            bad = sum(not r.ok for r in reports)
            targets = sum(r.targets for r in reports)
            coverage = dataset_coverage(item, reports)
            for line in coverage.warnings:
                print(f"{item.label}: note: {line}", flush=True)
            for line in coverage.errors:
                print(f"{item.label}: {line}", flush=True)
            ok = not item.layout_problems and not bad and reports and not coverage.errors
            print(
                f"{item.label}: {len(reports) - bad}/{len(reports)} cases ok, "
                f"{counted(targets, 'target')}" + ("" if ok else " -- PROBLEMS"),
                flush=True,
            )
            failed += 0 if ok else 1
    return 1 if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    """``intrabench datasets list``: each registered dataset and whether it is present; returns the
    exit status.

    Args:
        args: The parsed command line: ``root`` (the data root whose status is shown; None: the
            default).

    Returns:
        0.
    """
    from intrabench import registry

    rows = []
    for name, cls in registry.datasets.items():
        status = cls.availability(args.root)
        rows.append(
            [name, cls.modality, cls.targets or cls.description, cls.size, cls.licence, status]
        )
    header = ["name", "modality", "targets", "size", "licence", "status"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0


def register(
    commands: argparse._SubParsersAction, groups: dict[str, argparse._SubParsersAction]
) -> None:
    """Add the ``datasets`` subcommands to the CLI.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name; ``groups["datasets"]`` is used.
    """
    actions = groups["datasets"]

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--root", help="data root (default: $INTRABENCH_DATA or ~/.intrabench/data)"
        )
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    download = actions.add_parser(
        "download", help="download recipes' raw data (resumable, checksummed)"
    )
    download.add_argument("names", nargs="+", metavar="NAME")
    download.add_argument("--zenodo-url", help="Zenodo base URL (default https://zenodo.org)")
    download.add_argument("--tcia-url", help="TCIA NBIA API base URL")
    common(download)
    download.set_defaults(func=cmd_download)

    prepare = actions.add_parser(
        "prepare", help="convert downloads into nnU-Net folders (idempotent)"
    )
    prepare.add_argument("names", nargs="+", metavar="NAME")
    prepare.add_argument(
        "--force",
        action="store_true",
        help="convert every case again (only files prepare wrote are "
        "replaced; any other file there is refused)",
    )
    common(prepare)
    prepare.set_defaults(func=cmd_prepare)

    verify = actions.add_parser(
        "verify",
        help="read every case as 'run' does and describe it "
        "(classes, targets, spacing, orientation)",
    )
    verify.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help="dataset name, nnU-Net folder, dataset spec or run config (.yaml)",
    )
    verify.add_argument(
        "--trust-modality",
        action="store_true",
        help="read each case as its declared modality even when its intensities "
        "contradict it (a CT with no voxel below -500 HU, an MR with one)",
    )
    common(verify)
    verify.set_defaults(func=cmd_verify)

    # the 'list' action exists already (cli.py); give it the richer table and a --root
    listing = actions.choices.get("list")
    if listing is not None:
        listing.add_argument("--root", help="data root whose status is shown")
        listing.set_defaults(func=cmd_list)
