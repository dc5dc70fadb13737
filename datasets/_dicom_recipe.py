"""Shared logic of the TCIA recipes: pair each label series (DICOM-SEG or RTSTRUCT) with its
image series, read both onto the image grid, then let the recipe turn named segments into
label maps.

Pairing: the label series' ReferencedSeriesSequence (SEG) or
ReferencedFrameOfReferenceSequence/.../RTReferencedSeriesSequence (RTSTRUCT) names the image
series; without it, the only image series of the same study is used. Case ids are
``<prefix>_<PatientID>``; when a patient has several label series (e.g. time points), every
one becomes its own case with suffix ``_2``, ``_3``... in (StudyDate, SeriesInstanceUID) order,
so nothing is overwritten. One case per image series: a second label series of an image
already used (e.g. a second reader) is skipped and named.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import dicom_header, read_dicom_series, read_rtstruct, read_seg
from ._dicom_series import (  # noqa: F401 - re-exported for the recipes
    LABEL_MODALITIES,
    _referenced_series,
    referenced_image_series,
)
from ._recipe import Recipe, read_series_listing, series_folder


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "case"


class DicomRecipe(Recipe):
    """A recipe whose raw download is ``raw/series.json`` + ``raw/series/<uid>/*.dcm``."""

    case_prefix: ClassVar[str] = ""
    image_description: ClassVar[str | None] = None  # fallback pick by SeriesDescription

    def _pairs(self, raw: Path) -> dict[str, tuple[str, str]]:
        cached = getattr(self, "_pair_cache", None)
        if cached is not None and cached[0] == raw:
            return cached[1]
        listing = read_series_listing(raw)
        images = {
            s["SeriesInstanceUID"]: s for s in listing if s.get("Modality") not in LABEL_MODALITIES
        }
        labels = [s for s in listing if s.get("Modality") in LABEL_MODALITIES]
        found: list[tuple[str, str, str, str]] = []  # patient, sort key, image uid, label uid
        for entry in labels:
            uid = entry["SeriesInstanceUID"]
            files = sorted(
                p
                for p in series_folder(raw, uid).rglob("*")
                if p.is_file() and not p.name.startswith(".")
            )
            image_uid = None
            header = None
            if files:
                try:
                    header = dicom_header(files[0])
                    image_uid = _referenced_series(header)
                except DataError:
                    header = None
            if image_uid not in images:
                study = entry.get("StudyInstanceUID")
                candidates = [u for u, s in images.items() if s.get("StudyInstanceUID") == study]
                if self.image_description and len(candidates) > 1:
                    candidates = [
                        u
                        for u in candidates
                        if self.image_description.lower()
                        in str(images[u].get("SeriesDescription", "")).lower()
                    ]
                image_uid = candidates[0] if len(candidates) == 1 else None
            patient = str(entry.get("PatientID") or (header.PatientID if header else uid))
            date = str(
                entry.get("StudyDate") or (getattr(header, "StudyDate", "") if header else "")
            )
            found.append((patient, f"{date}|{uid}", image_uid or "", uid))
        pairs: dict[str, tuple[str, str]] = {}
        self._duplicate_of: dict[str, str] = {}
        used: dict[str, str] = {}  # image series -> case that uses it
        for patient in sorted({f[0] for f in found}):
            mine = sorted((f for f in found if f[0] == patient), key=lambda f: f[1])
            for index, (_, _, image_uid, label_uid) in enumerate(mine, start=1):
                suffix = "" if index == 1 else f"_{index}"
                case_id = f"{self.case_prefix}{_safe_id(patient)}{suffix}"
                pairs[case_id] = (image_uid, label_uid)
                if image_uid and image_uid in used:
                    self._duplicate_of[case_id] = used[image_uid]
                elif image_uid:
                    used[image_uid] = case_id
        self._pair_cache = (raw, pairs)
        return pairs

    def raw_cases(self, raw: Path) -> list[str]:
        return sorted(self._pairs(raw))

    def convert(self, raw: Path, case_id: str) -> tuple[sitk.Image, dict[str, np.ndarray | None]]:
        image_uid, label_uid = self._pairs(raw)[case_id]
        if case_id in self._duplicate_of:
            raise DataError(
                f"another label series of the same image is used "
                f"({self._duplicate_of[case_id]}); one case per image"
            )
        if not image_uid:
            raise DataError(f"no image series found for label series {label_uid}")
        image = read_dicom_series(series_folder(raw, image_uid))
        files = sorted(
            p
            for p in series_folder(raw, label_uid).rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
        if not files:
            raise DataError(f"label series {label_uid} has no files")
        modality = str(getattr(dicom_header(files[0]), "Modality", ""))
        if modality == "SEG":
            segments = [
                (name, mask) for _, (name, mask) in sorted(read_seg(files[0], image).items())
            ]
        elif modality == "RTSTRUCT":
            segments = list(read_rtstruct(files[0], image).items())
        else:
            raise DataError(f"label series {label_uid} is {modality}, not SEG or RTSTRUCT")
        return image, self.make_labels(case_id, segments)

    def make_labels(
        self,
        case_id: str,
        segments: list[tuple[str, np.ndarray]],
    ) -> dict[str, np.ndarray | None]:
        """Turn ``[(segment name, mask (k, j, i))]`` into ``{output name: label}``."""
        raise NotImplementedError


def union(
    segments: list[tuple[str, np.ndarray]],
    names: tuple[str, ...] | None = None,
) -> np.ndarray | None:
    """Union of the masks whose normalised name is in ``names`` (all when None)."""
    wanted = None if names is None else {_normal(n) for n in names}
    masks = [m for n, m in segments if wanted is None or _normal(n) in wanted]
    if not masks:
        return None
    return np.logical_or.reduce(masks)


def _normal(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name).strip().lower()
