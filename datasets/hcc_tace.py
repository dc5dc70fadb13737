"""HCC-TACE-Seg (paper D8): one download, two datasets.

* ``hcc-tace-liver`` (organ): liver = Liver + Mass + Necrosis + Portal vein segments.
* ``hcc-tace-lesion`` (instances): Mass + Necrosis, 18-connected components.

The image is the series the SEG references (the "Recon 3" series of the study as fallback).
Several SEGs of one patient (time points) become separate cases (``_2``...), never
overwriting each other.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._convert import instances_from_mask
from ._dicom_recipe import DicomRecipe, union
from ._recipe import Output, PreparedDataset, TciaSource, register_outputs

LIVER_PARTS = ("Liver", "Mass", "Necrosis", "Portal vein")
LESION_PARTS = ("Mass", "Necrosis")


class HccTaceRecipe(DicomRecipe):
    """HCC-TACE-Seg (paper D8): one TCIA download, two datasets (liver, lesions)."""

    key = "hcc-tace"
    source = TciaSource("HCC-TACE-Seg", ("CT", "SEG"))
    outputs = (
        Output(
            "hcc-tace-liver",
            {"background": 0, "liver": 1},
            {"liver": "organ"},
            "HCC-TACE: liver (including tumour and portal vein) on CT",
        ),
        Output(
            "hcc-tace-lesion",
            {"background": 0, "lesion": 1},
            {"lesion": "instance"},
            "HCC-TACE: liver tumours (mass + necrosis), 18-connected instances",
        ),
    )
    licence = "CC BY 4.0 (TCIA)"
    citation = "Moawad et al. 2021, doi:10.7937/TCIA.5FNA-0924"
    case_prefix = ""
    image_description = "Recon 3"

    def make_labels(self, case_id, segments) -> dict[str, np.ndarray | None]:
        """Labels of one case from its DICOM-SEG segments.

        Args:
            case_id: The case's identifier.
            segments: ``[(segment name, mask)]``, each mask bool in the SEG's (k, j, i) voxel order.

        Returns:
            ``{output name: label}``: an integer label array of the masks' shape, or None to leave
            the case out of that output.
        """
        liver = union(segments, LIVER_PARTS)
        lesion = union(segments, LESION_PARTS)
        if lesion is None or not lesion.any():
            self.excluded["hcc-tace-lesion"] = "no Mass/Necrosis segment"
        return {
            "hcc-tace-liver": None if liver is None else liver.astype(np.uint8),
            "hcc-tace-lesion": None if lesion is None else instances_from_mask(lesion, 18),
        }


class HccTaceLiver(PreparedDataset):
    """HCC-TACE liver (paper D8, organ part)."""

    name: ClassVar[str] = "hcc-tace-liver"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "liver on CT (HCC-TACE-Seg, TCIA)"
    targets: ClassVar[str] = "liver (organ)"
    size: ClassVar[str] = "65 cases, ~20 GB (shared with hcc-tace-lesion)"
    licence: ClassVar[str] = "CC BY 4.0"


class HccTaceLesion(PreparedDataset):
    """HCC-TACE liver tumours (paper D8, lesion part)."""

    name: ClassVar[str] = "hcc-tace-lesion"
    modality: ClassVar[str] = "CT"
    description: ClassVar[str] = "liver tumours on CT (HCC-TACE-Seg, TCIA)"
    targets: ClassVar[str] = "liver tumours (instances)"
    size: ClassVar[str] = "65 cases, ~20 GB (shared with hcc-tace-liver)"
    licence: ClassVar[str] = "CC BY 4.0"


register_outputs(HccTaceRecipe(), [HccTaceLiver, HccTaceLesion])
