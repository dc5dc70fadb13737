"""What the comparison and rank tables cost (issue 70): every pair of the demo's configurations
per dataset and overall (bootstrap, Wilcoxon, Holm) and the rank distributions, on the rows of
a finished demo run; and the same on a larger synthetic table (40 configurations x 3 datasets
x 200 cases, 3 classes), to show the resampling is vectorised (one matrix product per dataset).
Torch is not involved; numpy is held to 2 threads. Best of 3 per figure.

    .venv/bin/intrabench run --out /tmp/demo-run       # once
    OMP_NUM_THREADS=2 python benchmarks/bench_comparisons.py /tmp/demo-run
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from intrabench.reports.comparisons import comparison_results  # noqa: E402


def best_of(function, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def synthetic(n_configs: int = 40, n_datasets: int = 3, n_cases: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    cases = np.repeat(np.arange(n_cases), 3)
    frames = []
    for d in range(n_datasets):
        for m in range(n_configs):
            frames.append(
                pd.DataFrame(
                    {
                        "dataset": f"D{d}",
                        "case": cases,
                        "target": np.arange(cases.size),
                        "target_class": np.tile(["a", "b", "c"], n_cases),
                        "model": f"m{m}",
                        "prompter": "p",
                        "refiner": "none",
                        "seed": 0,
                        "step": 0,
                        "dice": rng.random(cases.size),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    from intrabench.io.results import load_results

    if len(sys.argv) > 1:
        rows = load_results(sys.argv[1])
        n_configs = len(rows.groupby(["model", "prompter", "refiner"]))
        for n_boot in (1000, 2000):
            seconds = best_of(lambda n=n_boot: comparison_results(rows, n_boot=n))
            print(
                f"demo run ({n_configs} configurations, {rows['dataset'].nunique()} datasets, "
                f"{rows['case'].nunique()} cases), {n_boot} resamples: comparisons + ranks "
                f"{seconds:.2f} s"
            )
    rows = synthetic()
    seconds = best_of(lambda: comparison_results(rows, n_boot=1000), repeats=1)
    print(
        f"synthetic (40 configurations, 780 pairs x 4 scopes, 3 datasets x 200 cases), 1000 "
        f"resamples: comparisons + ranks {seconds:.2f} s"
    )


if __name__ == "__main__":
    main()
