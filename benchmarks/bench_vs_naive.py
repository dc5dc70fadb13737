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
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def model_params(args: argparse.Namespace) -> dict:
    params = {"weights": "random", "device": args.device}
    if not args.full:
        params["tiny"] = True
    return params


def naive_loop(spec_path: Path, params: dict) -> dict:
    """The plain SamPredictor loop over every case, target and slice (runs in the child)."""
    import numpy as np
    import SimpleITK as sitk
    from segment_anything import SamPredictor

    from intrabench import registry

    root = spec_path.parent
    net = registry.models.create("sam", params).net  # the same network intrabench builds
    predictor = SamPredictor(net)
    dices, slices = [], 0
    for image_path in sorted((root / "images").glob("*.nii")):
        image = sitk.GetArrayFromImage(sitk.ReadImage(str(image_path)))
        label = sitk.GetArrayFromImage(sitk.ReadImage(str(root / "labels" / image_path.name)))
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
    parser.add_argument("--naive-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.naive_child:  # the plain loop, in its own process
        print(json.dumps(naive_loop(args.naive_child, json.loads(args.params))))
        return

    sys.path.insert(0, str(HERE))
    from bench_gpu_run import write_phantoms

    shape = tuple(args.shape)
    spec = write_phantoms(args.cache / f"{shape[0]}x{shape[1]}x{shape[2]}-n{args.cases}",
                          args.cases, shape)
    params = model_params(args)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    naive_seconds, output = timed([sys.executable, __file__, "--naive-child", str(spec),
                                   "--params", json.dumps(params)], env)
    naive = json.loads(output.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "vs-naive.yaml"
        config.write_text(yaml.safe_dump({
            "name": "vs-naive", "datasets": [{"name": "folder", "spec": str(spec)}],
            "models": [{"name": "sam", **params}], "prompters": ["box-per-slice"]}))
        run_seconds, _ = timed([sys.executable, "-m", "intrabench", "run", str(config),
                                "--out", str(Path(folder) / "run")], env)
        import pandas as pd

        rows = pd.read_parquet(Path(folder) / "run" / "results.parquet")
    print(f"phantoms: {args.cases} x {shape}, model: sam {params}")
    print(f"targets {naive['targets']}, slices with a box {naive['slices']}")
    print(f"{'':28s} {'wall':>8s} {'mean Dice':>10s}")
    print(f"{'plain SamPredictor loop':28s} {naive_seconds:7.1f}s {naive['dice']:10.3f}")
    print(f"{'intrabench run':28s} {run_seconds:7.1f}s {rows['dice'].mean():10.3f}")
    print(f"intrabench speed-up over the plain loop: {naive_seconds / run_seconds:.2f}x")


if __name__ == "__main__":
    main()
