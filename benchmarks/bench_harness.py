"""Harness overhead: the share of wall time spent outside model forward passes.

Runs a config (default: the built-in demo) into fresh directories, alternating the runner's two
ways of working, ``--repeats`` times each, side by side in one process:

* ``inline``: everything in the model loop, one episode after the other: prompts and
  corrections, metrics, rows, prediction files, unit files (what every executor did first);
* ``process`` (the default of ``intrabench run``): the model loop keeps a few episodes in
  flight, their simulated users answer from a worker process, and a second worker finishes
  units (metrics, rows, files) beside it (docs/architecture.md, "Runs and results").

The model's forward passes (``predict``, and ``segment_slice`` when a propagation prompter
queries a 2D model) are timed in the model loop itself, so the wall time splits into: model
forward passes, before the first one (planning, first case read), between them (prompting when
inline, bookkeeping, waiting for a prompt), and after the last one (finishing the last units,
consolidating). Where the simulated user and the metrics spent their time is printed too.
Medians over the repeats. A busy second core slows the model loop down, so the overhead of the
pipelined run is also given against the *inline* run's model time (conservative).

    python benchmarks/bench_harness.py [CONFIG] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from intrabench import registry
from intrabench.config import builtin_demo_path, load_config
from intrabench.runner import Runner

MODES = ("inline", "process")


@contextmanager
def timed_forward_passes(model_names: list[str], spans: list[tuple[float, float]]):
    """Record (start, end) of every outermost forward pass of these models' classes."""
    depth = [0]
    originals = []

    def wrap(cls: type, name: str) -> None:
        original = cls.__dict__.get(name)
        inherited = getattr(cls, name)

        def timed(self, *args, **kwargs):
            depth[0] += 1
            started = time.perf_counter()
            try:
                return inherited(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spans.append((started, time.perf_counter()))

        originals.append((cls, name, original))
        setattr(cls, name, timed)

    for model_name in model_names:
        cls = registry.models.get(model_name)
        wrap(cls, "predict")
        if hasattr(cls, "segment_slice"):
            wrap(cls, "segment_slice")
    try:
        yield
    finally:
        for cls, name, original in reversed(originals):
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)


def measure(config, mode: str) -> dict[str, float]:
    spans: list[tuple[float, float]] = []
    names = sorted({spec.name for spec in config.models})
    with tempfile.TemporaryDirectory() as directory, timed_forward_passes(names, spans):
        started = time.perf_counter()
        plan, _ = Runner(config, Path(directory), background=mode).run()
        ended = time.perf_counter()
        rows = pd.read_parquet(Path(directory) / "results.parquet")
    model = sum(end - start for start, end in spans)
    return {
        "wall": ended - started,
        "model": model,
        "before": spans[0][0] - started,
        "between": spans[-1][1] - spans[0][0] - model,
        "after": ended - spans[-1][1],
        "user": float(rows["prompter_seconds"].sum()),
        "metrics": float(rows["metric_seconds"].sum()),
        "units": len(plan.units),
        "rows": len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", type=Path, default=builtin_demo_path())
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = load_config(args.config)
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.repeats):
        for mode in MODES:
            runs[mode].append(measure(config, mode))
    median = {mode: {key: statistics.median(r[key] for r in runs[mode]) for key in runs[mode][0]}
              for mode in MODES}
    first = median[MODES[0]]
    print(f"config: {args.config}")
    print(f"work units: {int(first['units'])}, rows: {int(first['rows'])}, "
          f"medians of {args.repeats} alternating runs per mode")
    print(f"{'':44}" + "".join(f"{mode:>18}" for mode in MODES))

    def line(label: str, key: str) -> None:
        cells = "".join(f"{m[key]:8.2f} s ({m[key] / m['wall']:5.1%})" for m in median.values())
        print(f"{label:44}{cells}")

    print(f"{'wall time of the run':44}" + "".join(f"{m['wall']:8.2f} s{'':8}"
                                                    for m in median.values()))
    line("  model forward passes (model loop)", "model")
    line("  before the first forward pass", "before")
    line("  between forward passes", "between")
    line("  after the last forward pass", "after")
    line("simulated user (process: mostly in a worker)", "user")
    line("metrics (process: in a worker)", "metrics")
    print(f"{'harness overhead (1 - model/wall)':44}"
          + "".join(f"{1 - m['model'] / m['wall']:17.1%} " for m in median.values()))
    inline, process = median["inline"], median["process"]
    print(f"pipelined run against the inline run's model time: "
          f"{1 - inline['model'] / process['wall']:.1%} overhead; "
          f"wall-time speed-up {inline['wall'] / process['wall']:.2f}x")


if __name__ == "__main__":
    main()
