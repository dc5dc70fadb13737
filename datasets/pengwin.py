"""PENGWIN (paper D9): pelvic CT with bone-fragment labels (.mha), Zenodo.

Every distinct label value is one fragment; values are remapped to their ranks 1..K so the
fragments are consecutive instance ids. Images and labels are matched by file name in the
image and label archives.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import rank_values, read_image, same_grid
from ._recipe import FileInfo, Output, PreparedDataset, Recipe, ZenodoSource, register_outputs


class PengwinRecipe(Recipe):
    """PENGWIN (paper D9): pelvic CT with bone-fragment labels, from Zenodo."""

    key = "pengwin"
    source = ZenodoSource(
        "10927452",
        {
            "PENGWIN_CT_train_images_part1.zip": FileInfo(),
            "PENGWIN_CT_train_images_part2.zip": FileInfo(),
            "PENGWIN_CT_train_labels.zip": FileInfo(),
        },
    )
    outputs = (
        Output(
            "pengwin",
            {"background": 0, "fragment": 1},
            {"fragment": "instance"},
            "PENGWIN: pelvic bone fragments on CT, one target per fragment",
        ),
    )
    licence = "CC BY-NC-SA 4.0"
    citation = "Liu et al. 2023, PENGWIN challenge, doi:10.5281/zenodo.10927452"

    def _files(self, raw: Path) -> tuple[dict[str, Path], dict[str, Path]]:
        images: dict[str, Path] = {}
        labels: dict[str, Path] = {}
        for path in sorted(self.unpack(raw).rglob("*.mha")):
            is_label = any("label" in part.lower() for part in path.parent.parts[-2:])
            (labels if is_label else images)[path.name[: -len(".mha")]] = path
        return images, labels

    def raw_cases(self, raw: Path) -> list[str]:
        """The identifiers of the raw cases found under ``raw``, sorted.

        Args:
            raw: The folder the raw download was unpacked into.

        Returns:
            The case ids.
        """
        images, labels = self._files(raw)
        return sorted(set(images) | set(labels))

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
        images, labels = self._files(raw)
        if case_id not in images or case_id not in labels:
            raise DataError("image or label file missing")
        image = read_image(images[case_id])
        label = read_image(labels[case_id])
        if not same_grid(image, label):
            raise DataError(
                f"label grid {label.GetSize()} @ {label.GetSpacing()} does not "
                f"match image grid {image.GetSize()} @ {image.GetSpacing()}"
            )
        return image, {"pengwin": rank_values(sitk.GetArrayFromImage(label))}


class Pengwin(PreparedDataset):
    """PENGWIN bone fragments (paper D9)."""

    name: ClassVar[str] = "pengwin"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "pelvic bone fragments on CT (Zenodo)"
    targets: ClassVar[str] = "bone fragments (instances)"
    size: ClassVar[str] = "100 cases, ~12 GB"
    licence: ClassVar[str] = "CC BY-NC-SA 4.0"


register_outputs(PengwinRecipe(), [Pengwin])
