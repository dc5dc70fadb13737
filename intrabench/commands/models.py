"""``intrabench models verify``: hash the checkpoints that are present."""

from __future__ import annotations

import argparse


def cmd_models_verify(args: argparse.Namespace) -> int:
    from intrabench.io.checkpoints import CHECKPOINTS, checkpoint_dir, located, verify

    directory = checkpoint_dir(args.checkpoint_dir)
    unknown = sorted(set(args.names or []) - set(CHECKPOINTS))
    if unknown:
        from intrabench.errors import UserError

        raise UserError(f"unknown checkpoint {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(CHECKPOINTS))}")
    print(f"checkpoint directory: {directory}")
    failed = False
    for key in sorted(CHECKPOINTS):
        if args.names and key not in args.names:
            continue
        status, detail = verify(key, directory)
        if status != "missing" and status != "MISMATCH":
            fit = check_loads_and_fits(key, located(key, directory))
            if fit is not None:
                status, detail = "UNUSABLE", fit
        failed |= status in ("MISMATCH", "UNUSABLE")
        print(f"{key:26s} {CHECKPOINTS[key].filename:28s} {status:26s} {detail}")
    return 1 if failed else 0


def check_loads_and_fits(key: str, path) -> str | None:
    """None if checkpoint ``key`` at ``path`` loads (``weights_only``: no code runs) and fits
    the full-size network of every model that uses it; else why not."""
    from intrabench import registry
    from intrabench.io.checkpoints import CheckpointError

    for name, cls in registry.models.items():
        uses = key in getattr(cls, "VARIANTS", {}).values() or getattr(
            cls, "checkpoint_key", "") == key
        check = getattr(cls, "check_checkpoint", None)
        if not uses or check is None:
            continue
        try:
            check(path, key)
        except CheckpointError as error:
            return f"{name}: {error}"
    return None


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    verify = groups["models"].add_parser("verify", help="check checkpoint files and their sha256")
    verify.add_argument("names", nargs="*", help="checkpoint keys (default: all)")
    verify.add_argument("--checkpoint-dir", help="default: $INTRABENCH_CHECKPOINTS or "
                                                 "~/.intrabench/checkpoints")
    verify.set_defaults(func=cmd_models_verify)
