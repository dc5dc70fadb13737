"""Run configs/results-demo.yaml and write docs/results.md with its figures.

    .venv/bin/python scripts/make_results_page.py

Resumes the run in intrabench-runs/results-demo when it is there (delete the folder to run it
anew); the tables depend only on the config and seeds, so regenerating gives the same tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ".venv/bin/python scripts/make_results_page.py"


def machine() -> str:
    import torch

    from intrabench.io.machine import describe_machine

    facts = describe_machine()  # torch imported: its threads are known
    return (
        f"{facts['architecture']} CPU, {facts['cores']} cores, torch {torch.__version__} "
        f"with {facts['torch_threads']} threads"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "intrabench-runs" / "results-demo",
        help="the run folder (default: intrabench-runs/results-demo)",
    )
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "results.md")
    args = parser.parse_args()
    from intrabench.cli import main as intrabench
    from intrabench.reports.results_page import render

    status = intrabench(
        ["run", str(ROOT / "configs" / "results-demo.yaml"), "--out", str(args.out)]
    )
    if status != 0:
        return status
    render(args.out, args.page, args.page.parent / "images" / "results", COMMAND, machine())
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
