"""Harness overhead: the share of wall time spent outside model forward passes.

Runs a config (default: the built-in demo) into fresh directories, alternating the runner's two
ways of finishing units, ``--repeats`` times each, side by side in one process:

* ``inline``: metrics, rows, prediction files and unit files are made in the model loop
  (serial; what every executor did before the background lane);
* ``process``: they are made by a worker subprocess beside the model loop (the default of
  ``intrabench run``).

For each, the wall time is split into model time (inside Model.predict /
SliceModel.predict_slice), simulated-user time (prompters and refiners, model calls excluded),
the rest of the model loop, and everything outside the episodes (loading, planning, waiting for
the lane, consolidating). Metrics time is printed too; in ``process`` mode it is spent in the
worker. Medians over the repeats. Because a busy second core can slow the model loop down,
the overhead of the pipelined run is also given against the *inline* run's model time
(conservative).

    python benchmarks/bench_harness.py [CONFIG] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from intrabench.config import builtin_demo_path, load_config
from intrabench.runner import Runner

MODES = ("inline", "process")


def measure(config, mode: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        plan, _ = Runner(config, Path(directory), background=mode).run()
        wall = time.perf_counter() - started
        rows = pd.read_parquet(Path(directory) / "results.parquet")
    return {
        "wall": wall,
        "model": float(rows["model_seconds"].sum()),
        "user": float(rows["prompter_seconds"].sum()),
        "loop": float(rows["wall_seconds"].sum()),
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
    print(f"{'':34}" + "".join(f"{mode:>18}" for mode in MODES))

    def line(label: str, key: str) -> None:
        cells = "".join(f"{m[key]:8.2f} s ({m[key] / m['wall']:5.1%})" for m in median.values())
        print(f"{label:34}{cells}")

    print(f"{'wall time of the run':34}" + "".join(f"{m['wall']:8.2f} s{'':8}"
                                                    for m in median.values()))
    line("  model forward passes", "model")
    line("  simulated user (prompts)", "user")
    for m in median.values():
        m["rest_of_loop"] = m["loop"] - m["model"] - m["user"]
        m["outside"] = m["wall"] - m["loop"]
    line("  rest of the model loop", "rest_of_loop")
    line("  outside the episodes", "outside")
    line("metrics (process: in the worker)", "metrics")
    print(f"{'harness overhead (1 - model/wall)':34}"
          + "".join(f"{1 - m['model'] / m['wall']:17.1%} " for m in median.values()))
    inline, process = median["inline"], median["process"]
    print(f"pipelined run against the inline run's model time: "
          f"{1 - inline['model'] / process['wall']:.1%} overhead; "
          f"wall-time speed-up {inline['wall'] / process['wall']:.2f}x")


if __name__ == "__main__":
    main()
