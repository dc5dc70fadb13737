"""What the paper-style tables' intervals cost: ``cell_statistics`` against ``build_table``.

Synthetic final-step rows of a paper-sized study (configurations x datasets x cases, each case
with a few targets of two classes, one seed) are built once; then the table alone, the table's
n and intervals (:func:`intrabench.reports.tables.cell_statistics`, 1000 resamples) and
``statistics.csv``'s :func:`~intrabench.evaluation.aggregate.dataset_statistics` on the same
rows are timed (best of ``--repeat``), with the ratios.

Usage::

    python benchmarks/bench_table_intervals.py                      # 29 configs, 10 datasets
    python benchmarks/bench_table_intervals.py --configs 6 --datasets 3 --cases 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd


def synthetic_rows(configs: int, datasets: int, cases: int, targets: int, seed: int = 0):
    """Final-step rows: ``configs`` configurations x ``datasets`` x ``cases`` x ``targets``
    targets per case (two classes), Dice uniform in [0.3, 0.95)."""
    rng = np.random.default_rng(seed)
    records = []
    for c in range(configs):
        for d in range(datasets):
            for k in range(cases):
                for t in range(targets):
                    records.append(
                        {
                            "run": "r",
                            "model": f"model{c % 4}",
                            "prompter": f"prompter{c // 4}",
                            "refiner": "none",
                            "seed": 0,
                            "step": 0,
                            "dataset": f"D{d + 1}",
                            "case": f"case{k:03d}",
                            "target": f"t{t}",
                            "target_class": f"class{t % 2}",
                            "dice": float(rng.uniform(0.3, 0.95)),
                            "effort_label": "1 box",
                            "cumulative_effort": 1,
                        }
                    )
    return pd.DataFrame(records)


def best_of(repeat: int, function) -> tuple[float, object]:
    """The shortest of ``repeat`` wall times of ``function()`` (s), and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    """Time the table, its cells and statistics.csv; print the figures and ratios."""
    from intrabench.evaluation.aggregate import dataset_statistics
    from intrabench.reports.tables import build_table, cell_statistics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=29)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = synthetic_rows(args.configs, args.datasets, args.cases, args.targets)
    table_s, table = best_of(args.repeat, lambda: build_table(rows, iterations=False))
    cells_s, cells = best_of(args.repeat, lambda: cell_statistics(table, rows, n_boot=args.n_boot))
    stats_s, _ = best_of(
        args.repeat,
        lambda: dataset_statistics(
            rows, "dice", config=("run", "model", "prompter", "refiner", "step"), n_boot=args.n_boot
        ),
    )
    print(
        f"{len(rows)} rows: {args.configs} configurations x {args.datasets} datasets x "
        f"{args.cases} cases x {args.targets} targets; {len(cells)} cells, {args.n_boot} resamples"
    )
    print(f"build_table         {table_s:8.3f} s")
    print(f"cell_statistics     {cells_s:8.3f} s  ({cells_s / table_s:.1f}x the table)")
    print(
        f"dataset_statistics  {stats_s:8.3f} s  (cells / statistics.csv: {cells_s / stats_s:.2f})"
    )


if __name__ == "__main__":
    main()
