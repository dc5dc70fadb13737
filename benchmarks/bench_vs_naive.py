"""IntraBench against the loops a user writes instead: SAM with a box on every slice.

All are whole commands in fresh processes, timed from launch to exit, on the same phantoms
(written once as NIfTI files and read by each command, as a user's run reads its data; as in
``bench_gpu_run.py``):

* **plain loop**: ``segment_anything.SamPredictor``; for every target, for every slice it
  covers: ``set_image`` (the slice, windowed to 8 bit, as RGB) and ``predict(box=...)``, then
  Dice of the target's mask. This is what the SAM README shows, applied to a volume.
* **careful loop**: the same, written by a user who caches: every slice that some target
  covers is given to ``set_image`` once per case, and each target's box on it is decoded from
  that embedding (``predict(box=...)``). A speed-up over the plain loop alone is not a figure
  a reviewer accepts: both are printed.
* **intrabench run**: a config with the same model, ``box-per-slice`` and no refinement
  (metrics, result rows and the summary table included), at the model's default precision
  (``auto``: bf16 autocast on CUDA, float32 on the CPU); on CUDA also at ``precision: fp32``,
  the loops' precision.

Each command's start (from its launch to its first forward pass: the loops record their first
``set_image``, the run goes through ``benchmarks/timed_command.py``) and its steady state (from
there to its exit) are printed apart, with the steady states' ratios: on a GPU the start
(Python, torch and CUDA initialisation, ViT-H built with random weights on the CPU) is a large
share of every command, and every command pays it alike.

Usage::

    python benchmarks/bench_vs_naive.py                       # tiny random SAM, CPU, small phantoms
    python benchmarks/bench_vs_naive.py --full --device cuda --shape 160 512 512   # ViT-H, GPU

``--source generated`` uses no files: every command generates the same phantoms in memory
(through the same ``demo-phantoms`` dataset parameters), as issue #13's own measurement did;
generating them is timed apart and printed (the loops pay it in line, the run overlaps it with
building the model). It needs no SimpleITK.

``--full`` builds SAM ViT-H with random weights (no checkpoint needed: timing only). The last
lines are ``intrabench speed-up over the plain loop: N.NNx`` and ``... over the careful loop:
N.NNx`` (whole commands, the run at its default precision). Mean Dice of each is printed as a
sanity check (random weights: meaningless, but the run's is near the loops'; the two loops' masks
must give the same Dice for every target, or the benchmark stops).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent


def model_params(args: argparse.Namespace) -> dict:
    params = {"weights": "random", "device": args.device}
    if not args.full:
        params["tiny"] = True
    return params


def nifti_cases(spec_path: Path) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(image, label) arrays, (z, y, x), of the phantoms written as NIfTI files."""
    import SimpleITK as sitk

    root = spec_path.parent
    for image_path in sorted((root / "images").glob("*.nii")):
        yield (
            sitk.GetArrayFromImage(sitk.ReadImage(str(image_path))),
            sitk.GetArrayFromImage(sitk.ReadImage(str(root / "labels" / image_path.name))),
        )


