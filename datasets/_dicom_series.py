"""Which image series a downloaded DICOM label series (SEG, RTSTRUCT) belongs to.

Used while downloading a TCIA collection (:mod:`._recipe`: fetch the labels first, then only
the image series they reference) and while converting it (:mod:`._dicom_recipe`).
"""

from __future__ import annotations

from pathlib import Path

from intrabench.errors import DataError

from ._convert import dicom_header

#: DICOM modalities that hold labels, not images
LABEL_MODALITIES = ("SEG", "RTSTRUCT")


def _referenced_series(header) -> str | None:
    if "ReferencedSeriesSequence" in header:
        return str(header.ReferencedSeriesSequence[0].SeriesInstanceUID)
    for frame in getattr(header, "ReferencedFrameOfReferenceSequence", []):
        for study in getattr(frame, "RTReferencedStudySequence", []):
            for series in getattr(study, "RTReferencedSeriesSequence", []):
                return str(series.SeriesInstanceUID)
    return None


def referenced_image_series(folder: Path) -> str | None:
    """The image series a downloaded SEG/RTSTRUCT series references (None if unknown)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        return None
    try:
        return _referenced_series(dicom_header(files[0]))
    except DataError:
        return None
