"""Cost of reading a case with IntraBench's integrity checks (prints figures; no asserts).

Writes a 200 x 512 x 512 float32 CT and the same as int16 (SimpleITK; ``.nii.gz`` and
``.nii``) and an int32 label to a temporary folder, then times, best of 3, side by side:
SimpleITK's read alone, SimpleITK's read plus ``check_nifti`` (completeness and non-finite
floats, a second pass over the file: how every NIfTI was read before issue #13's one-pass
reader), ``intrabench.io.volume.read_image`` (one pass, ``intrabench.io.nifti_read``) and
``read_volume`` (the same, reoriented into a float32 volume); and the label-value check
(``check_label_values``) against ``np.unique``.

    .venv/bin/python benchmarks/bench_read.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from intrabench.datasets.nnunet_folder import check_label_values
from intrabench.io.volume import check_nifti, read_image, read_volume


def best_of(function, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    ct = rng.normal(0, 300, (200, 512, 512)).astype(np.float32)
    ct[:, :100] = 0
    label = np.zeros(ct.shape, np.int32)
    label[50:150, 100:300, 100:300] = 1
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for name, data in (
            ("float32 CT", ct),
            ("int16 CT", np.clip(ct, -1024, 3000).astype(np.int16)),
        ):
            for suffix in (".nii.gz", ".nii"):
                path = Path(folder) / f"{name.replace(' ', '_')}{suffix}"
                sitk.WriteImage(
                    sitk.GetImageFromArray(data), str(path), useCompression=suffix == ".nii.gz"
                )
                paths[f"{name} {suffix}"] = path
        print(f"volume {ct.shape} (z, y, x), best of 3, seconds")
        print(
            f"{'file':<20} {'SimpleITK':>10} {'+ check':>10} {'one pass':>10} {'speed-up':>9} "
            f"{'read_volume':>12}"
        )
        for name, path in paths.items():
            alone = best_of(lambda p=path: sitk.ReadImage(str(p)))
            before = best_of(lambda p=path: (sitk.ReadImage(str(p)), check_nifti(p)))
            one_pass = best_of(lambda p=path: read_image(p))
            volume = best_of(lambda p=path: read_volume(p))
            print(
                f"{name:<20} {alone:>10.2f} {before:>10.2f} {one_pass:>10.2f} "
                f"{before / one_pass:>8.1f}x {volume:>12.2f}"
            )
        image = sitk.GetImageFromArray(label)
        ours = best_of(lambda: check_label_values(label, Path("label.nii.gz"), {"a": 1}))
        sorted_all = best_of(lambda: np.unique(sitk.GetArrayViewFromImage(image)))
        print(
            f"int32 label values: check_label_values {ours:.2f} s, np.unique {sorted_all:.2f} s "
            f"({sorted_all / ours:.1f}x)"
        )


if __name__ == "__main__":
    main()
