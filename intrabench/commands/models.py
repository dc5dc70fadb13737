"""``intrabench models list`` (every model, from its card where it has one), ``intrabench models
verify`` (hash the checkpoints that are present) and ``intrabench models download`` (fetch
them, checked, into the checkpoint directory)."""

from __future__ import annotations

import argparse


def model_rows() -> list[list[str]]:
    """One row per model (name, dim, accepts, status, licence, description): the card's facts
    where the model has a card (built-in or plugin), else the class's; the status from the
    adapter's ``availability`` where it is installed, else from the card's default checkpoint
    (a card whose adapter is not importable here says so).

    Returns:
        The rows as text cells, models in name order.
    """
    from intrabench import registry
    from intrabench.interfaces import Model
    from intrabench.io.checkpoints import readiness
    from intrabench.model_cards import cards

    known = cards()
    classes = dict(registry.models.items())
    rows = []
    for name in sorted(set(classes) | set(known)):
        card, cls = known.get(name), classes.get(name)
        if cls is not None and cls.availability.__func__ is not Model.availability.__func__:
            status = cls.availability()
        elif cls is not None:  # an adapter without its own check: its card's checkpoint
            status = (
                readiness(card.default_checkpoint) if card and card.default_checkpoint else "ready"
            )
        elif card.default_checkpoint:
            status = f"not installed here (needs {', '.join(card.packages)}); " + readiness(
                card.default_checkpoint
            )
        else:
            status = f"not installed here (needs {', '.join(card.packages)})"
        if card is not None:
            rows.append(
                [
                    name,
                    f"{card.dimension}D",
                    ",".join(sorted(card.prompts)),
                    status,
                    card.licence,
                    card.description.split(". ")[0].rstrip(".") + ".",
                ]
            )
        else:
            doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
            rows.append(
                [name, f"{cls.dimension}D", ",".join(sorted(cls.accepts)), status, cls.licence, doc]
            )
    return rows


def cmd_models_verify(args: argparse.Namespace) -> int:
    """``intrabench models verify``: check checkpoint files and their SHA-256; returns the exit
    status.

    Args:
        args: The parsed command line: ``names`` (checkpoint keys or model names; empty: all),
            ``checkpoint_dir``.

    Returns:
        0 when no file checked is wrong; 1 when one does not match its pinned size or hash.

    Raises:
        UserError: A name is neither a checkpoint key nor a model with one.
    """
    from intrabench.io.checkpoints import checkpoint_dir, located, table, verify

    CHECKPOINTS = table()

    directory = checkpoint_dir(args.checkpoint_dir)
    names = [checkpoint_of_model(name) for name in args.names or []]
    unknown = sorted(set(names) - set(CHECKPOINTS))
    if unknown:
        from intrabench.errors import UserError

        raise UserError(
            f"unknown checkpoint {', '.join(unknown)}; known: {', '.join(sorted(CHECKPOINTS))}"
        )
    print(f"checkpoint directory: {directory}")
    failed = False
    for key in sorted(CHECKPOINTS):
        if names and key not in names:
            continue
        status, detail = verify(key, directory)
        if status != "missing" and status != "MISMATCH":
            fit = check_loads_and_fits(key, located(key, directory))
            if fit is not None:
                status, detail = "UNUSABLE", fit
        failed |= status in ("MISMATCH", "UNUSABLE")
        print(f"{key:26s} {CHECKPOINTS[key].filename:28s} {status:26s} {detail}")
    return 1 if failed else 0


