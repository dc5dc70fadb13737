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
stops (on CUDA the difference is said, not fatal: kernels may round differently from one
process to the other).

Usage::

    python benchmarks/bench_served_model.py                 # both workloads
    python benchmarks/bench_served_model.py --only 3d       # one
    python benchmarks/bench_served_model.py --python /opt/other-env/bin/python
    python benchmarks/bench_served_model.py --device cuda --only mobilesam-refine \
        --phantoms 4 --shape 160 512 512        # on a card, a workload the model fills

``--device`` puts the model there (both ways); ``--phantoms N --shape Z Y X`` adds N CT-like
phantoms, written once as NIfTI files (those of ``bench_gpu_run.py`` for the same shape and
count) and read by the ``folder`` dataset, to every workload's datasets (``--phantoms-only``:
in place of them). ``--tiny`` builds a small MobileSAM with random weights (a rehearsal of the
card's command on the CPU: ``benchmarks/gpu_rehearse.sh``).
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
#: the workloads' models that build small with random weights (``--tiny``)
TINY_MODELS = {"mobilesam"}
KEYS = ["dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]


def with_options(
    workload: dict,
    device: str | None = None,
    phantoms: dict | None = None,
    phantoms_only: bool = False,
    tiny: bool = False,
) -> dict:
    """``workload`` with its models on ``device`` (when given; with ``tiny``, the 2D models
    small with random weights, for a rehearsal) and the ``phantoms`` dataset (a run config's
    dataset entry, when given) added to its datasets (with ``phantoms_only``: in their place).
    """
    spec = dict(workload)
    models = [dict(model) for model in workload["models"]]
    for model in models:
        if device is not None:
            model["device"] = device
        if tiny and model["name"] in TINY_MODELS:
            model.update(tiny=True, weights="random")
    spec["models"] = models
    if phantoms is not None:
        spec["datasets"] = [phantoms] if phantoms_only else [*workload["datasets"], phantoms]
    return spec


def run(workload: dict, out: Path, runs_in: dict | None) -> tuple[pd.DataFrame, float]:
    """One whole run of ``workload`` in this process (its model served when ``runs_in`` is
    given): its result rows and its wall time in seconds."""
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
    """Run each workload in process and served; print the wall times and the transport."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    parser.add_argument(
        "--python", default=sys.executable, help="the server's interpreter (default: this one)"
    )
    parser.add_argument("--device", help="the model's device (default: the model's own)")
    parser.add_argument("--phantoms", type=int, default=0, help="NIfTI phantoms to add")
    parser.add_argument("--shape", type=int, nargs=3, default=[32, 256, 256])
    parser.add_argument(
        "--phantoms-only", action="store_true", help="the phantoms in place of the workloads' data"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a small MobileSAM, random weights (a rehearsal)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "intrabench" / "bench-phantoms",
        help="where the NIfTI phantoms are written (once)",
    )
    args = parser.parse_args()
    names = args.only or list(WORKLOADS)
    phantoms = None
    if args.phantoms:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_gpu_run import phantom_folder_name, write_phantoms

        shape = tuple(args.shape)
        spec = write_phantoms(
            args.cache / phantom_folder_name(shape, args.phantoms), args.phantoms, shape
        )
        phantoms = {"name": "folder", "spec": str(spec), "label": "nifti-phantoms"}
    with tempfile.TemporaryDirectory(prefix="bench-served-") as folder:
        for name in names:
            workload = with_options(
                WORKLOADS[name], args.device, phantoms, args.phantoms_only, args.tiny
            )
            local, local_wall = run(workload, Path(folder) / f"{name}-local", None)
            served, served_wall = run(
                workload, Path(folder) / f"{name}-served", {"python": args.python}
            )
            identical = same_rows(local, served)
            # on a card, kernels may round differently from one process to the other: said
            if not identical and not (args.device or "").startswith("cuda"):
                sys.exit(f"{name}: the served rows differ from the in-process rows")
            local_extra, served_extra = overhead_per_call(local), overhead_per_call(served)
            transport = served_extra.sum() - local_extra.sum()
            print(
                f"## {name}: {len(served_extra)} model calls, rows "
                + ("identical" if identical else "NOT identical")
            )
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
