"""RIDER Lung CT (paper D4): lung lesions on CT, DICOM-SEG from TCIA; instances = 26-connected
components of the union of all segments."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._convert import instances_from_mask
from ._dicom_recipe import DicomRecipe, union
from ._recipe import Output, PreparedDataset, TciaSource, register_outputs


class RiderLungRecipe(DicomRecipe):
    """RIDER Lung CT (paper D4): lung lesions on CT, DICOM-SEG from TCIA."""

    key = "rider-lung"
    source = TciaSource("RIDER Lung CT", ("CT", "SEG"))
    outputs = (
        Output(
            "rider-lung",
            {"background": 0, "lesion": 1},
            {"lesion": "instance"},
            "RIDER Lung CT: lung lesions (DICOM-SEG), one target per lesion",
        ),
    )
    licence = "CC BY 3.0 (TCIA)"
    citation = "Zhao et al. 2015, doi:10.7937/K9/TCIA.2015.U1X8A5NR"
    case_prefix = "rider_lung_"

    def make_labels(self, case_id, segments) -> dict[str, np.ndarray | None]:
        """Labels of one case from its DICOM-SEG segments.

        Args:
            case_id: The case's identifier.
            segments: ``[(segment name, mask)]``, each mask bool in the SEG's (k, j, i) voxel order.

        Returns:
            ``{output name: label}``: an integer label array of the masks' shape, or None to leave
            the case out of that output.
        """
        mask = union(segments)
        return {"rider-lung": None if mask is None else instances_from_mask(mask, 26)}


class RiderLung(PreparedDataset):
    """RIDER Lung CT: lung lesions (paper D4)."""

    name: ClassVar[str] = "rider-lung"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "lung lesions, CT + DICOM-SEG (TCIA)"
    targets: ClassVar[str] = "lung lesions (instances)"
    size: ClassVar[str] = "58 cases, ~10 GB"
    licence: ClassVar[str] = "CC BY 3.0"


register_outputs(RiderLungRecipe(), [RiderLung])
