"""HNTS-MRG 2024 (paper D3): pre-radiotherapy T2 MRI of head-and-neck cancer, Zenodo.

The primary tumour (mask value 1, GTVp) is the target, kept whole (one instance, no connected
components); metastatic nodes (value 2, GTVn) are dropped. Cases without GTVp are skipped and
named in dataset.json["skipped"].
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import read_image, same_grid
from ._recipe import FileInfo, Output, PreparedDataset, Recipe, ZenodoSource, register_outputs

_IMAGE = "_preRT_T2.nii.gz"
_MASK = "_preRT_mask.nii.gz"


class HntsMrgRecipe(Recipe):
    """HNTS-MRG 2024 (paper D3): pre-radiotherapy T2 MRI of head-and-neck cancer, from Zenodo."""

    key = "hntsmrg"
    source = ZenodoSource("11199559", {"HNTSMRG24_train.zip": FileInfo()})
    outputs = (
        Output(
            "hntsmrg",
            {"background": 0, "primary tumour": 1},
            {"primary tumour": "instance"},
            "HNTS-MRG 2024: oropharyngeal primary tumour (GTVp) on pre-RT T2 MRI",
        ),
    )
    licence = "CC BY 4.0"
    citation = "Wahid et al. 2024, doi:10.5281/zenodo.11199559"

    def _images(self, raw: Path) -> dict[str, Path]:
        found = {}
        for path in sorted(self.unpack(raw).rglob(f"*{_IMAGE}")):
            found[path.name[: -len(_IMAGE)]] = path
        return found

    def raw_cases(self, raw: Path) -> list[str]:
        """The identifiers of the raw cases found under ``raw``, sorted.

        Args:
            raw: The folder the raw download was unpacked into.

        Returns:
            The case ids.
        """
        return sorted(self._images(raw))

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
        image_path = self._images(raw)[case_id]
        mask_path = image_path.with_name(f"{case_id}{_MASK}")
        if not mask_path.is_file():
            raise DataError(f"no mask {mask_path.name}")
        image = read_image(image_path)
        mask = read_image(mask_path)
        if not same_grid(image, mask):
            raise DataError(
                f"mask grid {mask.GetSize()} @ {mask.GetSpacing()} does not match "
                f"image grid {image.GetSize()} @ {image.GetSpacing()}"
            )
        primary = sitk.GetArrayFromImage(mask) == 1
        if not primary.any():
            self.excluded["hntsmrg"] = "no primary tumour (GTVp, value 1)"
            return image, {"hntsmrg": None}
        return image, {"hntsmrg": primary.astype(np.uint8)}


class HntsMrg(PreparedDataset):
    """HNTS-MRG primary tumours (paper D3)."""

    name: ClassVar[str] = "hntsmrg"
    modality: ClassVar[str] = "MRI (T2)"
    description: ClassVar[str] = "oropharyngeal primary tumour on T2 MRI (Zenodo)"
    targets: ClassVar[str] = "primary tumour (instance)"
    size: ClassVar[str] = "135 cases, ~2 GB"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(HntsMrgRecipe(), [HntsMrg])