def cmd_models_download(args: argparse.Namespace) -> int:
    """``intrabench models download``: fetch named checkpoints, checked before kept; returns the
    exit status.

    Args:
        args: The parsed command line: ``names`` (checkpoint keys or model names), ``all``
            (every downloadable checkpoint), ``checkpoint_dir``, ``quiet``.

    Returns:
        0 when every checkpoint is there; 1 when one could not be had (each said in a line).

    Raises:
        UserError: Neither names nor ``--all``, or a name that is no checkpoint.
    """
    import difflib

    from intrabench.errors import UserError
    from intrabench.io.checkpoint_download import download_checkpoint, sources
    from intrabench.io.checkpoints import checkpoint_dir, sha256_file, table
    from intrabench.io.download import DownloadError

    CHECKPOINTS = table()

    if args.all:
        names = sorted(key for key, info in CHECKPOINTS.items() if sources(info))
    elif args.names:
        names = list(dict.fromkeys(args.names))
    else:
        raise UserError(
            "name the checkpoints to download (intrabench models download "
            "mobilesam), or --all for every one that can be downloaded; the names: "
            + ", ".join(sorted(CHECKPOINTS))
        )
    names = list(dict.fromkeys(checkpoint_of_model(name) for name in names))
    for name in names:
        if name not in CHECKPOINTS:
            close = difflib.get_close_matches(name, CHECKPOINTS, n=1)
            hint = (
                " (for every one that can be downloaded: --all)"
                if name == "all"
                else f" (did you mean '{close[0]}'?)"
                if close
                else ""
            )
            raise UserError(
                f"unknown checkpoint '{name}'{hint}; known: {', '.join(sorted(CHECKPOINTS))}"
            )
    directory = checkpoint_dir(args.checkpoint_dir)
    print(f"checkpoint directory: {directory}")
    failed = 0
    for name in names:
        info = CHECKPOINTS[name]
        try:
            path, how = download_checkpoint(name, args.checkpoint_dir, progress=not args.quiet)
        except DownloadError as error:  # ChecksumError too
            print(f"{name}: FAILED: {error}")
            failed += 1
            continue
        except UserError as error:
            print(f"{name}: {error}")
            failed += 1
            continue
        pinned = (
            "sha256 checked"
            if info.sha256
            else f"no hash pinned for it ({info.unpinned or 'none known'}): compare with the "
            "publisher's before use"
        )
        where = {"present": "already there", "in package": "comes with its package"}.get(
            how, "downloaded"
        )
        print(f"{name}: {where}: {path} ({pinned})")
        if how not in ("present", "in package") and info.sha256 is None:
            print(f"{name}: sha256 {sha256_file(path)}")
    return 1 if failed else 0


def checkpoint_of_model(name: str) -> str:
    """``name`` itself when it is a checkpoint key; for a model whose checkpoints have other
    names (``sam``, ``sam2``), its default variant's key, said in one line.

    Args:
        name: A checkpoint key or a model name.

    Returns:
        The checkpoint key (an unknown name is returned as it is, for the caller to report).

    Raises:
        UserError: The model needs no checkpoint.
    """
    from intrabench import registry
    from intrabench.errors import UserError
    from intrabench.io.checkpoints import table
    from intrabench.model_cards import card

    found = card(name)
    if name in table() or (found is None and name not in registry.models.names()):
        return name
    if found is not None:  # the card says, without importing the adapter
        variants, key = found.variants, found.default_checkpoint or ""
    else:
        cls = registry.models.get(name)
        variants = cls.VARIANTS
        key = next(iter(cls.checkpoint_keys()), "")
    if not key:
        raise UserError(f"the model '{name}' needs no checkpoint")
    others = [k for k in dict.fromkeys(variants.values()) if k != key]
    print(
        f"{name}: the model's default checkpoint is {key}"
        + (f" (its other variants: {', '.join(others)})" if others else "")
    )
    return key


def check_loads_and_fits(key: str, path) -> str | None:
    """None if checkpoint ``key`` at ``path`` loads (``weights_only``: no code runs) and fits
    the full-size network of every model that uses it; else why not.

    Args:
        key: The checkpoint's key.
        path: The checkpoint file.

    Returns:
        None, or the first problem in one line.
    """
    from intrabench import registry
    from intrabench.io.checkpoints import CheckpointError

    for name, cls in registry.models.items():
        if key not in cls.checkpoint_keys():
            continue
        try:
            cls.check_checkpoint(path, key)
        except CheckpointError as error:
            return f"{name}: {error}"
    return None


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add the ``models`` subcommands to the CLI.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name; ``groups["models"]`` is used.
    """
    verify = groups["models"].add_parser("verify", help="check checkpoint files and their sha256")
    verify.add_argument("names", nargs="*", help="checkpoint keys (default: all)")
    verify.add_argument(
        "--checkpoint-dir", help="default: $INTRABENCH_CHECKPOINTS or ~/.intrabench/checkpoints"
    )
    verify.set_defaults(func=cmd_models_verify)
    download = groups["models"].add_parser(
        "download", help="download checkpoints (publisher's URL, then mirrors), sha256-checked"
    )
    download.add_argument(
        "names",
        nargs="*",
        help="checkpoint keys (intrabench models verify "
        "lists them), or model names (their default "
        "checkpoint)",
    )
    download.add_argument(
        "--all", action="store_true", help="every checkpoint that can be downloaded without a login"
    )
    download.add_argument(
        "--checkpoint-dir", help="default: $INTRABENCH_CHECKPOINTS or ~/.intrabench/checkpoints"
    )
    download.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    download.set_defaults(func=cmd_models_download)
