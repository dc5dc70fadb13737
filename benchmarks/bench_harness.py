"""Harness overhead: the share of wall time spent outside model forward passes.

Runs a config (default: the built-in demo) into fresh directories, alternating the runner's
ways of working, ``--repeats`` times each, side by side in one process:

* ``inline``: everything in the model loop, one episode after the other: prompts and
  corrections, metrics, rows, prediction files, unit files (what every executor did first);
* ``process`` (the default of ``intrabench run``): a worker finishes units (metrics, rows,
  files) beside the model loop and another reads the next case; with user workers (one per
  four cores by default, none below four) the loop also keeps a few episodes in flight and
  their simulated users answer from worker processes (docs/architecture.md, "Runs and
  results"); ``--user-workers N`` adds a column with N of them.

The model's forward passes (``predict``, and ``segment_slice`` when a propagation prompter
queries a 2D model) are timed in the model loop itself, so the wall time splits into: model
forward passes, before the first one (planning, first case read), between them (prompting when
inline, bookkeeping, waiting for a prompt), and after the last one (finishing the last units,
consolidating). Where the simulated user and the metrics spent their time is printed too.
Medians over the repeats. A busy second core slows the model loop down, so the overhead of the
pipelined run is also given against the *inline* run's model time (conservative).

    python benchmarks/bench_harness.py [CONFIG] [--repeats 3] [--user-workers 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from forward_spans import timed_forward_passes

from intrabench import registry
from intrabench.config import builtin_demo_path, load_config
from intrabench.execution.loop_clock import PHASES
from intrabench.execution.runner import Runner, default_user_workers

#: column name -> Runner keyword arguments
MODES = {"inline": {"background": "inline"}, "process": {"background": "process"}}


@contextmanager
def timed_model_construction(seconds: list[float]):
    """Add the time spent building models (weights initialised or loaded) to ``seconds``."""
    create = registry.models.create

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return create(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    registry.models.create = timed
    try:
        yield
    finally:
        registry.models.create = create


def measure(config, options: dict) -> dict[str, float]:
    spans: list[tuple[float, float]] = []
    construction: list[float] = []
    names = sorted({spec.name for spec in config.models})
    with (
        tempfile.TemporaryDirectory() as directory,
        timed_forward_passes(names, spans),
        timed_model_construction(construction),
    ):
        started = time.perf_counter()
        runner = Runner(config, Path(directory), **options)
        plan, _ = runner.run()
        ended = time.perf_counter()
        rows = pd.read_parquet(Path(directory) / "results.parquet")
    model = sum(end - start for start, end in spans)
    return {
        "wall": ended - started,
        "model": model,
        "construction": sum(construction),
        "before": spans[0][0] - started,
        "between": spans[-1][1] - spans[0][0] - model,
        "after": ended - spans[-1][1],
        "user": float(rows["prompter_seconds"].sum()),
        "metrics": float(rows["metric_seconds"].sum()),
        "units": len(plan.units),
        "rows": len(rows),
        # the model loop's phases (intrabench.execution.loop_clock), prefixed "loop: "
        **{f"loop: {phase}": row["seconds"] for phase, row in runner.loop_clock.summary().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", type=Path, default=builtin_demo_path())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--user-workers",
        type=int,
        nargs="*",
        default=[],
        help="also run process mode with these numbers of user workers "
        "(the default depends on the core count)",
    )
    args = parser.parse_args()
    config = load_config(args.config)
    modes = dict(MODES)
    for count in args.user_workers:
        modes[f"users={count}"] = {"background": "process", "user_workers": count}
    print(f"process mode's default here: {default_user_workers()} user workers")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for _ in range(args.repeats):
        for mode, options in modes.items():
            runs[mode].append(measure(config, options))
    keys = {key for mode_runs in runs.values() for r in mode_runs for key in r}
    median = {
        mode: {key: statistics.median(r.get(key, 0.0) for r in runs[mode]) for key in sorted(keys)}
        for mode in modes
    }
    first = median["inline"]
    print(f"config: {args.config}")
    print(
        f"work units: {int(first['units'])}, rows: {int(first['rows'])}, "
        f"medians of {args.repeats} alternating runs per mode"
    )
    print(f"{'':44}" + "".join(f"{mode:>18}" for mode in modes))

    def line(label: str, key: str) -> None:
        cells = "".join(f"{m[key]:8.2f} s ({m[key] / m['wall']:5.1%})" for m in median.values())
        print(f"{label:44}{cells}")

    print(
        f"{'wall time of the run':44}"
        + "".join(f"{m['wall']:8.2f} s{'':8}" for m in median.values())
    )
    line("  model forward passes (model loop)", "model")
    line("  before the first forward pass", "before")
    line("  between forward passes", "between")
    line("  after the last forward pass", "after")
    line("  (building the models, within the above)", "construction")
    line("simulated user (process: mostly in a worker)", "user")
    line("metrics (process: in a worker)", "metrics")
    print("the model loop's time by phase (intrabench.execution.loop_clock):")
    phases = [key for key in first if key.startswith("loop: ")]
    order = {f"loop: {name}": index for index, name in enumerate(PHASES + ("untracked",))}
    for key in sorted(phases, key=lambda k: order.get(k, len(order))):
        line(f"  {key[len('loop: ') :]}", key)
    print(
        f"{'harness overhead (1 - model/wall)':44}"
        + "".join(f"{1 - m['model'] / m['wall']:17.1%} " for m in median.values())
    )
    print(
        f"{'  the same, model building not counted':44}"
        + "".join(
            f"{1 - m['model'] / (m['wall'] - m['construction']):17.1%} " for m in median.values()
        )
    )
    inline = median["inline"]
    for mode in list(modes)[1:]:
        other = median[mode]
        print(
            f"{mode} against the inline run's model time: "
            f"{1 - inline['model'] / other['wall']:.1%} overhead; "
            f"wall-time speed-up {inline['wall'] / other['wall']:.2f}x"
        )


if __name__ == "__main__":
    main()
