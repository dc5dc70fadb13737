"""MS lesions (paper D1): FLAIR MRI of multiple sclerosis with consensus lesion masks
(Muslim et al. 2022), Mendeley Data 8bctsm8jz7 v1. Mendeley needs a browser download, so this
recipe gives instructions; ``prepare`` reads the zip (or its unpacked folders) from
``<root>/raw/ms-lesions/``.

Files: ``Patient-<n>/<n>-Flair.nii`` and ``<n>-LesionSeg-Flair.nii``. Instances are the
26-connected components of the lesion mask, ids 1..K. Case ids: ``ms_<n>``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import instances_from_mask, read_image, same_grid
from ._recipe import ManualSource, Output, PreparedDataset, Recipe, register_outputs

_FLAIR = re.compile(r"^(?P<id>[^-]+)-Flair\.nii(\.gz)?$")


class MsLesionsRecipe(Recipe):
    """MS lesions (paper D1): FLAIR MRI with consensus lesion masks, downloaded by hand from
    Mendeley Data."""

    key = "ms-lesions"
    source = ManualSource(
        url="https://data.mendeley.com/datasets/8bctsm8jz7/1",
        instructions=(
            "Open the page in a browser, click 'Download All' (a zip of the "
            "Patient-* folders), and do not unpack it (or unpack it into the same "
            "folder; both work)."
        ),
        expected=("*.zip", "**/*-Flair.nii", "**/*-Flair.nii.gz"),
    )
    outputs = (
        Output(
            "ms-lesions",
            {"background": 0, "lesion": 1},
            {"lesion": "instance"},
            "MS lesions on FLAIR MRI, one target per 26-connected lesion",
        ),
    )
    licence = "CC BY 4.0"
    citation = "Muslim et al. 2022, Data in Brief, doi:10.1016/j.dib.2022.108139"

    def _pairs(self, raw: Path) -> dict[str, tuple[Path, Path]]:
        pairs = {}
        for path in sorted(self.unpack(raw).rglob("*-Flair.nii*")):
            match = _FLAIR.match(path.name)
            if not match or "LesionSeg" in path.name:
                continue
            suffix = ".nii.gz" if path.name.endswith(".gz") else ".nii"
            label = path.with_name(f"{match.group('id')}-LesionSeg-Flair{suffix}")
            pairs[f"ms_{match.group('id')}"] = (path, label)
        return pairs

    def raw_cases(self, raw: Path) -> list[str]:
        """The identifiers of the raw cases found under ``raw``, sorted.

        Args:
            raw: The folder the raw download was unpacked into.

        Returns:
            The case ids.
        """
        return sorted(self._pairs(raw), key=lambda c: (len(c), c))

    def convert(self, raw: Path, case_id: str) -> tuple[sitk.Image, dict[str, np.ndarray | None]]:
        """Read one raw case.

        Args:
            raw: The folder the raw download was unpacked into.
            case_id: One of :meth:`raw_cases`.

        Returns:
            The image and ``{output name: label}``: each label an integer SimpleITK-ordered array on
            the image's grid, or None to leave the case out of that output.

        Raises:
            DataError: The case's files are missing or do not match (the message says which).
        """
        image_path, label_path = self._pairs(raw)[case_id]
        if not label_path.is_file():
            raise DataError(f"no lesion mask {label_path.name}")
        image = read_image(image_path)
        label = read_image(label_path)
        if not same_grid(image, label):
            raise DataError(
                f"label grid {label.GetSize()} @ {label.GetSpacing()} does not "
                f"match image grid {image.GetSize()} @ {image.GetSpacing()}"
            )
        mask = sitk.GetArrayFromImage(label) > 0
        return image, {"ms-lesions": instances_from_mask(mask, 26)}


class MsLesions(PreparedDataset):
    """MS lesions on FLAIR MRI (paper D1)."""

    name: ClassVar[str] = "ms-lesions"
    modality: ClassVar[str] = "MRI (FLAIR)"
    description: ClassVar[str] = "multiple sclerosis lesions on FLAIR MRI (Mendeley, manual)"
    targets: ClassVar[str] = "MS lesions (instances)"
    size: ClassVar[str] = "60 cases, ~0.5 GB"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(MsLesionsRecipe(), [MsLesions])
