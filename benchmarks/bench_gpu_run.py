"""Is the model busy? Wall time, throughput and the model's share of a whole run.

Two ways to run it:

* ``python benchmarks/bench_gpu_run.py CONFIG`` runs a config (e.g.
  ``benchmarks/configs/gpu-2d-refine.yaml`` on a GPU node). Its ``demo-phantoms`` datasets
  are written as NIfTI files first (cached under ``--cache``, before the clock) and read by the
  ``folder`` dataset, as a user's run reads its data (``--in-memory`` keeps the generated
  phantoms). It prints the wall time, cases per minute, the share of wall time spent in model
  forward passes (timed in the model loop) and, when a CUDA device is visible, the GPU busy
  share: NVML utilisation sampled every 250 ms (``nvidia-ml-py``), the share of samples above
  0 and their mean, for the whole run and for the **steady state** (from the first forward
  pass to the last), apart from the **start** (seconds before the first forward pass).
* ``python benchmarks/bench_gpu_run.py --proxy-ms 10`` needs no GPU: CT-sized phantoms
  (``--shape``, default 160 x 512 x 512, 6-10 lesions, ``--cases`` of them) go through
  ``synthetic-network``, a stand-in whose forward pass takes a fixed 10 ms of wall time (the
  CPU is free meanwhile, as during a synchronised GPU call) and whose masks look like a trained
  network's (the target grown from the prompt, dilated, eroded or shifted, sometimes leaking
  into a large region; see intrabench/testing/synthetic_network.py). The two GPU configs in one run: a 2D
  stand-in (10 ms per predicted slice) with a box per slice and 3-slice box and point
  interpolation, a 3D stand-in with one centre click; each refined with 3 centre-of-error
  clicks. The phantoms are written once as NIfTI files
  (cached under ``--cache``) and read by the ``folder`` dataset like a user's own data, so the
  whole command is timed, case reading included, and the synthetic data's generation is not.

The last line is ``model busy: NN.N%``: model forward time over the wall time of the run (for
the proxy, the nominal forward time, calls x ``--proxy-ms``, when the measured one is longer:
a forward pass stretched by a busy CPU would leave a GPU idle).
``--background inline`` measures the engine with every piece of work in the model loop (the
serial cost); ``--user-workers`` and ``--finish-workers`` size the worker pools.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forward_spans import timed_forward_passes  # noqa: E402
from proxy_calibration import (  # noqa: E402
    CALIBRATION_FILE,
    between_passes,
    calibration_entry,
    card_figures,
    card_of,
    entry_text,
    per_model_ms,
    read_calibration,
)

from intrabench.config import RunConfig, load_config  # noqa: E402
from intrabench.execution.runner import Runner  # noqa: E402
from intrabench.io.machine import describe_machine, machine_text  # noqa: E402
from intrabench.testing.synthetic_network import SyntheticNetwork  # noqa: E402

#: the phantoms' seed and lesions per case (``demo-phantoms`` parameters; bench_vs_naive uses them)
PHANTOM_SEED, PHANTOM_LESIONS = 0, (6, 10)


def write_phantoms(
    folder: Path,
    n_cases: int,
    shape: tuple[int, int, int],
    seed: int = PHANTOM_SEED,
    n_lesions: tuple[int, int] = PHANTOM_LESIONS,
    spacing: tuple[float, float, float] | None = None,
) -> Path:
    """CT-like phantoms as NIfTI files with a folder spec (once; reused when present)."""
    import SimpleITK as sitk

    from intrabench.datasets.phantoms import make_phantom

    spec = folder / "phantoms.yaml"
    if spec.exists():
        return spec
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(parents=True, exist_ok=True)
    extra = {} if spacing is None else {"spacing": tuple(spacing)}
    for index in range(n_cases):
        started = time.perf_counter()
        volume, label = make_phantom(seed, index, shape, n_lesions=tuple(n_lesions), **extra)
        for array, path in (
            (volume.array, folder / "images" / f"case{index:03d}.nii"),
            (label.astype(np.uint8), folder / "labels" / f"case{index:03d}.nii"),
        ):
            image = sitk.GetImageFromArray(array)
            image.SetSpacing(tuple(reversed(volume.spacing)))
            sitk.WriteImage(image, str(path), useCompression=False)
        print(f"wrote phantom {index} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "ct-phantoms",
                "images": "images/{case}.nii",
                "labels": "labels/{case}.nii",
                "classes": {"lesion": 1},
                "modality": "CT",
                "instances": "values",
            }
        )
    )
    return spec


def proxy_config(spec: Path, forward_ms: float) -> RunConfig:
    """The two GPU configs (benchmarks/configs/gpu-2d-refine.yaml, gpu-3d-refine.yaml) in one
    run, with the synthetic networks in place of SAM and of SAM-Med3D/SegVol."""
    return RunConfig.model_validate(
        {
            "name": "gpu-proxy",
            "seeds": [0],
            "datasets": [{"name": "folder", "spec": str(spec)}],
            "models": [
                {"name": "synthetic-network-2d", "forward_ms": forward_ms},
                {"name": "synthetic-network", "forward_ms": forward_ms},
            ],
            "prompters": [
                "box-per-slice",
                {"name": "box-interpolation", "n_slices": 3},
                {"name": "point-interpolation", "n_slices": 3},
                {"name": "center-points-per-volume", "n_points": 1, "label": "1-center-click"},
            ],
            "refiners": ["center-error-click"],
            "refinement_steps": 3,
        }
    )


def stand_in_config(
    config: RunConfig, forward_ms: float | dict[str, float], set_up: bool = True
) -> RunConfig:
    """``config`` with each model replaced by the stand-in of its kind (``synthetic-network-2d``
    for a slice model, ``synthetic-network`` for a volume model) taking ``forward_ms`` per
    forward pass (per predicted slice in 2D; a number for every model, or one per model key),
    labelled with the model's key so rows keep their names, and taking the prompt kinds the
    model takes (a stand-in for SegVol, which takes no previous mask, is not refined: the same
    forward passes as the real run); datasets, prompters, refiners and steps stay as they are:
    the same phases. ``set_up``: each stand-in also builds its real model on the CPU and runs
    the model's ``set_case`` on every case (``setup_of``), so the run has the real one's builds
    and per-case set-up between its forward passes; never its forward passes."""
    from intrabench.interfaces import SliceModel, model_accepts
    from intrabench.registry import constructor_parameters
    from intrabench.registry import models as model_registry

    stand_ins = []
    for spec in config.models:
        model_cls = model_registry.get(spec.name)
        stand_in = (
            "synthetic-network-2d" if issubclass(model_cls, SliceModel) else "synthetic-network"
        )
        takes = model_accepts(model_cls, spec.params) & model_registry.get(stand_in).accepts
        entry = {
            "name": stand_in,
            "label": spec.key,
            "accepts": sorted(takes),
            "forward_ms": (forward_ms[spec.key] if isinstance(forward_ms, dict) else forward_ms),
            "stands_for": spec.name,
        }
        if set_up:
            params = dict(spec.params)
            if "device" in constructor_parameters(model_cls)[0]:
                params["device"] = "cpu"
            entry["setup_of"] = {"name": spec.name, "params": params}
        stand_ins.append(entry)
    return RunConfig.model_validate({**config.model_dump(exclude_none=True), "models": stand_ins})


def phantom_folder_name(
    shape: tuple[int, ...],
    n_cases: int,
    seed: int = PHANTOM_SEED,
    lesions: tuple[int, int] = PHANTOM_LESIONS,
    spacing: tuple[float, ...] | None = None,
) -> str:
    """The cache folder's name of these phantoms (every benchmark that writes the same
    phantoms reuses the same files)."""
    return f"{'x'.join(map(str, shape))}-n{n_cases}-seed{seed}-lesions{lesions[0]}-{lesions[1]}" + (
        f"-sp{'x'.join(map(str, spacing))}" if spacing else ""
    )


def phantoms_as_files(config: RunConfig, cache: Path) -> RunConfig:
    """``config`` with each ``demo-phantoms`` dataset written as NIfTI files (once, cached
    under ``cache`` by its parameters) and read by the ``folder`` dataset, as a user's run
    reads its files; the dataset's label is kept, so rows name it as before."""
    datasets = []
    for spec in config.datasets:
        if spec.name != "demo-phantoms":
            datasets.append(spec.model_dump(exclude_none=True))
            continue
        params = spec.params
        shape = tuple(int(v) for v in params.get("shape", (32, 96, 96)))
        n_cases, seed = int(params.get("n_cases", 4)), int(params.get("seed", 0))
        lesions = tuple(int(v) for v in params.get("n_lesions", (2, 4)))
        spacing = params.get("spacing")
        written = write_phantoms(
            cache / phantom_folder_name(shape, n_cases, seed, lesions, spacing),
            n_cases,
            shape,
            seed,
            lesions,
            spacing,
        )
        datasets.append({"name": "folder", "spec": str(written), "label": spec.key})
    return RunConfig.model_validate({**config.model_dump(exclude_none=True), "datasets": datasets})


