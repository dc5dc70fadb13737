"""``intrabench models verify``: hash the checkpoints that are present."""

from __future__ import annotations

import argparse


def cmd_models_verify(args: argparse.Namespace) -> int:
    from intrabench.checkpoints import CHECKPOINTS, checkpoint_dir, verify

    directory = checkpoint_dir(args.checkpoint_dir)
    print(f"checkpoint directory: {directory}")
    failed = False
    for key in sorted(CHECKPOINTS):
        if args.names and key not in args.names:
            continue
        status, detail = verify(key, directory)
        failed |= status == "MISMATCH"
        print(f"{key:26s} {CHECKPOINTS[key].filename:28s} {status:26s} {detail}")
    return 1 if failed else 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    verify = groups["models"].add_parser("verify", help="check checkpoint files and their sha256")
    verify.add_argument("names", nargs="*", help="checkpoint keys (default: all)")
    verify.add_argument("--checkpoint-dir", help="default: $INTRABENCH_CHECKPOINTS or "
                                                 "~/.intrabench/checkpoints")
    verify.set_defaults(func=cmd_models_verify)
