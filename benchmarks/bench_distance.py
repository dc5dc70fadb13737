"""Distance transforms: SciPy (the reference) against intrabench.masks.distance, side by side.

An ellipsoidal error crop of 85 x 198 x 223 voxels at spacing (2.5, 0.8, 0.8) mm, the size
measured in issue #13. Best of 3 per figure, on the device chosen by ``--device``.

    python benchmarks/bench_distance.py [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import ndimage

from intrabench.masks import distance

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import best_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    distance.set_device(args.device)
    z, y, x = np.ogrid[:85, :198, :223]
    mask = ((z - 42) / 40.0) ** 2 + ((y - 99) / 95.0) ** 2 + ((x - 111) / 105.0) ** 2 <= 1
    spacing = (2.5, 0.8, 0.8)
    reference = ndimage.distance_transform_edt(mask, sampling=spacing)
    error = np.abs(distance.distance_transform(mask, spacing) - reference).max()
    rows = [
        (
            "transform in mm",
            best_of(lambda: ndimage.distance_transform_edt(mask, sampling=spacing)),
            best_of(lambda: distance.distance_transform(mask, spacing)),
        ),
        (
            "squared, voxel units (exact)",
            best_of(lambda: ndimage.distance_transform_edt(mask)),
            best_of(lambda: distance.squared_voxel_distances(mask)),
        ),
        (
            "deepest voxels in mm (exact)",
            best_of(
                lambda: np.argwhere(
                    ndimage.distance_transform_edt(mask, sampling=spacing) == reference.max()
                )
            ),
            best_of(lambda: distance.deepest_voxels(mask, spacing)),
        ),
    ]
    print(f"device: {distance.active_device()}, crop {mask.shape}, spacing {spacing} mm")
    print(f"{'':32}{'scipy':>10}{'intrabench':>12}{'speed-up':>10}")
    for label, scipy_seconds, ours in rows:
        print(f"{label:32}{scipy_seconds:9.3f}s{ours:11.3f}s{scipy_seconds / ours:9.1f}x")
    print(f"largest difference from SciPy (mm transform): {error:.1e} mm")


if __name__ == "__main__":
    main()
