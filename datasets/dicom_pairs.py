"""A ``folder`` spec's DICOM cases: an image series folder and its RTSTRUCT or DICOM-SEG file
(or a label file SimpleITK reads), turned into the image and label map a case is made of.

Classes of a DICOM label are ROIs (RTSTRUCT) or segments (SEG) chosen by name: the spec's
``classes`` maps each class to a ROI or segment name (``{gtv: GTV-1}``; names match ignoring
case, spaces, ``-`` and ``_``, see :func:`.dicom.normal_name`) or number; without ``classes``
every ROI or segment of the label files is a class named by its normalised name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError, UserError
from intrabench.io.raw_image import RawImage

from .dicom import (
    describe_dicom_file,
    dicom_header,
    is_dicom_file,
    normal_name,
    read_rtstruct,
    read_seg,
    read_series,
    shortened,
)

#: what a class of a DICOM label names: a ROI or segment name (normalised) or number
Selector = str | int


def is_dicom_label(path: Path) -> bool:
    """Whether ``path`` is an RTSTRUCT or DICOM-SEG file.

    Args:
        path: Any path (a folder or a non-DICOM file is not one).

    Returns:
        True for a DICOM file whose Modality is ``RTSTRUCT`` or ``SEG``.
    """
    if not path.is_file() or not is_dicom_file(path):
        return False
    return str(getattr(dicom_header(path), "Modality", "")) in ("RTSTRUCT", "SEG")


def roi_names(path: Path) -> list[str]:
    """The ROI (RTSTRUCT) or segment (SEG) names of a label file, from its header.

    Args:
        path: An RTSTRUCT or DICOM-SEG file.

    Returns:
        The names as written (not normalised), in the file's order.
    """
    header = dicom_header(path)
    if str(getattr(header, "Modality", "")) == "SEG":
        return [str(s.SegmentLabel) for s in getattr(header, "SegmentSequence", [])]
    return [str(r.ROIName) for r in getattr(header, "StructureSetROISequence", [])]


def dicom_classes(
    classes: Any,
    labels: list[Path],
    where: Path,
) -> tuple[dict[str, int], dict[str, Selector]]:
    """``(label value of each class, what each class selects)`` for DICOM labels.

    ``classes``: the spec's mapping (class -> ROI/segment name or number) or None (every ROI
    or segment of ``labels``).

    Args:
        classes: The spec's ``classes`` value: a non-empty mapping of class name to ROI or
            segment name (str) or number (int), or None.
        labels: The dataset's RTSTRUCT / SEG files (their names are read when ``classes`` is
            None).
        where: The spec or folder named in a message.

    Returns:
        Class name -> label value (1, 2, ... in the classes' order); and class name -> its
        selector (a normalised name, or a ROI / segment number).

    Raises:
        UserError: ``classes`` is not such a mapping, or the label files name no ROI or segment.
    """
    if classes is None:
        found = sorted({normal_name(name) for path in labels for name in roi_names(path)})
        if not found:
            raise UserError(f"{where}: the label files name no ROI or segment")
        selectors: dict[str, Selector] = {name: name for name in found}
    elif isinstance(classes, dict) and classes:
        selectors = {}
        for name, value in classes.items():
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise UserError(
                    f"{where}: class '{name}': give the ROI or segment name (e.g. "
                    f"GTV-1) or number it is, not {value!r}"[:200]
                )
            selectors[str(name)] = normal_name(value) if isinstance(value, str) else value
    else:
        raise UserError(
            f"{where}: 'classes' must map class names to ROI or segment names, "
            "e.g. {gtv: GTV-1}, or be left out (every ROI a class)"
        )
    values = {name: index for index, name in enumerate(selectors, start=1)}
    return values, selectors


def read_dicom_case(
    image_path: Path, label_path: Path, values: dict[str, int], selectors: dict[str, Selector]
) -> tuple[RawImage, RawImage, str]:
    """(image, label map, the series' modality) of one DICOM case: the series folder at
    ``image_path``, its RTSTRUCT or SEG at ``label_path`` painted with ``values``.

    Args:
        image_path: The image series folder.
        label_path: Its RTSTRUCT or DICOM-SEG file.
        values: Class name -> label value (:func:`dicom_classes`).
        selectors: Class name -> the ROI or segment it selects (:func:`dicom_classes`).

    Returns:
        The image, the label map on the image's grid (uint8, or uint16 from 256 classes) and
        the series' modality (e.g. ``"CT"``).

    Raises:
        DataError: The label file is of another kind, a class matches no ROI or several, two
            chosen masks overlap, or the series or label cannot be read.
    """
    series = read_series(image_path)
    modality = str(getattr(dicom_header(label_path), "Modality", ""))
    if modality == "RTSTRUCT":
        masks = list(read_rtstruct(label_path, series).items())
        numbers = _rtstruct_numbers(label_path)
    elif modality == "SEG":
        segments = read_seg(label_path, series)
        masks = [(name, mask) for _, (name, mask) in sorted(segments.items())]
        numbers = {name: number for number, (name, _) in segments.items()}
    else:
        raise DataError(
            f"{label_path.name}: {describe_dicom_file(label_path)}, not an RTSTRUCT or DICOM-SEG"
        )
    chosen = _choose(label_path, masks, numbers, selectors)
    label = _paint(label_path, chosen, values, series.image)
    image = RawImage.from_sitk(series.image, name=str(image_path))
    return image, RawImage.from_sitk(label, name=str(label_path)), series.modality


def _rtstruct_numbers(path: Path) -> dict[str, int]:
    header = dicom_header(path)
    return {str(r.ROIName): int(r.ROINumber) for r in header.StructureSetROISequence}


def _choose(
    path: Path,
    masks: list[tuple[str, np.ndarray]],
    numbers: dict[str, int],
    selectors: dict[str, Selector],
) -> dict[str, np.ndarray]:
    """The mask of each class: the one ROI or segment its selector names."""
    chosen = {}
    for name, selector in selectors.items():
        found = [
            mask
            for roi, mask in masks
            if (
                normal_name(roi) == selector
                if isinstance(selector, str)
                else numbers.get(roi) == selector
            )
        ]
        if len(found) != 1:
            listing = shortened([roi for roi, _ in masks])
            problem = "no ROI or segment" if not found else f"{len(found)} ROIs or segments"
            raise DataError(
                f"{path.name}: {problem} matches class '{name}' ({selector!r}; "
                f"names match ignoring case, spaces, - and _); it has: "
                f"{listing or 'none'}; fix 'classes' in the spec"
            )
        chosen[name] = found[0]
    return chosen


def _paint(
    path: Path, chosen: dict[str, np.ndarray], values: dict[str, int], reference: sitk.Image
) -> sitk.Image:
    """One label map of the chosen masks; DataError when two overlap (a voxel holds one class)."""
    names = list(chosen)
    shape = next(iter(chosen.values())).shape
    out = np.zeros(shape, dtype=np.uint8 if max(values.values()) < 256 else np.uint16)
    for index, name in enumerate(names):
        mask = chosen[name]
        for other in names[:index]:
            shared = int(np.count_nonzero(mask & chosen[other]))
            if shared:
                raise DataError(
                    f"{path.name}: '{other}' and '{name}' overlap in {shared:,} "
                    "voxels; a label map holds one class per voxel: choose ROIs or "
                    "segments that do not overlap with 'classes' in the spec"
                )
        out[mask] = values[name]
    image = sitk.GetImageFromArray(out)
    image.CopyInformation(reference)
    return image


def not_a_series_image(path: Path) -> str | None:
    """The message for an image path that is one DICOM file (a slice, an RTSTRUCT, a SEG):
    it is not a 1-slice volume; None for anything else.

    Args:
        path: A case's image path.

    Returns:
        The one-line message saying what to give instead, or None.
    """
    if not path.is_file() or not is_dicom_file(path):
        return None
    what = describe_dicom_file(path)
    if what.startswith("one "):
        return (
            f"{path.name} is {what}: give the folder of the whole series as the image "
            f"(images: a pattern of folders, e.g. '{{case}}/CT'), not one slice file"
        )
    return (
        f"{path.name} is {what}: it is a label; give it as 'label' and the folder of the "
        "series it was drawn on as 'image'"
    )
