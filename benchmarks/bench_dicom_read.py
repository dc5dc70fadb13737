"""Reading a DICOM series and its RTSTRUCT through IntraBench's readers against SimpleITK's
plain series read (#69 goal: at most 1.5x), now and as it was before, in one run.

Generates a 512 x 512 x 300 CT series (int16) and an RTSTRUCT of two ROIs (a 64-point outline
on 120 slices, a 400-point body outline on every slice) in a temporary folder, then times
(best of ``--repeat``, the three taken in turn so that a shared machine's load falls on all):

* SimpleITK: ``GetGDCMSeriesFileNames`` + ``ImageSeriesReader.Execute``;
* IntraBench: ``datasets.dicom.read_series`` (every header read once and checked, voxels read
  by numpy) + ``read_rtstruct`` (references checked, every contour rasterised);
* before: the same steps as they were (GDCM's series scan, pydicom's headers, then GDCM read
  every file again; the fill of ``tests/datasets/_reference_fill.py`` on a whole slice per
  contour), rebuilt here from the same checks.

The masks of now and before are compared (they must be equal), and the images.

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
from _reference_fill import reference_fill  # noqa: E402

from intrabench.datasets import dicom  # noqa: E402
from intrabench.datasets.dicom import read_rtstruct, read_series  # noqa: E402


def _outline(
    contour_points: int,
    k: int,
    centre: tuple[float, float],
    radius: float,
    spacing: float,
    origin: tuple[float, float, float],
    z_step: float,
) -> list[str]:
    angles = np.linspace(0, 2 * np.pi, contour_points, endpoint=False)
    x = origin[0] + (centre[1] + radius * np.cos(angles)) * spacing
    y = origin[1] + (centre[0] + radius * np.sin(angles)) * spacing
    z = np.full(contour_points, origin[2] + k * z_step)
    # decimal strings as a planning system writes them (DS: at most 16 characters)
    return [f"{v:.10g}" for v in np.column_stack([x, y, z]).ravel()]


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


def read_before(folder: Path) -> tuple[sitk.Image, dict[str, np.ndarray]]:
    """The series and RTSTRUCT read as before: GDCM scans the folder for the series and its
    files, pydicom reads every header (checked and sorted as now), GDCM reads every file again
    and decodes it; each contour filled on a whole slice by the former fill."""
    import pydicom

    reader = sitk.ImageSeriesReader()
    uid = reader.GetGDCMSeriesIDs(str(folder / "CT"))[0]
    files = [Path(name) for name in reader.GetGDCMSeriesFileNames(str(folder / "CT"), uid)]
    headers = [pydicom.dcmread(str(path), defer_size=1 << 16) for path in files]
    for path, header in zip(files, headers):
        dicom._check_pixel_data(path, header)
    order = dicom._slice_order(folder / "CT", files, headers)
    files, headers = [files[i] for i in order], [headers[i] for i in order]
    reader.SetFileNames([str(path) for path in files])
    image = reader.Execute()
    series = dicom.DicomSeries(
        image=image,
        series_uid=str(uid),
        frame_of_reference_uid=str(headers[0].FrameOfReferenceUID),
        modality=str(headers[0].Modality),
        sop_uids=tuple(str(h.SOPInstanceUID) for h in headers),
        files=tuple(files),
    )
    now = dicom._polygon_box
    dicom._polygon_box = lambda rows, columns, shape: (0, 0, reference_fill(rows, columns, shape))
    try:
        return image, read_rtstruct(folder / "RS.dcm", series)
    finally:
        dicom._polygon_box = now


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

        parts: dict[str, list[float]] = {"series": [], "rtstruct": []}

        def ours():
            started = time.perf_counter()
            series = read_series(folder / "CT")
            parts["series"].append(time.perf_counter() - started)
            started = time.perf_counter()
            masks = read_rtstruct(folder / "RS.dcm", series)
            parts["rtstruct"].append(time.perf_counter() - started)
            return series.image, masks

        image, masks = ours()
        image_before, masks_before = read_before(folder)
        assert masks["BODY"].shape == (args.slices, 512, 512)
        assert all((masks[name] == masks_before[name]).all() for name in masks), "masks differ"
        assert (sitk.GetArrayViewFromImage(image) == sitk.GetArrayViewFromImage(image_before)).all()
        del image, masks, image_before, masks_before
        times: dict[str, list[float]] = {"plain": [], "ours": [], "before": []}
        for _ in range(args.repeat):
            for name, function in (
                ("plain", plain),
                ("ours", ours),
                ("before", lambda: read_before(folder)),
            ):
                started = time.perf_counter()
                function()
                times[name].append(time.perf_counter() - started)
        plain_s, ours_s, before_s = (min(times[n]) for n in ("plain", "ours", "before"))
        print(f"SimpleITK series read:            {plain_s:.2f} s")
        print(
            f"read_series + read_rtstruct:      {ours_s:.2f} s  ({ours_s / plain_s:.2f}x, "
            "goal <= 1.5x)"
        )
        print(
            f"  of which read_series {min(parts['series']):.2f} s, "
            f"read_rtstruct {min(parts['rtstruct']):.2f} s (best of each)"
        )
        print(f"the same, as before:              {before_s:.2f} s  ({before_s / plain_s:.2f}x)")
        print("masks and image: equal to before's")


if __name__ == "__main__":
    main()
