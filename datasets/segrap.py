"""SegRap2023 (paper D10): 45 organs at risk on non-contrast CT of nasopharyngeal carcinoma.

The data is on Google Drive in a password-protected zip (the organisers publish the password
with the data-access instructions of the SegRap2023 challenge; it is not stored here). This
recipe prints where to get it; ``prepare`` unpacks it with ``$INTRABENCH_SEGRAP_PASSWORD``
(or uses a folder the user unpacked into ``<root>/raw/segrap/``).

Layout: image ``<case>/image.nii.gz`` (non-contrast CT; ``image_contrast.nii.gz`` is not
used), one mask per organ ``<case>/<Organ>.nii.gz`` in a labels folder (the Task001 /
"Update_Labels" organ set). Label ids: the organ names sorted case-insensitively, 1..N, read
from the data and written to dataset.json (the single source of truth; never file-system
order). Where masks overlap, the smaller organ wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import paint_smallest_last, read_image, same_grid
from ._recipe import ManualSource, Output, PreparedDataset, Recipe, register_outputs, say

_IMAGE_NAMES = {"image.nii.gz", "image_contrast.nii.gz"}


class SegRapRecipe(Recipe):
    """SegRap2023 (paper D10): organs at risk on non-contrast CT of nasopharyngeal carcinoma."""

    key = "segrap"
    source = ManualSource(
        url="https://segrap2023.grand-challenge.org/dataset/",
        instructions=(
            "Follow the challenge's data-access instructions: they link the Google "
            "Drive folder with the training set and give the zip password. Download "
            "the training-set zip(s) (images and the Task001 organ labels). Then "
            "either set INTRABENCH_SEGRAP_PASSWORD to that password so 'prepare' can "
            "unpack the zip, or unpack it yourself into this folder."
        ),
        expected=("*.zip", "**/image.nii.gz"),
    )
    outputs = (
        Output("segrap", {"background": 0}, {}, "SegRap2023: 45 organs at risk on non-contrast CT"),
    )
    licence = "CC BY-NC 4.0 (SegRap2023 data agreement)"
    citation = "Luo et al. 2023, SegRap2023, arXiv:2312.09576"
    archive_password_env = "INTRABENCH_SEGRAP_PASSWORD"

    def _layout(self, raw: Path) -> tuple[dict[str, Path], dict[str, Path]]:
        cached = getattr(self, "_layout_cache", None)
        if cached is not None and cached[0] == raw:
            return cached[1]
        base = self.unpack(raw)
        images = {p.parent.name: p for p in sorted(base.rglob("image.nii.gz"))}
        labels: dict[str, Path] = {}
        for case_id in images:
            for folder in sorted(base.rglob(case_id)):
                if (
                    folder.is_dir()
                    and folder != images[case_id].parent
                    and any(p.name not in _IMAGE_NAMES for p in folder.glob("*.nii.gz"))
                ):
                    labels[case_id] = folder
        self._layout_cache = (raw, (images, labels))
        return images, labels

    def _organs(self, raw: Path) -> list[str]:
        images, labels = self._layout(raw)
        names: set[str] = set()
        for folder in labels.values():
            names |= {
                p.name[: -len(".nii.gz")]
                for p in folder.glob("*.nii.gz")
                if p.name not in _IMAGE_NAMES
            }
        return sorted(names, key=lambda n: (n.lower(), n))

    def labels_for(self, output: Output, raw: Path) -> dict[str, int]:
        """The label values of the organs found in the raw data: ``{"background": 0, organ: 1..N}``.

        Args:
            output: The recipe's one output (``segrap``); its declared labels are not used.
            raw: The raw download folder (or the folder the user unpacked the zip into).

        Returns:
            Class name to label value: background 0, then the organ names of every case's mask
            files sorted case-insensitively, numbered from 1.
        """
        return {"background": 0, **{n: i for i, n in enumerate(self._organs(raw), start=1)}}

    def target_types_for(self, output: Output, raw: Path) -> dict[str, str]:
        """Every class of the raw data is an ``organ`` target.

        Args:
            output: The recipe's one output (``segrap``).
            raw: The raw download folder.

        Returns:
            Each organ name found in the raw data to ``"organ"``.
        """
        return {name: "organ" for name in self._organs(raw)}

    def raw_cases(self, raw: Path) -> list[str]:
        """The identifiers of the raw cases found under ``raw``, sorted.

        A case is a folder holding an ``image.nii.gz``, named by the case.

        Args:
            raw: The raw download folder (its zip is unpacked with the password of
                ``$INTRABENCH_SEGRAP_PASSWORD`` on first use, or it holds the unpacked data).

        Returns:
            The case ids (the image folders' names).
        """
        return sorted(self._layout(raw)[0])

    def convert(self, raw: Path, case_id: str) -> tuple[sitk.Image, dict[str, np.ndarray | None]]:
        """Read one raw case: its non-contrast CT and its organ masks painted into one map.

        Args:
            raw: The raw download folder.
            case_id: One of :meth:`raw_cases`.

        Returns:
            The CT image and ``{"segrap": label}``: a uint16 array in SimpleITK's (k, j, i)
            order on the image's grid, 0 background, organ ids as :meth:`labels_for`, the
            smaller organ kept where two overlap.

        Raises:
            DataError: The case has no organ label folder or no organ masks, or a mask is on
                another grid than the image (the message says which).
        """
        images, labels = self._layout(raw)
        if case_id not in labels:
            raise DataError("no organ label folder for this case")
        image = read_image(images[case_id])
        values = self.labels_for(self.outputs[0], raw)
        masks: dict[int, np.ndarray] = {}
        for path in sorted(labels[case_id].glob("*.nii.gz")):
            organ = path.name[: -len(".nii.gz")]
            if organ not in values:
                continue
            mask = read_image(path)
            if not same_grid(mask, image):
                raise DataError(
                    f"{path.name}: grid {mask.GetSize()} @ {mask.GetSpacing()} "
                    f"does not match image grid {image.GetSize()} @ "
                    f"{image.GetSpacing()}"
                )
            masks[values[organ]] = sitk.GetArrayFromImage(mask) > 0
        if not masks:
            raise DataError("no organ masks")
        size = image.GetSize()
        label, overlap = paint_smallest_last(masks, (size[2], size[1], size[0]))
        if overlap:
            say(f"  {case_id}: {overlap} voxels claimed by two organs (smaller organ kept)")
        return image, {"segrap": label}


class SegRap(PreparedDataset):
    """SegRap2023 organs at risk on CT (paper D10)."""

    name: ClassVar[str] = "segrap"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "45 organs at risk on non-contrast CT (Google Drive, manual)"
    targets: ClassVar[str] = "45 organs at risk (organs)"
    size: ClassVar[str] = "30 cases used in the paper (120 in the training set), ~10 GB"
    licence: ClassVar[str] = "CC BY-NC 4.0"


register_outputs(SegRapRecipe(), [SegRap])
