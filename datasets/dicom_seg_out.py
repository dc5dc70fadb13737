"""Predictions written as DICOM-SEG over the source series, for a viewer
(3D Slicer, OHIF) to open over the original images.

A prediction is a boolean mask on the run's canonical grid (z, y, x) of the series as
:func:`intrabench.datasets.dicom.read_series` read it; the canonical reorientation is undone
(:func:`intrabench.io.volume.from_canonical`) so that frame ``k`` of the SEG lies on slice
``k`` of the series (``DicomSeries.files`` / ``sop_uids`` order) and references it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from intrabench.errors import DataError
from intrabench.io.raw_image import RawImage
from intrabench.io.volume import from_canonical

from .dicom import DicomSeries, read_series


def _source_datasets(series: DicomSeries) -> list:
    import pydicom

    return [pydicom.dcmread(str(path)) for path in series.files]


def native_masks(series: DicomSeries, masks_zyx: dict[str, np.ndarray]) -> np.ndarray:
    """The masks (canonical (z, y, x), the series' canonical shape) as one (k, j, i, segment)
    uint8 array in the series' own slice order; DataError for a mask of another shape.

    Args:
        series: The series the masks were predicted on.
        masks_zyx: Segment label -> mask (bool or 0/1), canonical (z, y, x).

    Returns:
        A (k, j, i, segment) uint8 array of 0 and 1, segments in the mapping's order.

    Raises:
        DataError: A mask is not on the series' canonical grid.
    """
    geometry = RawImage.from_sitk(series.image).geometry
    expected = tuple(int(v) for v in geometry.size[::-1])  # (k, j, i)
    native = []
    for name, mask in masks_zyx.items():
        array = from_canonical(np.asarray(mask).astype(bool), geometry)
        if tuple(array.shape) != expected:
            raise DataError(
                f"prediction {name!r}: shape {tuple(np.asarray(mask).shape)} (z, y, x) is not "
                f"the series' grid; it must be a mask of the case read from this series"
            )
        native.append(np.ascontiguousarray(array, dtype=np.uint8))
    return np.stack(native, axis=-1)


def write_prediction_seg(
    series: DicomSeries | str | Path,
    masks_zyx: dict[str, np.ndarray],
    path: str | Path,
    *,
    algorithm: str,
    series_description: str = "IntraBench prediction",
    series_number: int = 900,
) -> Path:
    """Write ``masks_zyx`` (segment label -> bool mask (z, y, x) on the canonical grid of
    ``series``, a :class:`DicomSeries` or its folder) as one BINARY DICOM-SEG at ``path``.

    Every segment is AUTOMATIC with ``algorithm`` (the model) as its algorithm name; the SEG
    shares the series' study, patient and frame of reference, and its frames reference the
    source slices' SOP instance UIDs. Empty frames are omitted (an all-empty prediction
    keeps its frames). Returns ``path``.

    Args:
        series: The source series, read or as its folder.
        masks_zyx: Segment label (the target id; cut to 64 characters) -> bool mask,
            canonical (z, y, x); segments are numbered 1, 2, ... in this order.
        path: The ``.dcm`` file to write (its folder is created).
        algorithm: The model's name, the segments' algorithm name (cut to 64 characters).
        series_description: The SEG's SeriesDescription (cut to 64 characters).
        series_number: The SEG's SeriesNumber.

    Returns:
        ``path``, as a :class:`~pathlib.Path`.

    Raises:
        DataError: No mask is given, or a mask is not on the series' grid.
    """
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.uid import generate_uid

    if not masks_zyx:
        raise DataError("no prediction to write as DICOM-SEG")
    if not isinstance(series, DicomSeries):
        series = read_series(series)
    pixel = native_masks(series, masks_zyx)
    algorithm_id = hd.AlgorithmIdentificationSequence(
        name=str(algorithm)[:64] or "unknown", version="1", family=codes.DCM.ArtificialIntelligence
    )
    descriptions = [
        hd.seg.SegmentDescription(
            segment_number=number,
            segment_label=str(label)[:64],
            segmented_property_category=codes.SCT.MorphologicallyAbnormalStructure,
            segmented_property_type=codes.SCT.Lesion,
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.AUTOMATIC,
            algorithm_identification=algorithm_id,
        )
        for number, label in enumerate(masks_zyx, start=1)
    ]
    seg = hd.seg.Segmentation(
        source_images=_source_datasets(series),
        pixel_array=pixel,
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=descriptions,
        series_instance_uid=generate_uid(),
        series_number=series_number,
        sop_instance_uid=generate_uid(),
        instance_number=1,
        manufacturer="IntraBench",
        manufacturer_model_name=str(algorithm)[:64] or "unknown",
        software_versions=_version(),
        device_serial_number="0",
        content_label="PREDICTION",
        omit_empty_frames=bool(pixel.any()),  # an empty prediction keeps its frames
    )
    seg.SeriesDescription = series_description[:64]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    seg.save_as(str(path))
    return path


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("intrabench")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"
