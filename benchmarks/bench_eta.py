"""How right the progress line's ETA is: runs the built-in demo and the robustness demo with a
progress line every ``--interval`` seconds (as off a terminal), and compares each line's ETA
with the time the run really had left (until ``Runner.run`` returned).

    .venv/bin/python benchmarks/bench_eta.py [--interval 1] [--configs demo robustness]

Each config runs twice with a fresh record of seconds per unit (``$INTRABENCH_CACHE`` pointed
at an empty folder): **first run** on this machine (the ETA knows only what it has timed) and
**again** (it starts from the first run's record, as every later run of these models does).
Each run is its own Python process, as each ``intrabench run`` is: a second run in the same
process would find torch, OpenVINO and the models' modules imported, and run its first groups
faster than any real run does.
Prints, per run, every line (elapsed, units done, ETA, real time left, error) and the largest
and median relative error over the lines after the first third of the run, the goal being
within 25% (issue #41). Not counted: lines whose ETA leaves out a model not timed yet (the line
says so: ``+ 1 model not timed yet``), and the lines of the run's last tenth (at least its last
3 s): a second's jitter there is a large share of nothing. Their errors are printed all the same.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"demo": None, "robustness": ROOT / "configs" / "robustness-demo.yaml"}
MIN_LEFT = 3.0


def measure(name: str, interval: float, label: str) -> dict:
    from intrabench.config import builtin_demo_path, load_config
    from intrabench.execution.progress import RunProgress
    from intrabench.execution.runner import Runner

    config = load_config(CONFIGS[name] or builtin_demo_path())
    made: list[RunProgress] = []

    def progress(units):
        made.append(RunProgress(units, stream=io.StringIO(), interval=interval, terminal=False))
        return made[-1]

    out = Path(tempfile.mkdtemp(prefix=f"eta-{name}-"))
    try:
        Runner(config, out / "run", progress=progress).run()
        ended = time.monotonic()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    tracker = made[0]
    total = ended - tracker.started
    lines, errors = [], []
    for elapsed, done, eta in tracker.history:
        left = total - elapsed
        error = None if eta is None or left <= 0 else (eta - left) / left
        counted = error is not None and elapsed >= total / 3 and left >= max(MIN_LEFT, total / 10)
        if counted:
            errors.append(abs(error))
        lines.append((elapsed, done, tracker.total, eta, left, error, counted))
    return {"name": f"{name}, {label}", "total": total, "lines": lines, "errors": errors}


def measure_in_process(name: str, interval: float, label: str) -> dict:
    """:func:`measure` in a new Python process (its result as JSON on the last line)."""
    output = subprocess.run(
        [sys.executable, __file__, "--one", name, "--label", label, "--interval", str(interval)],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    result["lines"] = [tuple(line) for line in result["lines"]]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument(
        "--configs", nargs="+", choices=sorted(CONFIGS), default=["demo", "robustness"]
    )
    parser.add_argument("--one", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--label", default="first run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one run, in this process: the parent reads its JSON
        import torch

        torch.set_num_threads(2)
        print(json.dumps(measure(args.one, args.interval, args.label)))
        return 0
    summary = []
    os.environ["INTRABENCH_CACHE"] = tempfile.mkdtemp(prefix="eta-record-")
    runs = [(name, label) for name in args.configs for label in ("first run", "again")]
    for name, label in runs:
        if label == "first run":
            (Path(os.environ["INTRABENCH_CACHE"]) / "unit-seconds.json").unlink(missing_ok=True)
        result = measure_in_process(name, args.interval, label)
        name = result["name"]
        print(f"\n{name}: {result['total']:.1f} s from the first progress line to the end")
        print(f"{'elapsed':>8} {'units':>9} {'ETA':>7} {'left':>7} {'error':>7}")
        for elapsed, done, total, eta, left, error, counted in result["lines"]:
            eta_text = "-" if eta is None else f"{eta:.1f}"
            error_text = "-" if error is None else f"{error:+.0%}"
            mark = "" if counted else "  (not counted)"
            print(
                f"{elapsed:8.1f} {done:4d}/{total:<4d} {eta_text:>7} {left:7.1f} {error_text:>7}{mark}"
            )
        errors = result["errors"]
        if errors:
            later = sum(
                1
                for line in result["lines"]
                if line[0] >= result["total"] / 3
                and result["total"] - line[0] >= max(MIN_LEFT, result["total"] / 10)
            )
            summary.append(
                f"{name}: {result['total']:.0f} s; after the first third, largest "
                f"|error| {max(errors):.0%}, median {statistics.median(errors):.0%} "
                f"over the {len(errors)} of {later} lines with a complete ETA"
            )
        else:
            summary.append(
                f"{name}: {result['total']:.0f} s; no complete ETA after the first third"
            )
    print("\n" + "\n".join(summary))
    shutil.rmtree(os.environ["INTRABENCH_CACHE"], ignore_errors=True)  # the benchmark's record
    return 0


if __name__ == "__main__":
    sys.exit(main())
