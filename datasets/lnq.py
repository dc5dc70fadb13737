"""LNQ / Mediastinal-Lymph-Node-SEG (paper D5): mediastinal lymph nodes on CT, DICOM-SEG from
TCIA; instances = 26-connected components."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._convert import instances_from_mask
from ._dicom_recipe import DicomRecipe, union
from ._recipe import Output, PreparedDataset, TciaSource, register_outputs


class LnqRecipe(DicomRecipe):
    """LNQ / Mediastinal-Lymph-Node-SEG (paper D5): mediastinal lymph nodes on CT, DICOM-SEG from
    TCIA."""

    key = "lnq"
    source = TciaSource("Mediastinal-Lymph-Node-SEG", ("CT", "SEG", "RTSTRUCT"))
    outputs = (
        Output(
            "lnq",
            {"background": 0, "lymph node": 1},
            {"lymph node": "instance"},
            "LNQ: mediastinal lymph nodes on CT, one target per node",
        ),
    )
    licence = "CC BY 4.0 (TCIA)"
    citation = "Dorent et al. 2024, LNQ challenge"
    case_prefix = "lnq_"

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
        return {"lnq": None if mask is None else instances_from_mask(mask, 26)}


class Lnq(PreparedDataset):
    """LNQ: mediastinal lymph nodes (paper D5)."""

    name: ClassVar[str] = "lnq"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "mediastinal lymph nodes, CT + DICOM-SEG (TCIA)"
    targets: ClassVar[str] = "lymph nodes (instances)"
    size: ClassVar[str] = "513 cases, ~80 GB"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(LnqRecipe(), [Lnq])