class GpuSampler:
    """NVML utilisation of GPU 0 every ``period`` seconds in a thread (no-op without NVML)."""

    def __init__(self, period: float = 0.25) -> None:
        self.period = period
        self.samples: list[int] = []
        #: perf_counter() of each sample
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nvml = pynvml
        except Exception:  # no NVML, no GPU: nothing to sample
            self._nvml = None

    def __enter__(self) -> GpuSampler:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            self.times.append(time.perf_counter())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class NoRows(RuntimeError):
    """The run gave no row to measure (every model skipped, say); the first problem."""


def measure(config: RunConfig, runner_options: dict) -> dict[str, float]:
    spans: list[tuple[float, float]] = []
    names = sorted({spec.name for spec in config.models})
    forwards_before = SyntheticNetwork.total_forward_calls
    by_model_before = dict(SyntheticNetwork.forward_calls_by_model)
    nominal_before = SyntheticNetwork.nominal_forward_seconds
    with (
        tempfile.TemporaryDirectory() as directory,
        timed_forward_passes(names, spans),
        GpuSampler() as sampler,
    ):
        started = time.perf_counter()
        runner = Runner(config, Path(directory), **runner_options)
        plan, problems = runner.run()
        wall = time.perf_counter() - started
        rows = pd.read_parquet(Path(directory) / "results.parquet")
    for problem in problems:
        print(f"  problem: {problem}", file=sys.stderr)
    if rows.empty:
        raise NoRows(str(problems[0]) if problems else "nothing was run")
    model = sum(end - start for start, end in spans)
    forwards = SyntheticNetwork.total_forward_calls - forwards_before
    nominal = SyntheticNetwork.nominal_forward_seconds - nominal_before
    samples = np.array(sampler.samples, dtype=float)
    times = np.array(sampler.times)
    steady = (
        (times >= spans[0][0]) & (times <= spans[-1][1]) if spans else np.zeros(len(samples), bool)
    )
    steady_model = (
        sum(end - start for start, end in spans) / (spans[-1][1] - spans[0][0])
        if spans
        else float("nan")
    )
    cases = rows[["dataset", "case"]].drop_duplicates().shape[0]
    return {
        "wall": wall,
        "model": model,
        "calls": len(spans),
        "forwards": forwards,
        # the stand-ins' forward passes by the model they stand for (per slice in 2D)
        "forwards_by_model": {
            name: count - by_model_before.get(name, 0)
            for name, count in SyntheticNetwork.forward_calls_by_model.items()
            if count > by_model_before.get(name, 0)
        },
        "nominal": nominal,
        "units": len(plan.units),
        "rows": len(rows),
        "cases": cases,
        "before": spans[0][0] - started if spans else float("nan"),
        "after": started + wall - spans[-1][1] if spans else float("nan"),
        "user": float(rows["prompter_seconds"].sum()),
        "metrics": float(rows["metric_seconds"].sum()),
        "gpu_samples": len(sampler.samples),
        "gpu_busy": (
            float(np.mean(np.array(sampler.samples) > 0)) if sampler.samples else float("nan")
        ),
        "gpu_mean": float(np.mean(sampler.samples)) if sampler.samples else float("nan"),
        "gpu_steady_samples": int(steady.sum()),
        "gpu_steady_busy": float(np.mean(samples[steady] > 0)) if steady.any() else float("nan"),
        "gpu_steady_mean": float(np.mean(samples[steady])) if steady.any() else float("nan"),
        "model_steady": steady_model,
        "loop_lines": runner.loop_clock.lines(),
        "loop_phases": {name: row["seconds"] for name, row in runner.loop_clock.summary().items()},
        # per model: forward passes (steps with a forward pass) and their latency seconds
        # (CUDA synchronised), for a calibration per model
        "per_model": {
            name: (int(group["latency_seconds"].gt(0).sum()), float(group["latency_seconds"].sum()))
            for name, group in rows.groupby("model", sort=False)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", type=Path)
    parser.add_argument(
        "--proxy-ms",
        type=float,
        help="no GPU: synthetic network with this forward time on CT phantoms",
    )
    parser.add_argument(
        "--proxy-of",
        type=Path,
        metavar="CONFIG",
        help="no GPU: CONFIG with its models replaced by stand-ins whose forward "
        "pass takes a card's measured time (benchmarks/configs/"
        "gpu-calibration.yaml, or --proxy-ms), compared phase by phase "
        "with the card's figures",
    )
    parser.add_argument(
        "--set-up",
        choices=["real", "none"],
        default="real",
        help="--proxy-of: the stand-ins also build each real model on the CPU "
        "and run its per-case set-up (real, the default: the real run's "
        "phases between forward passes), or not (none: forward passes "
        "and the engine only)",
    )
    parser.add_argument(
        "--figures-out",
        type=Path,
        metavar="FILE.json",
        help="write the run's figures for the proxy's calibration (a card "
        "run: each model's forward seconds, start, steady state)",
    )
    parser.add_argument(
        "--calibrate-from",
        type=Path,
        metavar="FILE.json",
        help="--proxy-of: print the gpu-calibration.yaml entry that makes the "
        "stand-ins take the forward time of the card run that wrote FILE "
        "(--figures-out), per model",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        default=CALIBRATION_FILE,
        metavar="FILE",
        help="--proxy-of: the calibration table (default: %(default)s)",
    )
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--shape", type=int, nargs=3, default=[160, 512, 512])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "intrabench"
        / "bench-phantoms",
    )
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="CONFIG: keep demo-phantoms generated in memory (no files read)",
    )
    parser.add_argument("--background", choices=["process", "inline"], default="process")
    parser.add_argument("--user-workers", type=int)
    parser.add_argument("--finish-workers", type=int)
    parser.add_argument(
        "--reader-workers",
        type=int,
        help="processes reading cases ahead (default: one per four cores)",
    )
    parser.add_argument(
        "--build-ahead",
        choices=["auto", "yes", "no"],
        default="auto",
        help="build the next model beside the current one's last group "
        "(auto: where there is room for both, as intrabench run does)",
    )
    args = parser.parse_args()
    if (
        args.config is not None
        and (args.proxy_of is not None or args.proxy_ms is not None)
        or args.config is None
        and args.proxy_of is None
        and args.proxy_ms is None
    ):
        parser.error("give a CONFIG, --proxy-ms MS or --proxy-of CONFIG [--proxy-ms MS]")
    if args.figures_out is not None and not args.figures_out.parent.is_dir():
        parser.error(f"--figures-out {args.figures_out}: no folder {args.figures_out.parent}")
    card_run: dict = {}
    if args.calibrate_from is not None:
        if args.proxy_of is None:
            parser.error("--calibrate-from needs --proxy-of CONFIG (the card run's configuration)")
        try:
            card_run = json.loads(args.calibrate_from.read_text())
        except (OSError, ValueError) as error:
            parser.error(f"--calibrate-from {args.calibrate_from}: {str(error)[:200]}")
        if not isinstance(card_run, dict):
            parser.error(f"--calibrate-from {args.calibrate_from}: not a card run's figures")
    calibration: dict = {}
    if args.proxy_of is not None:
        try:
            calibration = read_calibration(args.proxy_of, args.calibration)
        except (OSError, ValueError, yaml.YAMLError) as error:
            parser.error(str(error).splitlines()[0])
        original = load_config(args.proxy_of)
        card_models = card_run.get("forward_by_model") if card_run else None
        if card_run and (
            not isinstance(card_models, dict)
            or set(card_models) != {spec.name for spec in original.models}
        ):
            parser.error(
                f"--calibrate-from {args.calibrate_from}: its models "
                f"({', '.join(sorted(map(str, card_models or {})))[:200]}) are not those "
                f"of {args.proxy_of.name}"
            )
        forward_ms: float | dict[str, float]
        if args.proxy_ms is not None:
            forward_ms = args.proxy_ms
        elif card_run:
            forward_ms = 10.0  # any time: the proxy's passes are counted, not timed
        elif "proxy_ms" not in calibration:
            parser.error(
                f"{args.calibration.name} has no proxy_ms for {args.proxy_of.name}: give --proxy-ms"
            )
        else:
            try:
                forward_ms = per_model_ms(calibration["proxy_ms"], keys_and_names(original))
            except ValueError as error:
                parser.error(f"{args.calibration.name}: {error}")
        config = stand_in_config(
            phantoms_as_files(original, args.cache), forward_ms, set_up=args.set_up == "real"
        )
        times = (
            f"{forward_ms:g} ms"
            if not isinstance(forward_ms, dict)
            else ", ".join(f"{key}: {ms:g} ms" for key, ms in forward_ms.items())
        )
        label = (
            f"proxy of {args.proxy_of}: stand-ins at {times} per forward pass (phantoms "
            "read from NIfTI files; "
            + (
                "the real models built and set up on the CPU)"
                if args.set_up == "real"
                else "no real model built)"
            )
        )
        args.proxy_ms = forward_ms
    elif args.proxy_ms is not None:
        shape = tuple(args.shape)
        folder = args.cache / f"{shape[0]}x{shape[1]}x{shape[2]}-n{args.cases}"
        config = proxy_config(write_phantoms(folder, args.cases, shape), args.proxy_ms)
        label = (
            f"proxy: synthetic-network {args.proxy_ms:g} ms/forward, {args.cases} phantoms {shape}"
        )
    else:
        config = load_config(args.config)
        label = f"config: {args.config}"
        if not args.in_memory:
            config = phantoms_as_files(config, args.cache)
            label += " (phantoms read from NIfTI files)"
    options: dict = {"background": args.background}
    if args.user_workers is not None:
        options["user_workers"] = args.user_workers
    if args.finish_workers is not None:
        options["finish_workers"] = args.finish_workers
    if args.reader_workers is not None:
        options["reader_workers"] = args.reader_workers
    if args.build_ahead != "auto":
        options["build_ahead"] = args.build_ahead == "yes"
    try:
        result = measure(config, options)
    except NoRows as error:
        hint = (
            "; --set-up none runs the stand-ins without building the real models"
            if args.proxy_of is not None and args.set_up == "real"
            else ""
        )
        sys.exit(f"bench_gpu_run.py: the run gave no rows: {str(error)[:300]}{hint}")
    print(label)
    print(f"cores: {len(os.sched_getaffinity(0))}, runner: {options}")
    print(f"work units {result['units']}, rows {result['rows']}, forward calls {result['calls']}")
    print(f"wall time                      {result['wall']:8.2f} s")
    print(f"cases per minute               {60 * result['cases'] / result['wall']:8.2f}")
    print(f"before the first forward pass  {result['before']:8.2f} s")
    print(f"model forward passes           {result['model']:8.2f} s")
    print(f"between forward passes         {between_passes(result):8.2f} s")
    print(f"after the last forward pass    {result['after']:8.2f} s")
    print(f"simulated user (all processes) {result['user']:8.2f} s")
    print(f"metrics (all processes)        {result['metrics']:8.2f} s")
    for name, (steps, seconds) in result["per_model"].items():
        print(
            f"  {name}: {steps} steps with a forward pass, {seconds:.2f} s "
            f"({1000 * seconds / max(steps, 1):.0f} ms each)"
        )
    print("where the model loop's time went (intrabench.execution.loop_clock):")
    for line in result["loop_lines"]:
        print(f"  {line}")

    print(f"machine: {machine_text(describe_machine())}")
    print(
        f"start: before the first forward pass {result['before']:.2f} s; steady state: model "
        f"busy {result['model_steady']:.1%} of the time from the first forward pass to the "
        "last"
    )
    if result["gpu_samples"]:
        print(
            f"GPU busy (NVML samples > 0)    {result['gpu_busy']:8.1%} of "
            f"{result['gpu_samples']} samples, mean utilisation {result['gpu_mean']:.1f}%"
        )
        print(
            f"GPU busy, steady state         {result['gpu_steady_busy']:8.1%} of "
            f"{result['gpu_steady_samples']} samples, mean utilisation "
            f"{result['gpu_steady_mean']:.1f}%"
        )
    busy = result["model"]
    if args.proxy_ms is not None:
        # conservative: a forward pass stretched by CPU contention would leave a GPU idle
        nominal = result["nominal"]
        print(
            f"nominal forward time           {nominal:8.2f} s ({result['forwards']} forwards "
            "at their calibrated times)"
        )
        busy = min(busy, nominal)
        print(f"model busy, steady state (nominal forward time): {nominal_steady(result):.1%}")
    print(f"model busy: {100 * busy / result['wall']:.1f}%")
    if args.figures_out is not None:
        card = describe_machine().get("gpu") or "no GPU"
        figures = card_figures(
            result, keys_and_names(config), str(card), str(args.config or args.proxy_of or label)
        )
        try:
            args.figures_out.write_text(json.dumps(figures, indent=1) + "\n")
        except OSError as error:
            sys.exit(f"bench_gpu_run.py: --figures-out {args.figures_out}: {error.strerror}")
        print(f"figures for the proxy's calibration: {args.figures_out}")
    if card_run:
        try:
            entry = calibration_entry(card_run, result["forwards_by_model"])
        except ValueError as error:
            sys.exit(f"--calibrate-from {args.calibrate_from}: {error}")
        print(
            f"\nthe entry of {args.proxy_of.name} in {args.calibration.name} for the card run "
            f"of {args.calibrate_from} (then run --proxy-of again to compare):\n"
        )
        print(
            entry_text(
                args.proxy_of.name,
                entry,
                f"{entry['card']['name']}: {args.calibrate_from.name}; proxy_ms = the "
                "card's forward seconds of each model over the proxy's passes "
                f"{result['forwards_by_model']}",
            )
        )
    elif calibration:
        card_name, card = card_of(calibration)
        if card:
            print_comparison(result, card_name, card)


