"""Rebuild the shipped real-data demo sample from ../shared/data/real (pyradiomics test cases).

Crops keep their physical geometry (SimpleITK slicing updates the origin), so they are true
sub-volumes of the originals. Output: an nnU-Net v2 style folder in
intrabench/resources/demo_real/. Run: python scripts/make_demo_data.py [SOURCE_DIR]
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import SimpleITK as sitk

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data" / "real"
TARGET = ROOT / "intrabench" / "resources" / "demo_real"

# (case, modality, crop as (x0, x1, y0, y1, z0, z1) in SimpleITK (i, j, k) voxel indices)
CROPS = [
    ("lung1", "CT", (150, 290, 300, 430, 27, 40)),
    ("brain1", "MRI", (120, 250, 50, 190, 0, 25)),
    ("breast1", "MRI", (0, 45, 0, 120, 0, 21)),
]


def main() -> None:
    if TARGET.exists():
        shutil.rmtree(TARGET)
    (TARGET / "imagesTr").mkdir(parents=True)
    (TARGET / "labelsTr").mkdir(parents=True)
    for case, _modality, (x0, x1, y0, y1, z0, z1) in CROPS:
        image = sitk.ReadImage(str(SOURCE / f"{case}_image.nrrd"))[x0:x1, y0:y1, z0:z1]
        label = sitk.ReadImage(str(SOURCE / f"{case}_label.nrrd"))[x0:x1, y0:y1, z0:z1]
        label = sitk.Cast(label > 0, sitk.sitkUInt8)
        sitk.WriteImage(image, str(TARGET / "imagesTr" / f"{case}_0000.nii.gz"), True)
        sitk.WriteImage(label, str(TARGET / "labelsTr" / f"{case}.nii.gz"), True)
    dataset = {
        "name": "demo-real",
        "description": "Crops of three real volumes with expert lesion labels "
        "(pyradiomics 3.0.1 test cases: lung CT, brain MRI, breast MRI).",
        "channel_names": {"0": "CT/MRI"},
        "labels": {"background": 0, "lesion": 1},
        "target_types": {"lesion": "instance"},
        "numTraining": len(CROPS),
        "file_ending": ".nii.gz",
        "modalities_per_case": {case: modality for case, modality, _ in CROPS},
        "licence": "BSD-3-Clause, see LICENSE-pyradiomics.txt",
    }
    (TARGET / "dataset.json").write_text(json.dumps(dataset, indent=2) + "\n")
    shutil.copy(SOURCE / "LICENSE-pyradiomics.txt", TARGET / "LICENSE-pyradiomics.txt")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