def dataset_cases(dataset: dict) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(image, label) arrays, (z, y, x), of every case of a dataset given as in a run config
    (``{"name": ..., **params}``): the cases the run reads."""
    from intrabench import registry

    params = dict(dataset)
    loaded = registry.datasets.create(params.pop("name"), params)
    for case_id in loaded.case_ids():
        case = loaded.load(case_id)
        yield case.image.array, case.label


def naive_loop(
    cases: Iterable[tuple[np.ndarray, np.ndarray]], params: dict, careful: bool = False
) -> dict:
    """The SamPredictor loop over every case, target and slice (runs in the child).

    Plain: ``set_image`` for every (target, slice). Careful: ``set_image`` once for every slice
    of a case that some target covers, then each target's box decoded from it. Returns the
    count of targets, ``set_image`` calls and boxes, the mean Dice, and the wall-clock time
    (seconds since the epoch) of the first ``set_image``.
    """
    from segment_anything import SamPredictor

    from intrabench import registry

    net = registry.models.create("sam", params).net  # the same network intrabench builds
    predictor = SamPredictor(net)
    dices, encodes, boxes = [], 0, 0
    first_forward_at = None
    for image, label in cases:
        low, high = np.percentile(image, (0.5, 99.5))
        scaled = (np.clip((image - low) / max(high - low, 1e-6), 0, 1) * 255).astype(np.uint8)
        values = [int(v) for v in np.unique(label[label > 0])]
        truths = {value: label == value for value in values}
        predicted = {value: np.zeros_like(truth) for value, truth in truths.items()}
        # (z, target) in the plain loop's order: target by target, each slice it covers
        work = [
            (int(z), value)
            for value, truth in truths.items()
            for z in np.flatnonzero(truth.any(axis=(1, 2)))
        ]
        if careful:
            work.sort()  # slice by slice: each slice is encoded once
        encoded_z = None
        for z, value in work:
            if not careful or z != encoded_z:
                if first_forward_at is None:
                    first_forward_at = time.time()
                predictor.set_image(np.repeat(scaled[z][..., None], 3, axis=2))
                encoded_z = z
                encodes += 1
            ys, xs = np.nonzero(truths[value][z])
            masks, _, _ = predictor.predict(
                box=np.array([xs.min(), ys.min(), xs.max(), ys.max()]), multimask_output=False
            )
            predicted[value][z] = masks[0]
            boxes += 1
        for value, truth in truths.items():
            overlap = np.count_nonzero(predicted[value] & truth)
            dices.append(
                2 * overlap / (np.count_nonzero(predicted[value]) + np.count_nonzero(truth))
            )
    return {
        "targets": len(dices),
        "encodes": encodes,
        "boxes": boxes,
        "dices": dices,
        "dice": float(np.mean(dices)),
        "first_forward_at": first_forward_at,
    }


def timed(command: list[str], env: dict) -> tuple[float, str]:
    """Run ``command`` to its exit (the benchmark stops on a failure); wall time and stdout."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def run_intrabench(
    dataset: dict, params: dict, folder: Path, env: dict
) -> tuple[float, float, object]:
    """One whole ``intrabench run`` of ``box-per-slice`` through ``timed_command.py``: its wall
    time, its start (seconds from its launch to its first forward pass) and its result rows."""
    import pandas as pd

    tag = params.get("precision", "default")
    config = folder / f"vs-naive-{tag}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "vs-naive",
                "datasets": [dataset],
                "models": [{"name": "sam", **params}],
                "prompters": ["box-per-slice"],
            }
        )
    )
    spans = folder / f"spans-{tag}.json"
    launched = time.time()
    seconds, _ = timed(
        [
            sys.executable,
            str(HERE / "timed_command.py"),
            "sam",
            str(spans),
            "run",
            str(config),
            "--out",
            str(folder / f"run-{tag}"),
        ],
        env,
    )
    start = json.loads(spans.read_text())["first_forward_at"] - launched
    return seconds, start, pd.read_parquet(folder / f"run-{tag}" / "results.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[32, 256, 256])
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="SAM ViT-H (random weights)")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "intrabench"
        / "bench-phantoms",
    )
    parser.add_argument(
        "--source",
        choices=("nifti", "generated"),
        default="nifti",
        help="phantoms written once as NIfTI files (default) or generated in "
        "memory by every command (no SimpleITK needed)",
    )
    parser.add_argument("--child", choices=("loop", "careful", "generate"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape = tuple(args.shape)
    if args.child:  # a loop, or the phantoms' generation alone, in its own process
        cases = (
            nifti_cases(args.spec)
            if args.source == "nifti"
            else dataset_cases(json.loads(args.dataset))
        )
        if args.child == "generate":
            print(json.dumps({"cases": sum(1 for _ in cases)}))
        else:
            print(
                json.dumps(
                    naive_loop(cases, json.loads(args.params), careful=args.child == "careful")
                )
            )
        return

    sys.path.insert(0, str(HERE))
    from bench_gpu_run import PHANTOM_LESIONS, PHANTOM_SEED, phantom_folder_name, write_phantoms

    child = [sys.executable, __file__, "--source", args.source]
    if args.source == "nifti":  # the same files as bench_gpu_run.py's for the same phantoms
        spec = write_phantoms(
            args.cache / phantom_folder_name(shape, args.cases), args.cases, shape
        )
        child += ["--spec", str(spec)]
        dataset = {"name": "folder", "spec": str(spec)}
    else:
        dataset = {
            "name": "demo-phantoms",
            "n_cases": args.cases,
            "shape": list(shape),
            "seed": PHANTOM_SEED,
            "n_lesions": list(PHANTOM_LESIONS),
        }
        child += ["--dataset", json.dumps(dataset)]
    params = model_params(args)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    loops = {}
    for kind, name in (("loop", "plain SamPredictor loop"), ("careful", "careful loop")):
        launched = time.time()
        seconds, output = timed([*child, "--child", kind, "--params", json.dumps(params)], env)
        result = json.loads(output.strip().splitlines()[-1])
        loops[name] = (seconds, result["first_forward_at"] - launched, result)
    generation_seconds = None
    if args.source == "generated":
        generation_seconds, _ = timed([*child, "--child", "generate"], env)
    precisions = [{}]
    if args.device.startswith("cuda"):  # auto is bf16 there: fp32 too, the loops' precision
        precisions.append({"precision": "fp32"})
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        for extra in precisions:
            name = "intrabench run" + (f", {extra['precision']}" if extra else "")
            runs[name] = run_intrabench(dataset, {**params, **extra}, Path(folder), env)
    plain = loops["plain SamPredictor loop"][2]
    careful = loops["careful loop"][2]
    if plain["dices"] != careful["dices"]:  # the same embeddings, the same boxes
        sys.exit("the careful loop's masks differ from the plain loop's")
    print(f"phantoms: {args.cases} x {shape} ({args.source}), model: sam {params}")
    print(
        f"targets {plain['targets']}, boxes {plain['boxes']}; set_image calls: plain loop "
        f"{plain['encodes']}, careful loop {careful['encodes']}"
    )
    print(f"{'':28s} {'wall':>8s} {'start':>8s} {'steady':>8s} {'mean Dice':>10s}")
    for name, (seconds, start, result) in loops.items():
        print(
            f"{name:28s} {seconds:7.1f}s {start:7.1f}s {seconds - start:7.1f}s "
            f"{result['dice']:10.3f}"
        )
    for name, (seconds, start, rows) in runs.items():
        print(
            f"{name:28s} {seconds:7.1f}s {start:7.1f}s {seconds - start:7.1f}s "
            f"{rows['dice'].mean():10.3f}"
        )
    print("(start: from the launch to the first forward pass; steady: from there to the exit)")
    if generation_seconds is not None:
        print(
            f"{'generating the phantoms':28s} {generation_seconds:7.1f}s "
            "(a process that only generates them; in every command)"
        )
    for name, (_, _, rows) in runs.items():
        run_targets = len(rows[["case", "target"]].drop_duplicates())
        if plain["targets"] != run_targets:
            print(f"warning: the loops saw {plain['targets']} targets, {name} {run_targets}")
    for name, (seconds, start, _) in runs.items():
        print(
            f"{name}, steady state: "
            + ", ".join(
                f"{(loop_s - loop_start) / (seconds - start):.2f}x the {loop}'s"
                for loop, (loop_s, loop_start, _) in loops.items()
            )
        )
    run_seconds = runs["intrabench run"][0]
    print(
        f"intrabench speed-up over the plain loop: "
        f"{loops['plain SamPredictor loop'][0] / run_seconds:.2f}x"
    )
    print(
        f"intrabench speed-up over the careful loop: {loops['careful loop'][0] / run_seconds:.2f}x"
    )


if __name__ == "__main__":
    main()
