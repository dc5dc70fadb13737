"""Time-aware numbers under load, in both waiting modes: the time-aware demo run on a quiet
machine and again while ``--busy`` processes spin on every core, then the time table of each
run with measured waiting and with the quiet run's latency table (``waiting: table``).

    .venv/bin/python benchmarks/bench_waiting_modes.py [--busy 4] [--config configs/time-aware-demo.yaml]

Prints per configuration Waiting s and Dice@60s x100 for (quiet, loaded) x (measured, table):
measured waiting moves with the load, the table's does not (issue #41, item 10).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def run(config_path: Path, out: Path, busy: int) -> float:
    from intrabench.config import load_config
    from intrabench.execution.runner import Runner

    stop = multiprocessing.Event()
    spinners = [
        multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(busy)
    ]
    for process in spinners:
        process.start()
    started = time.perf_counter()
    try:
        Runner(load_config(config_path), out).run()
    finally:
        stop.set()
        for process in spinners:
            process.join()
    return time.perf_counter() - started


def table(run_dir: Path, latency_table: Path | None) -> pd.DataFrame:
    from intrabench.io.results import load_results
    from intrabench.timing.table import run_time_model, time_table

    model = run_time_model(run_dir)
    if latency_table is not None:
        model = model.waiting_from(latency_table)
    shown = time_table(load_results(run_dir), model)
    return shown.set_index(["Model", "Prompter", "Refiner"])[["Waiting s", "Dice@60s x100"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=4, help="spinning processes in the loaded run")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "time-aware-demo.yaml")
    args = parser.parse_args()
    from intrabench.io.results import load_results
    from intrabench.timing.waiting import measure_table, save_table

    work = Path(tempfile.mkdtemp(prefix="waiting-modes-"))
    quiet_seconds = run(args.config, work / "quiet", 0)
    loaded_seconds = run(args.config, work / "loaded", args.busy)
    latency = work / "latency.json"
    save_table(measure_table(load_results(work / "quiet")), latency, None, [str(work / "quiet")])
    columns = {}
    for name in ("quiet", "loaded"):
        for mode, source in (("measured", None), ("table", latency)):
            part = table(work / name, source)
            for column in part:
                columns[(column, f"{name}, {mode}")] = part[column]
    frame = pd.DataFrame(columns).sort_index(axis=1)
    pd.set_option("display.width", 250)
    print(
        f"quiet run {quiet_seconds:.0f} s, loaded run ({args.busy} busy processes) "
        f"{loaded_seconds:.0f} s\n"
    )
    print(frame.to_string())
    for column in ("Waiting s", "Dice@60s x100"):
        measured = (frame[(column, "loaded, measured")] - frame[(column, "quiet, measured")]).abs()
        tabled = (frame[(column, "loaded, table")] - frame[(column, "quiet, table")]).abs()
        print(
            f"\n{column}: loaded - quiet, largest |difference|: measured {measured.max():.2f}, "
            f"table {tabled.max():.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
