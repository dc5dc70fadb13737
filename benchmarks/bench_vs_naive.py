"""IntraBench against the loop a user writes instead: SAM with a box on every slice.

Both are whole commands in fresh processes, timed from start to exit, on the same phantoms
(written once as NIfTI files, as in ``bench_gpu_run.py``):

* **plain loop**: ``segment_anything.SamPredictor``; for every target, for every slice it
  covers: ``set_image`` (the slice, windowed to 8 bit, as RGB) and ``predict(box=...)``, then
  Dice of the target's mask. This is what the SAM README shows, applied to a volume.
* **intrabench run**: a config with the same model, ``box-per-slice`` and no refinement
  (metrics, result rows and the summary table included).

Usage::

    python benchmarks/bench_vs_naive.py                       # tiny random SAM, CPU, small phantoms
    python benchmarks/bench_vs_naive.py --full --device cuda --shape 160 512 512   # ViT-H, GPU

``--source generated`` uses no files: both commands generate the same phantoms in memory
(through the same ``demo-phantoms`` dataset parameters), as issue #13's own
measurement did. It is the one to use where SimpleITK is missing (the carried GPU
environment, ``benchmarks/gpu_session.sh``). Generating the phantoms is timed apart and
printed: the loop pays it in line, the run overlaps it with the model.

``--full`` builds SAM ViT-H with random weights (no checkpoint needed: timing only). The last
line is ``intrabench speed-up over the plain loop: N.NNx``. Mean Dice of both is printed as a
sanity check (random weights: both meaningless but the same order of magnitude).
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
        yield (sitk.GetArrayFromImage(sitk.ReadImage(str(image_path))),
               sitk.GetArrayFromImage(sitk.ReadImage(str(root / "labels" / image_path.name))))


def dataset_cases(dataset: dict) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(image, label) arrays, (z, y, x), of every case of a dataset given as in a run config
    (``{"name": ..., **params}``): the cases the run reads."""
    from intrabench import registry

    params = dict(dataset)
    loaded = registry.datasets.create(params.pop("name"), params)
    for case_id in loaded.case_ids():
        case = loaded.load(case_id)
        yield case.image.array, case.label


def naive_loop(cases: Iterable[tuple[np.ndarray, np.ndarray]], params: dict) -> dict:
    """The plain SamPredictor loop over every case, target and slice (runs in the child)."""
    from segment_anything import SamPredictor

    from intrabench import registry

    net = registry.models.create("sam", params).net  # the same network intrabench builds
    predictor = SamPredictor(net)
    dices, slices = [], 0
    for image, label in cases:
        low, high = np.percentile(image, (0.5, 99.5))
        scaled = (np.clip((image - low) / max(high - low, 1e-6), 0, 1) * 255).astype(np.uint8)
        for value in np.unique(label[label > 0]):
            truth = label == value
            predicted = np.zeros_like(truth)
            for z in np.flatnonzero(truth.any(axis=(1, 2))):
                ys, xs = np.nonzero(truth[z])
                predictor.set_image(np.repeat(scaled[z][..., None], 3, axis=2))
                masks, _, _ = predictor.predict(
                    box=np.array([xs.min(), ys.min(), xs.max(), ys.max()]),
                    multimask_output=False)
                predicted[z] = masks[0]
                slices += 1
            overlap = np.count_nonzero(predicted & truth)
            dices.append(2 * overlap / (np.count_nonzero(predicted) + np.count_nonzero(truth)))
    return {"targets": len(dices), "slices": slices, "dice": float(np.mean(dices))}


def timed(command: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[32, 256, 256])
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="SAM ViT-H (random weights)")
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "intrabench" / "bench-phantoms")
    parser.add_argument("--source", choices=("nifti", "generated"), default="nifti",
                        help="phantoms written once as NIfTI files (default) or generated in "
                             "memory by both commands (no SimpleITK needed)")
    parser.add_argument("--child", choices=("loop", "generate"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape = tuple(args.shape)
    if args.child:  # the plain loop, or the phantoms' generation alone, in its own process
        cases = (nifti_cases(args.spec) if args.source == "nifti"
                 else dataset_cases(json.loads(args.dataset)))
        if args.child == "generate":
            print(json.dumps({"cases": sum(1 for _ in cases)}))
        else:
            print(json.dumps(naive_loop(cases, json.loads(args.params))))
        return

    sys.path.insert(0, str(HERE))
    from bench_gpu_run import PHANTOM_LESIONS, PHANTOM_SEED, write_phantoms

    child = [sys.executable, __file__, "--source", args.source]
    if args.source == "nifti":
        spec = write_phantoms(args.cache / f"{shape[0]}x{shape[1]}x{shape[2]}-n{args.cases}",
                              args.cases, shape)
        child += ["--spec", str(spec)]
        dataset = {"name": "folder", "spec": str(spec)}
    else:
        dataset = {"name": "demo-phantoms", "n_cases": args.cases, "shape": list(shape),
                   "seed": PHANTOM_SEED, "n_lesions": list(PHANTOM_LESIONS)}
        child += ["--dataset", json.dumps(dataset)]
    params = model_params(args)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    naive_seconds, output = timed([*child, "--child", "loop", "--params", json.dumps(params)],
                                  env)
    naive = json.loads(output.strip().splitlines()[-1])
    generation_seconds = None
    if args.source == "generated":
        generation_seconds, _ = timed([*child, "--child", "generate"], env)
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "vs-naive.yaml"
        config.write_text(yaml.safe_dump({
            "name": "vs-naive", "datasets": [dataset],
            "models": [{"name": "sam", **params}], "prompters": ["box-per-slice"]}))
        run_seconds, _ = timed([sys.executable, "-m", "intrabench", "run", str(config),
                                "--out", str(Path(folder) / "run")], env)
        import pandas as pd

        rows = pd.read_parquet(Path(folder) / "run" / "results.parquet")
    print(f"phantoms: {args.cases} x {shape} ({args.source}), model: sam {params}")
    print(f"targets {naive['targets']}, slices with a box {naive['slices']}")
    print(f"{'':28s} {'wall':>8s} {'mean Dice':>10s}")
    print(f"{'plain SamPredictor loop':28s} {naive_seconds:7.1f}s {naive['dice']:10.3f}")
    print(f"{'intrabench run':28s} {run_seconds:7.1f}s {rows['dice'].mean():10.3f}")
    if generation_seconds is not None:
        print(f"{'generating the phantoms':28s} {generation_seconds:7.1f}s "
              "(a process that only generates them; in both commands)")
    run_targets = len(rows[["case", "target"]].drop_duplicates())
    if naive["targets"] != run_targets:
        print(f"warning: the loop saw {naive['targets']} targets, the run {run_targets}")
    print(f"intrabench speed-up over the plain loop: {naive_seconds / run_seconds:.2f}x")


if __name__ == "__main__":
    main()
