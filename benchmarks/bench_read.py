"""Cost of reading a case with IntraBench's integrity checks (prints figures; no asserts).

Writes a 200 x 512 x 512 float32 CT, the same as int16, and an int32 label (SimpleITK,
compressed) to a temporary folder, then times, best of 3: SimpleITK's read alone,
``intrabench.io.volume.read_volume`` (which adds ``check_nifti``: completeness and non-finite
floats in one pass) and the label-value check (``check_label_values``) against ``np.unique``.

    .venv/bin/python benchmarks/bench_read.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from intrabench.datasets.nnunet_folder import check_label_values
from intrabench.io.volume import read_volume


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
        paths = {"float32 CT": Path(folder) / "ct_float.nii.gz",
                 "int16 CT": Path(folder) / "ct_int16.nii.gz"}
        sitk.WriteImage(sitk.GetImageFromArray(ct), str(paths["float32 CT"]), useCompression=True)
        sitk.WriteImage(sitk.GetImageFromArray(np.clip(ct, -1024, 3000).astype(np.int16)),
                        str(paths["int16 CT"]), useCompression=True)
        print(f"volume {ct.shape} (z, y, x), best of 3")
        for name, path in paths.items():
            alone = best_of(lambda p=path: sitk.ReadImage(str(p)))
            checked = best_of(lambda p=path: read_volume(p))
            print(f"{name}: SimpleITK read {alone:.2f} s, read_volume with checks {checked:.2f} s "
                  f"({checked / alone:.1f}x)")
        image = sitk.GetImageFromArray(label)
        ours = best_of(lambda: check_label_values(image, Path("label.nii.gz"), {"a": 1}))
        sorted_all = best_of(lambda: np.unique(sitk.GetArrayViewFromImage(image)))
        print(f"int32 label values: check_label_values {ours:.2f} s, np.unique {sorted_all:.2f} s "
              f"({sorted_all / ours:.1f}x)")


if __name__ == "__main__":
    main()