def nominal_steady(result: dict) -> float:
    """The model's busy share from the first forward pass to the last, at the stand-ins'
    nominal forward time where a busy CPU stretched a pass (a card would have been idle)."""
    return min(
        result["model_steady"],
        result["nominal"] / (result["wall"] - result["before"] - result["after"]),
    )


def keys_and_names(config: RunConfig) -> list[tuple[str, str]]:
    """(key, registered name) of each model of ``config``."""
    return [(spec.key, spec.name) for spec in config.models]


def print_comparison(result: dict, card_name: str, card: dict) -> None:
    """The proxy's phases beside the card's (same configuration), and their ratios."""
    nominal = result["nominal"]
    rows = [
        ("wall (s)", result["wall"], card.get("wall")),
        ("start: before the 1st forward pass (s)", result["before"], card.get("start")),
        ("model forward passes (s)", nominal, card.get("forward")),
        ("between forward passes (s)", between_passes(result), card.get("between")),
        ("model busy, steady state", nominal_steady(result), card.get("model_steady")),
        ("model busy, whole run", nominal / result["wall"], card.get("model_whole")),
    ]
    print(f"\nproxy against the {card_name} (same configuration):")
    print(f"{'':42s} {'proxy':>9s} {'card':>9s} {'proxy/card':>10s}")
    for name, mine, theirs in rows:
        text = "-" if theirs is None else f"{theirs:9.3g}"
        ratio = "-" if not theirs else f"{mine / theirs:10.2f}"
        print(f"{name:42s} {mine:9.3g} {text:>9s} {ratio:>10s}")
    card_phases = card.get("phases")
    if isinstance(card_phases, dict) and card_phases:
        print("\nthe model loop's phases (s), proxy and card:")
        mine_phases = result.get("loop_phases", {})
        for name in [*mine_phases, *(n for n in card_phases if n not in mine_phases)]:
            mine, theirs = mine_phases.get(name), card_phases.get(name)
            print(
                f"  {name:40s} {'-' if mine is None else f'{mine:9.2f}':>9s} "
                f"{'-' if theirs is None else f'{theirs:9.2f}':>9s}"
            )


if __name__ == "__main__":
    main()
