"""Speed of the per-step metrics on a realistic volume (prints figures; no asserts).

A 512 x 512 x 300 (x, y, z) CT-sized grid with 30 lesion-like instances of 5-40 mm; each
instance's "prediction" is the instance shifted by three voxels (2.4 mm, beyond the 2 mm NSD
tolerance, so NSD < 1 and the MONAI check can fail) and grown by one voxel on one side.
We time ``intrabench.evaluation.metrics.step_metrics`` (Dice, IoU, NSD at 2 mm, HD95) for all 30 targets,
as the episode calls it (full-volume boolean masks in, one call per target), and MONAI's
DiceMetric + compute_surface_dice + compute_hausdorff_distance on the same pairs, measured side
by side in one run. Also one large organ-sized target.

    .venv/bin/python benchmarks/bench_metrics.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from intrabench.evaluation.metrics import step_metrics

SHAPE = (300, 512, 512)  # (z, y, x)
SPACING = (1.5, 0.8, 0.8)  # mm, (z, y, x)


def make_instances(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(prediction, ground truth) full-volume boolean pairs for ``n`` ellipsoidal instances."""
    pairs = []
    for _ in range(n):
        radius_mm = rng.uniform(2.5, 20.0)
        radii = np.array([radius_mm / s for s in SPACING])
        center = np.array([rng.uniform(r + 4, s - r - 4) for r, s in zip(radii, SHAPE)])
        low = np.floor(center - radii - 3).astype(int)
        high = np.ceil(center + radii + 3).astype(int)
        grid = np.indices(tuple(high - low), dtype=np.float32)
        inside = sum(((grid[a] + low[a] - center[a]) / radii[a]) ** 2 for a in range(3)) <= 1.0
        gt = np.zeros(SHAPE, bool)
        gt[low[0] : high[0], low[1] : high[1], low[2] : high[2]] = inside
        pred = np.roll(gt, 3, axis=2)
        pred[:, 1:] |= pred[:, :-1]
        pairs.append((pred, gt))
    return pairs


def time_ours(pairs) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    values = [step_metrics(p, g, SPACING, nsd_tolerance_mm=2.0) for p, g in pairs]
    return time.perf_counter() - started, values


def time_monai(pairs) -> tuple[float, list[tuple[float, float, float]]]:
    import torch
    from monai.metrics import DiceMetric, compute_hausdorff_distance, compute_surface_dice

    dice_metric = DiceMetric(include_background=True, reduction="none", ignore_empty=False)
    values = []
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pred, gt in pairs:
            y_pred = torch.from_numpy(pred[None, None]).float()
            y = torch.from_numpy(gt[None, None]).float()
            values.append(
                (
                    float(dice_metric(y_pred, y)[0, 0]),
                    float(
                        compute_surface_dice(
                            y_pred, y, [2.0], include_background=True, spacing=list(SPACING)
                        )[0, 0]
                    ),
                    float(
                        compute_hausdorff_distance(
                            y_pred, y, include_background=True, percentile=95, spacing=list(SPACING)
                        )[0, 0]
                    ),
                )
            )
    return time.perf_counter() - started, values


def main() -> None:
    import torch

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    pairs = make_instances(rng, 30)
    print(
        f"volume {SHAPE} (z, y, x), spacing {SPACING} mm, {len(pairs)} instances, "
        f"{np.mean([g.sum() for _, g in pairs]):.0f} voxels per instance on average"
    )
    step_metrics(*pairs[0], SPACING)  # warm-up (imports)
    ours, values = min((time_ours(pairs) for _ in range(3)), key=lambda r: r[0])
    print(
        f"intrabench step_metrics, 30 targets (best of 3): {ours:.3f} s ({ours / len(pairs) * 1e3:.1f} ms per target)"
    )
    monai_pairs = pairs[:2]
    monai_seconds, reference = time_monai(monai_pairs)
    per_monai = monai_seconds / len(monai_pairs)
    print(
        f"MONAI Dice+NSD+HD95, 2 targets: {monai_seconds:.3f} s ({per_monai * 1e3:.1f} ms per target)"
    )
    print(f"ratio MONAI / intrabench per target: {per_monai / (ours / len(pairs)):.1f}x")
    worst = max(
        max(abs(v["dice"] - r[0]), abs(v["nsd"] - r[1]), abs(v["hd95"] - r[2]) / max(1, r[2]))
        for v, r in zip(values, reference)
    )
    print(f"largest difference to MONAI (dice, nsd abs; hd95 rel): {worst:.2e}")
    checked = [v["nsd"] for v in values[: len(monai_pairs)]]
    print(
        f"NSD of the MONAI-checked targets: {', '.join(f'{n:.4f}' for n in checked)} "
        f"(all targets: {min(v['nsd'] for v in values):.3f}-{max(v['nsd'] for v in values):.3f})"
    )

    # One organ-sized target (a 160 x 200 x 180 voxel ellipsoid).
    grid = np.indices((160, 200, 180), dtype=np.float32)
    organ = (
        sum(((grid[a] - c) / r) ** 2 for a, c, r in zip(range(3), (80, 100, 90), (75, 95, 85))) <= 1
    )
    gt = np.zeros(SHAPE, bool)
    gt[60:220, 150:350, 160:340] = organ
    pred = np.roll(gt, 3, axis=1)
    started = time.perf_counter()
    step_metrics(pred, gt, SPACING)
    organ_ours = time.perf_counter() - started
    organ_monai, _ = time_monai([(pred, gt)])
    print(
        f"organ target ({int(gt.sum())} voxels): intrabench {organ_ours:.3f} s, "
        f"MONAI {organ_monai:.3f} s, ratio {organ_monai / organ_ours:.1f}x"
    )


if __name__ == "__main__":
    main()
