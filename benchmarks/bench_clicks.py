"""What a realistic click costs the simulated user, against the baseline centre click.

One click in a lesion-sized 3D region (an ellipsoid of about 40 000 voxels at (2.5, 0.8,
0.8) mm) and in a liver-sized one (1.7 million voxels), and one 2D click on the lesion's middle
slice, for each built-in clickability model; the baseline strategy (the deepest voxel) beside
them. Best of 5 per figure; the ratio is to the baseline click of the same region.

    python benchmarks/bench_clicks.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from intrabench import registry
from intrabench.clicks.policy import ClickPolicy, ImageWindow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import best_of  # noqa: E402

SPACING = (2.5, 0.8, 0.8)


def ellipsoid(radii: tuple[int, int, int]) -> np.ndarray:
    z, y, x = np.ogrid[tuple(slice(-r - 6, r + 7) for r in radii)]
    return (z / radii[0]) ** 2 + (y / radii[1]) ** 2 + (x / radii[2]) ** 2 <= 1


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'region':28s} {'model':16s} {'ms per click':>12s} {'x baseline':>10s}")
    for name, region in (
        ("lesion 3D", ellipsoid((8, 30, 30))),
        ("lesion 2D (middle slice)", ellipsoid((8, 30, 30))[14]),
        ("liver-sized 3D", ellipsoid((40, 100, 100))),
    ):
        volume = region if region.ndim == 3 else region[None]
        image = np.where(volume, 60.0, 0.0) + rng.normal(0, 10, volume.shape)
        window = ImageWindow(image.astype(np.float32), (0, 0, 0))
        box = tuple(slice(0, n) for n in volume.shape)
        baseline = ClickPolicy(registry.clickability.create("uniform"), "baseline", 10, window)
        base = best_of(
            lambda p=baseline, r=region: p.choose(r, 1, np.random.default_rng(1), spacing=SPACING),
            repeats=5,
        )
        print(f"{name:28s} {'baseline':16s} {1000 * base:12.1f} {1.0:10.2f}")
        for model in ("uniform", "distance", "contrast-aware"):
            policy = ClickPolicy(
                registry.clickability.create(model), "G5", 10, ImageWindow.around(image, box, 0)
            )
            seconds = best_of(
                lambda p=policy, r=region: p.choose(
                    r, 1, np.random.default_rng(1), spacing=SPACING
                ),
                repeats=5,
            )
            print(f"{name:28s} {model:16s} {1000 * seconds:12.1f} {seconds / base:10.2f}")


if __name__ == "__main__":
    main()
