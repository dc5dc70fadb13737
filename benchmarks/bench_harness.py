"""Harness overhead: the share of wall time spent outside model forward passes.

Runs a config (default: the built-in demo) into a fresh directory and splits the wall time into
model time (inside Model.predict / SliceModel.predict_slice), simulated-user time (prompters and
refiners), metrics and everything else (loading, planning, writing results).

    python benchmarks/bench_harness.py [CONFIG]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from intrabench.config import builtin_demo_path, load_config
from intrabench.runner import Runner


def main() -> None:
    config_path = Path(sys.argv[1]) if len(sys.argv) > 1 else builtin_demo_path()
    config = load_config(config_path)
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        plan, _ = Runner(config, Path(directory)).run()
        wall = time.perf_counter() - started
        rows = pd.read_parquet(Path(directory) / "results.parquet")
    model = rows["model_seconds"].sum()
    user = rows["prompter_seconds"].sum()
    episodes = rows["wall_seconds"].sum()
    print(f"config: {config_path}")
    print(f"work units: {len(plan.units)}, rows: {len(rows)}")
    print(f"wall time of the run:           {wall:8.2f} s")
    print(f"  model forward passes:         {model:8.2f} s  ({model / wall:6.1%})")
    print(f"  simulated user (prompts):     {user:8.2f} s  ({user / wall:6.1%})")
    print(f"  metrics + episode bookkeeping:{episodes - model - user:8.2f} s  "
          f"({(episodes - model - user) / wall:6.1%})")
    print(f"  loading, planning, writing:   {wall - episodes:8.2f} s  ({(wall - episodes) / wall:6.1%})")
    print(f"harness overhead (all but model): {1 - model / wall:6.1%}")
    print(f"harness overhead excluding the simulated user: {1 - (model + user) / wall:6.1%}")


if __name__ == "__main__":
    main()
