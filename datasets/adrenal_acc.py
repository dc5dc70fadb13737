"""Adrenal-ACC-Ki67-Seg (paper D7): adrenocortical carcinoma on CT, DICOM-SEG from TCIA.
Instances: components of the tumour mask after grouping parts closer than one voxel
(dilation radius 1, 26-connectivity); components under 30 voxels are dropped; ids 1..K."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._convert import instances_from_mask
from ._dicom_recipe import DicomRecipe, union
from ._recipe import Output, PreparedDataset, TciaSource, register_outputs

MIN_VOXELS = 30


class AdrenalAccRecipe(DicomRecipe):
    """Adrenal-ACC-Ki67-Seg (paper D7): adrenocortical carcinoma on CT, DICOM-SEG from TCIA."""

    key = "adrenal-acc"
    source = TciaSource("Adrenal-ACC-Ki67-Seg", ("CT", "SEG"))
    outputs = (
        Output(
            "adrenal-acc",
            {"background": 0, "tumour": 1},
            {"tumour": "instance"},
            "adrenocortical carcinoma on CT, one target per tumour",
        ),
    )
    licence = "CC BY 4.0 (TCIA)"
    citation = "Moawad et al. 2023, doi:10.7937/1FPG-VM46"
    case_prefix = ""

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
        if mask is None:
            return {"adrenal-acc": None}
        return {"adrenal-acc": instances_from_mask(mask, 26, min_voxels=MIN_VOXELS, dilation=1)}


class AdrenalAcc(PreparedDataset):
    """Adrenal ACC tumours (paper D7)."""

    name: ClassVar[str] = "adrenal-acc"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "adrenal tumours, CT + DICOM-SEG (TCIA)"
    targets: ClassVar[str] = "adrenal tumours (instances)"
    size: ClassVar[str] = "53 cases, ~6 GB"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(AdrenalAccRecipe(), [AdrenalAcc])
