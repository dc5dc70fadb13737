"""What measuring target attributes costs a run: one CT-sized case, and one large organ.

A phantom of 160 x 512 x 512 voxels with 6-10 lesions (the size measured in issue #13), and a
1.7 million-voxel ellipsoid (a liver-sized organ) at (2.5, 0.8, 0.8) mm. Best of 3 per figure.
Beside each figure: the time to read the case, which the reader worker spends anyway.

    python benchmarks/bench_attributes.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from intrabench import registry
from intrabench.attributes import shape
from intrabench.attributes.cache import cached_case_attributes
from intrabench.attributes.compute import case_attributes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import best_of  # noqa: E402


def main() -> None:
    dataset = registry.datasets.create(
        "demo-phantoms", {"n_cases": 1, "shape": [160, 512, 512], "n_lesions": [6, 10]}
    )
    case_id = dataset.case_ids()[0]
    read = best_of(lambda: dataset.load(case_id), repeats=1)
    case = dataset.load(case_id)
    root = Path(tempfile.mkdtemp(prefix="bench-attributes-"))
    measure = best_of(lambda: case_attributes(case, dataset.modality))
    cold = best_of(
        lambda: cached_case_attributes(
            case, dataset.modality, root=Path(tempfile.mkdtemp(dir=root))
        )
    )
    warm = best_of(lambda: cached_case_attributes(case, dataset.modality, root=root))
    z, y, x = np.ogrid[-45:46, -110:111, -110:111]
    organ = (z / 40.0) ** 2 + (y / 100.0) ** 2 + (x / 100.0) ** 2 <= 1
    spacing = (2.5, 0.8, 0.8)
    surface = best_of(lambda: shape.surface_area_mm2(organ, spacing))
    topology = best_of(lambda: (shape.count_cavities(organ), shape.slices_with_holes(organ)))
    print(f"case {case.image.shape}, {len(case.targets)} lesions; reading it: {read:.2f} s")
    print(
        f"  all attributes, measured:              {measure:.3f} s ({measure / read:.1%} of the read)"
    )
    print(f"  through the cache, first time:         {cold:.3f} s")
    print(f"  through the cache, measured before:    {warm:.3f} s (hashing image and label)")
    print(
        f"organ of {int(organ.sum())} voxels: surface (marching cubes + Taubin) {surface:.3f} s, "
        f"cavities + slices with holes {topology:.3f} s"
    )


if __name__ == "__main__":
    main()
