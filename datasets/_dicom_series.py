"""Which image series a downloaded DICOM label series (SEG, RTSTRUCT) belongs to.

Used while downloading a TCIA collection (:mod:`._recipe`: fetch the labels first, then only
the image series they reference) and while converting it (:mod:`._dicom_recipe`).
"""

from __future__ import annotations

from pathlib import Path

from intrabench.errors import DataError

from .dicom import LABEL_MODALITIES, dicom_header  # noqa: F401 - named here for the recipes
from .dicom import referenced_series as _referenced_series


def referenced_image_series(folder: Path) -> str | None:
    """The image series a downloaded SEG/RTSTRUCT series references (None if unknown)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        return None
    try:
        return _referenced_series(dicom_header(files[0]))
    except DataError:
        return None
