"""What serving a model from another process costs: the same run in process and served, side
by side in one invocation.

Two workloads:

* **mobilesam-refine**: the demo's MobileSAM refinement (one click per slice, then corrective
  clicks on every slice with an error, their mask fed back) on the demo's three real cases;
* **3d**: region growing (a 3D model) with a 3D box and scribble corrections on the real cases
  and three CT phantoms.

Each runs twice: in this process, and ``runs_in: {python: <this interpreter>}`` (the server is
started as another environment's would be; the image goes over once per case as a file in
/dev/shm). Printed per workload: the whole run's wall time both ways; per model call, the
call's wall time (``latency_seconds``) less the model's own compute (``model_seconds``), which
is the in-process bookkeeping and, served, the transport (request, answer, mask packing); and
the transport's share of the served run (its calls' extra seconds over the run's wall). The
rows are compared too: they must be identical outside the timing columns, or the benchmark
stops.

Usage::

    python benchmarks/bench_served_model.py                 # both workloads
    python benchmarks/bench_served_model.py --only 3d       # one
    python benchmarks/bench_served_model.py --python /opt/other-env/bin/python
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

WORKLOADS = {
    "mobilesam-refine": {
        "datasets": ["demo-real"],
        "models": [{"name": "mobilesam"}],
        "prompters": [{"name": "center-point-per-slice", "label": "1-point-per-slice"}],
        "refiners": [{"name": "corrective-point-per-slice", "label": "click-per-slice"}],
        "refinement_steps": 3,
    },
    "3d": {
        "datasets": ["demo-real", {"name": "demo-phantoms", "n_cases": 3, "label": "phantoms"}],
        "models": [{"name": "region-growing-3d"}],
        "prompters": ["box-3d"],
        "refiners": ["scribble"],
        "refinement_steps": 3,
    },
}
KEYS = ["dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]


def run(workload: dict, out: Path, runs_in: dict | None) -> tuple[pd.DataFrame, float]:
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner
    from intrabench.io.results import load_results

    spec = dict(workload)
    if runs_in is not None:
        spec["models"] = [{**model, "runs_in": runs_in} for model in workload["models"]]
    config = RunConfig.model_validate({"name": "bench-served", **spec})
    config.validate_components()
    started = time.perf_counter()
    runner = Runner(config, out)
    runner.run()
    wall = time.perf_counter() - started
    if runner.failures:
        sys.exit(f"{out}: {runner.failures[0].describe()}")
    return load_results(out), wall


def overhead_per_call(rows: pd.DataFrame) -> pd.Series:
    """Each model call's wall time less the model's compute, in seconds."""
    calls = rows[rows["latency_seconds"].notna() & ~rows["converged"].astype(bool)]
    return (calls["latency_seconds"] - calls["model_seconds"]).clip(lower=0)


def same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    kept = [c for c in a.columns if not c.endswith("_seconds") and c != "peak_host_mb"]
    a = a[kept].sort_values(KEYS).reset_index(drop=True)
    b = b[kept].sort_values(KEYS).reset_index(drop=True)
    return a.equals(b)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    parser.add_argument(
        "--python", default=sys.executable, help="the server's interpreter (default: this one)"
    )
    args = parser.parse_args()
    names = args.only or list(WORKLOADS)
    with tempfile.TemporaryDirectory(prefix="bench-served-") as folder:
        for name in names:
            local, local_wall = run(WORKLOADS[name], Path(folder) / f"{name}-local", None)
            served, served_wall = run(
                WORKLOADS[name], Path(folder) / f"{name}-served", {"python": args.python}
            )
            if not same_rows(local, served):
                sys.exit(f"{name}: the served rows differ from the in-process rows")
            local_extra, served_extra = overhead_per_call(local), overhead_per_call(served)
            transport = served_extra.sum() - local_extra.sum()
            print(f"## {name}: {len(served_extra)} model calls, rows identical")
            print(
                f"run wall: in process {local_wall:.1f} s, served {served_wall:.1f} s "
                f"({served_wall / local_wall:.3f}x)"
            )
            print(
                f"per call, wall less model compute: in process "
                f"{1000 * local_extra.median():.1f} ms median, served "
                f"{1000 * served_extra.median():.1f} ms median "
                f"({1000 * served_extra.mean():.1f} ms mean)"
            )
            print(
                f"transport: {transport:.2f} s in all = {100 * transport / served_wall:.1f}% "
                f"of the served run (goal <= 3%)\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
