"""Speed-up of a Dask run with 1, 2 and 4 local worker processes on synthetic phantoms.

Each configuration runs into a fresh directory; the 1-worker Dask run is the baseline, and the
plain local executor is shown beside it. On a machine with fewer cores than workers, expect the
speed-up to flatten at the core count.

    python benchmarks/bench_scaling.py [N_CASES]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from intrabench.config import parse_config
from intrabench.execution.runner import Runner, run_distributed
from intrabench.execution.settings import DaskSettings


def config(n_cases: int):
    return parse_config(
        {
            "name": "scaling",
            "datasets": [{"name": "demo-phantoms", "n_cases": n_cases}],
            "models": ["random-walker-2d", "region-growing-3d"],
            "prompters": ["box-3d", {"name": "box-interpolation", "n_slices": 3}],
            "refiners": ["center-error-click"],
            "refinement_steps": 3,
        }
    )


def main() -> None:
    n_cases = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    run_config = config(n_cases)
    print(f"cores: {os.cpu_count()}, cases: {n_cases}")
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        Runner(run_config, Path(directory) / "local").run()
        local = time.perf_counter() - started
        print(f"local executor (1 process):   {local:7.1f} s")
        baseline = None
        for workers in (1, 2, 4):
            args = DaskSettings(workers=workers, memory_limit="2GB")
            started = time.perf_counter()
            run_distributed(run_config, Path(directory) / f"dask{workers}", args)
            seconds = time.perf_counter() - started
            baseline = baseline or seconds
            print(
                f"dask, {workers} worker(s):          {seconds:7.1f} s   "
                f"speed-up vs 1 worker: {baseline / seconds:4.2f}x"
            )


if __name__ == "__main__":
    main()
