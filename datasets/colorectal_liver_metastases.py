"""Colorectal-Liver-Metastases (paper D6): CT + DICOM-SEG from TCIA. Every segment whose name
starts with "Tumor" is one instance (no connected components). Cases whose tumour segments
overlap are skipped and named (the paper excluded such cases)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._dicom_recipe import DicomRecipe
from ._recipe import Output, PreparedDataset, TciaSource, register_outputs


class ColorectalRecipe(DicomRecipe):
    """Colorectal-Liver-Metastases (paper D6): CT and DICOM-SEG from TCIA, one instance per tumour
    segment."""

    key = "colorectal-liver-metastases"
    source = TciaSource("Colorectal-Liver-Metastases", ("CT", "SEG"))
    outputs = (
        Output(
            "colorectal-liver-metastases",
            {"background": 0, "metastasis": 1},
            {"metastasis": "instance"},
            "colorectal liver metastases on CT, one target per 'Tumor' segment",
        ),
    )
    licence = "CC BY 4.0 (TCIA)"
    citation = "Simpson et al. 2023, doi:10.7937/QXK2-QG03"
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
        tumours = [m for n, m in segments if n.strip().lower().startswith("tumor") and m.any()]
        if not tumours:
            self.excluded["colorectal-liver-metastases"] = "no 'Tumor' segment"
            return {"colorectal-liver-metastases": None}
        count = np.sum(tumours, axis=0)
        if (count > 1).any():
            self.excluded["colorectal-liver-metastases"] = (
                f"tumour segments overlap ({int((count > 1).sum())} voxels)"
            )
            return {"colorectal-liver-metastases": None}
        label = np.zeros(tumours[0].shape, dtype=np.uint16)
        for index, mask in enumerate(tumours, start=1):
            label[mask] = index
        return {"colorectal-liver-metastases": label}


class ColorectalLiverMetastases(PreparedDataset):
    """Colorectal liver metastases (paper D6)."""

    name: ClassVar[str] = "colorectal-liver-metastases"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "colorectal liver metastases, CT + DICOM-SEG (TCIA)"
    targets: ClassVar[str] = "liver metastases (instances)"
    size: ClassVar[str] = "171 cases, ~20 GB"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(ColorectalRecipe(), [ColorectalLiverMetastases])
