"""Reading a DICOM series and its RTSTRUCT through IntraBench's readers against SimpleITK's
plain series read (#69 goal: at most 1.5x).

Generates a 512 x 512 x 300 CT series (int16) and an RTSTRUCT of two ROIs (a 64-point outline
on 120 slices, a 400-point body outline on every slice) in a temporary folder, then times
(best of ``--repeat``):

* SimpleITK: ``GetGDCMSeriesFileNames`` + ``ImageSeriesReader.Execute``;
* IntraBench: ``datasets.dicom.read_series`` (every header checked) + ``read_rtstruct``
  (references checked, every contour rasterised).

Run: ``.venv/bin/python benchmarks/bench_dicom_read.py [--slices 300] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "datasets"))
from _dicom import write_ct, write_rtstruct  # noqa: E402

from intrabench.datasets.dicom import read_rtstruct, read_series  # noqa: E402


def _outline(
    contour_points: int,
    k: int,
    centre: tuple[float, float],
    radius: float,
    spacing: float,
    origin: tuple[float, float, float],
    z_step: float,
) -> list[float]:
    angles = np.linspace(0, 2 * np.pi, contour_points, endpoint=False)
    x = origin[0] + (centre[1] + radius * np.cos(angles)) * spacing
    y = origin[1] + (centre[0] + radius * np.sin(angles)) * spacing
    z = np.full(contour_points, origin[2] + k * z_step)
    return [float(v) for v in np.column_stack([x, y, z]).ravel()]


def make(folder: Path, slices: int) -> None:
    volume = np.full((slices, 512, 512), -1000, np.int16)
    volume[:, 100:400, 100:400] = 40
    sources = write_ct(
        folder / "CT",
        volume,
        spacing=(0.8, 0.8, 1.0),
        origin=(0.0, 0.0, 0.0),
        patient="bench",
        study_uid="1.2.3.4",
    )
    ds = write_rtstruct(
        folder / "RS.dcm", sources, {"GTV": [(0, 0, 1, 0, 1)], "BODY": [(0, 0, 1, 0, 1)]}
    )
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    def contours(points, ks, radius):
        items = []
        for k in ks:
            item = Dataset()
            item.ContourGeometricType = "CLOSED_PLANAR"
            item.NumberOfContourPoints = points
            item.ContourData = _outline(points, k, (256, 256), radius, 0.8, (0, 0, 0), 1.0)
            items.append(item)
        return Sequence(items)

    ds.ROIContourSequence[0].ContourSequence = contours(
        64, range(slices * 3 // 10, slices * 7 // 10), 30
    )
    ds.ROIContourSequence[1].ContourSequence = contours(400, range(slices), 180)
    ds.save_as(folder / "RS.dcm", enforce_file_format=True)


def best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        started = time.perf_counter()
        make(folder, args.slices)
        print(
            f"generated 512 x 512 x {args.slices} series + RTSTRUCT in "
            f"{time.perf_counter() - started:.1f} s"
        )

        def plain():
            reader = sitk.ImageSeriesReader()
            reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(folder / "CT")))
            return reader.Execute()

        def ours():
            series = read_series(folder / "CT")
            masks = read_rtstruct(folder / "RS.dcm", series)
            assert masks["BODY"].shape == (args.slices, 512, 512)

        plain_s, ours_s = best(plain, args.repeat), best(ours, args.repeat)
        print(f"SimpleITK series read:            {plain_s:.2f} s")
        print(
            f"read_series + read_rtstruct:      {ours_s:.2f} s  ({ours_s / plain_s:.2f}x, "
            "goal <= 1.5x)"
        )


if __name__ == "__main__":
    main()
