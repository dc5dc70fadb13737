"""A 3D model's case set-up, where the card waits: SAM-Med3D's 1.5 mm resampling by NumPy on the
CPU against torch on the model's device (prints figures; no asserts).

``set_case`` runs once per (case, model) group in the model loop, before the group's first
forward pass; on a GPU node the card waits for it. SAM-Med3D resamples the whole case to 1.5 mm
(``CentredGrid``): about a second for a CT on one CPU core. With ``preprocessing: device`` (the
default on a GPU) torch does it on the card, to the same bits. The benchmark times both ways on
generated CT-sized phantoms (160 x 512 x 512 at 2.5 x 0.8 x 0.8 mm by default) and the demo's
real cases, checks that the grids are equal to the bit, and prints the seconds and the ratio.
SegVol's set-up (foreground normalisation, on the CPU) is printed beside it for scale.

    .venv/bin/python benchmarks/bench_case_setup.py [--device cuda] [--repeats 3]
        [--shape 160 512 512] [--no-real]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from intrabench import registry
from intrabench.engine.resources import synchronize_device


def _seconds(model, image, repeats: int) -> tuple[float, np.ndarray | None]:
    """Median seconds of ``model.set_case(image)`` (a fresh case each time) and the grid."""
    times = []
    for _ in range(repeats):
        model._image = None  # the adapters skip a case they already hold
        synchronize_device()
        started = time.perf_counter()
        model.set_case(image)
        synchronize_device()
        times.append(time.perf_counter() - started)
    return statistics.median(times), getattr(model, "_grid", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shape", type=int, nargs=3, default=[160, 512, 512])
    parser.add_argument("--no-real", action="store_true", help="phantoms only")
    args = parser.parse_args()
    import torch

    if args.device == "cpu":
        torch.set_num_threads(2)
    images = []
    phantoms = registry.datasets.create("demo-phantoms", {"n_cases": 1, "shape": args.shape})
    images.append(
        (f"phantom {'x'.join(map(str, args.shape))}", phantoms.load(phantoms.case_ids()[0]).image)
    )
    if not args.no_real:
        real = registry.datasets.create("demo-real")
        images += [(case_id, real.load(case_id).image) for case_id in real.case_ids()]
    params = {"weights": "random", "tiny": True, "device": args.device}
    by_numpy = registry.models.create("sam-med3d", {**params, "preprocessing": "numpy"})
    on_device = registry.models.create("sam-med3d", {**params, "preprocessing": "device"})
    segvol = registry.models.create("segvol", params)
    on_device.set_case(images[-1][1])  # the device's first use (CUDA context, kernels) untimed
    print(f"device {args.device}; medians of {args.repeats}; SAM-Med3D's set_case (1.5 mm grid)")
    print(
        f"{'case':24s} {'shape':>14s} {'numpy s':>8s} {'device s':>9s} {'ratio':>7s} "
        f"{'equal':>6s} {'SegVol s':>9s}"
    )
    for name, image in images:
        numpy_seconds, expected = _seconds(by_numpy, image, args.repeats)
        device_seconds, got = _seconds(on_device, image, args.repeats)
        segvol_seconds, _ = _seconds(segvol, image, args.repeats)
        equal = np.array_equal(got.view(np.uint32), expected.view(np.uint32))
        print(
            f"{name:24s} {'x'.join(map(str, image.shape)):>14s} {numpy_seconds:8.3f} "
            f"{device_seconds:9.3f} {numpy_seconds / device_seconds:6.1f}x {str(equal):>6s} "
            f"{segvol_seconds:9.3f}"
        )


if __name__ == "__main__":
    main()
