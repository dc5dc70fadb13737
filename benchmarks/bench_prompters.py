"""How long do the simulated users take on a clinical-size CT? Prints seconds per target.

Builds a synthetic 512 x 512 x 300 label map (z, y, x) with 30 targets (25 lesion-like
ellipsoids of 2-25 px radius and 5 organ-like ones up to 90 px), then times every registered
initial prompter and refiner on every target. Propagation prompters query an oracle 2D
"model" that returns the ground-truth slice (so only the prompter's own work is timed);
refiners see a prediction that is the target shifted by 3 px in x plus a stray blob.
For scale: building one target's boolean mask from the label map (engine work) is printed too.

    .venv/bin/python benchmarks/bench_prompters.py [--targets 30] [--shape 300 512 512]

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from intrabench import registry
from intrabench.interfaces import PromptContext, RefineContext
from intrabench.seeding import derive_rng
from intrabench.types import SlicePrompt


def make_label_map(shape: tuple[int, int, int], n_targets: int, seed: int = 0) -> np.ndarray:
    """uint8 (z, y, x) label map with targets 1..n (ellipsoids drawn inside their boxes)."""
    rng = np.random.default_rng(seed)
    label = np.zeros(shape, dtype=np.uint8)
    for index in range(1, n_targets + 1):
        organ = index > n_targets - 5
        if organ:
            radii = np.array([rng.uniform(15, 45), rng.uniform(40, 90), rng.uniform(40, 90)])
        else:
            r = rng.uniform(2, 25)
            radii = np.array([max(1.0, r * rng.uniform(0.3, 0.8)), r, r * rng.uniform(0.7, 1.3)])
        centre = [rng.uniform(radii[a] + 1, shape[a] - radii[a] - 1) for a in range(3)]
        low = [max(0, int(centre[a] - radii[a])) for a in range(3)]
        high = [min(shape[a], int(centre[a] + radii[a]) + 2) for a in range(3)]
        z, y, x = np.ogrid[low[0] : high[0], low[1] : high[1], low[2] : high[2]]
        inside = (
            ((z - centre[0]) / radii[0]) ** 2
            + ((y - centre[1]) / radii[1]) ** 2
            + ((x - centre[2]) / radii[2]) ** 2
        ) <= 1.0
        region = label[low[0] : high[0], low[1] : high[1], low[2] : high[2]]
        region[inside] = index
    return label


def imperfect_prediction(gt: np.ndarray) -> np.ndarray:
    """The target moved 3 px along x (FN on one side, FP on the other) plus a stray blob."""
    prediction = np.zeros_like(gt)
    prediction[:, :, 3:] = gt[:, :, :-3]
    zs = np.flatnonzero(gt.reshape(gt.shape[0], -1).any(axis=1))
    z = int(zs[len(zs) // 2])
    prediction[z, 5:12, 5:12] = True
    return prediction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=30)
    parser.add_argument("--shape", type=int, nargs=3, default=(300, 512, 512))
    args = parser.parse_args()
    shape = tuple(args.shape)

    started = time.perf_counter()
    label = make_label_map(shape, args.targets)
    print(
        f"volume {shape} (z, y, x), {args.targets} targets, built in "
        f"{time.perf_counter() - started:.1f} s"
    )

    prompters = [(name, registry.prompters.create(name)) for name in registry.prompters.names()]
    extra = [
        ("point-interpolation", {"n_slices": 10}),
        ("points-per-slice", {"n_points": 10}),
        ("alternating-points-per-slice", {"n_points": 10}),
        ("center-points-per-volume", {"n_points": 10}),
        ("box-interpolation", {"n_slices": 5, "shift": 5}),
    ]
    prompters += [
        (f"{n}({','.join(f'{k}={v}' for k, v in p.items())})", registry.prompters.create(n, p))
        for n, p in extra
    ]
    refiners = [(name, registry.refiners.create(name)) for name in registry.refiners.names()]
    seconds: dict[str, list[float]] = {}
    mask_seconds, voxels = [], []

    for value in range(1, args.targets + 1):
        started = time.perf_counter()
        gt = label == value
        mask_seconds.append(time.perf_counter() - started)
        if not gt.any():
            continue
        voxels.append(int(gt.sum()))

        def oracle(prompt: SlicePrompt, gt: np.ndarray = gt) -> np.ndarray:
            return gt[prompt.z]

        for name, prompter in prompters:
            context = PromptContext(
                gt,
                (1.0, 0.8, 0.8),
                derive_rng(0, "bench", value, name),
                oracle if prompter.needs_model else None,
            )
            started = time.perf_counter()
            prompter.initial(context)
            seconds.setdefault(f"initial  {name}", []).append(time.perf_counter() - started)
        prediction = imperfect_prediction(gt)
        for name, refiner in refiners:
            for dimension in sorted(refiner.dimensions):
                context = RefineContext(
                    gt,
                    prediction,
                    (1.0, 0.8, 0.8),
                    derive_rng(0, "bench", value, name, 1),
                    1,
                    dimension,
                )
                started = time.perf_counter()
                refiner.refine(context)
                seconds.setdefault(f"refiner  {name} ({dimension}D model)", []).append(
                    time.perf_counter() - started
                )

    print(f"target sizes: {min(voxels)} to {max(voxels)} voxels (median {int(np.median(voxels))})")
    print(f"{'engine   label == value (one target mask)':58s} mean {np.mean(mask_seconds):.4f} s")
    print(f"{'component':58s} {'mean s/target':>13s} {'max s':>8s} {'total s':>8s}")
    for key, values in seconds.items():
        print(f"{key:58s} {np.mean(values):13.4f} {np.max(values):8.4f} {np.sum(values):8.3f}")


if __name__ == "__main__":
    main()
