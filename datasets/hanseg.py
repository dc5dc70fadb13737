"""HaN-Seg (paper D2): 30 head-and-neck organs at risk on T1 MRI, Zenodo.

The organ masks are drawn on the CT. Each case's CT is registered rigidly onto its MR with
SimpleITK's registration framework (Euler 3D, Mattes mutual information, moments
initialisation; see ``_convert.register_rigid``), and every CT-space mask is resampled onto the
MR grid through that transform with nearest-neighbour interpolation. The MR keeps its own
geometry (direction included) and the label is written on exactly that grid.

Label ids follow ``HANSEG_ORGANS`` (alphabetical, 1..30). Where masks overlap after
resampling, the smaller organ wins (see ``paint_smallest_last``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError

from ._convert import paint_smallest_last, read_image, register_rigid, warp_mask
from ._recipe import FileInfo, Output, PreparedDataset, Recipe, ZenodoSource, register_outputs, say

HANSEG_ORGANS = (
    "A_Carotid_L",
    "A_Carotid_R",
    "Arytenoid",
    "Bone_Mandible",
    "Brainstem",
    "BuccalMucosa",
    "Cavity_Oral",
    "Cochlea_L",
    "Cochlea_R",
    "Cricopharyngeus",
    "Esophagus_S",
    "Eye_AL",
    "Eye_AR",
    "Eye_PL",
    "Eye_PR",
    "Glnd_Lacrimal_L",
    "Glnd_Lacrimal_R",
    "Glnd_Submand_L",
    "Glnd_Submand_R",
    "Glnd_Thyroid",
    "Glottis",
    "Larynx_SG",
    "Lips",
    "OpticChiasm",
    "OpticNrv_L",
    "OpticNrv_R",
    "Parotid_L",
    "Parotid_R",
    "Pituitary",
    "SpinalCord",
)
_OAR = re.compile(r"^(?P<case>.+)_OAR_(?P<organ>.+)\.seg\.nrrd$")


class HanSegRecipe(Recipe):
    """HaN-Seg (paper D2): head-and-neck organs at risk on T1 MRI, from Zenodo."""

    key = "hanseg"
    source = ZenodoSource("7442914", {"HaN-Seg.zip": FileInfo()})
    outputs = (
        Output(
            "hanseg",
            {"background": 0, **{o: i for i, o in enumerate(HANSEG_ORGANS, 1)}},
            {o: "organ" for o in HANSEG_ORGANS},
            "HaN-Seg: 30 organs at risk on T1 MRI (CT masks registered onto the MR)",
        ),
    )
    licence = "CC BY-NC-ND 4.0"
    citation = "Podobnik et al. 2023, doi:10.5281/zenodo.7442914"

    #: registration iterations per pyramid level (tests lower it for speed)
    iterations: int = 200

    def _cases(self, raw: Path) -> dict[str, Path]:
        return {
            p.name[: -len("_IMG_MR_T1.nrrd")]: p.parent
            for p in sorted(self.unpack(raw).rglob("*_IMG_MR_T1.nrrd"))
        }

    def raw_cases(self, raw: Path) -> list[str]:
        """The identifiers of the raw cases found under ``raw``, sorted.

        A case is a ``<case>_IMG_MR_T1.nrrd`` file in the extracted download.

        Args:
            raw: The raw download folder (``HaN-Seg.zip``, extracted here on first use).

        Returns:
            The case ids (the file names' ``<case>`` part, e.g. ``case_01``).
        """
        return sorted(self._cases(raw))

    def convert(self, raw: Path, case_id: str) -> tuple[sitk.Image, dict[str, np.ndarray | None]]:
        """Read one raw case: its T1 MR, and its CT-space organ masks warped onto the MR.

        The CT is registered rigidly onto the MR (:attr:`iterations` per pyramid level); mask
        files of organs not in ``HANSEG_ORGANS`` are ignored with a note.

        Args:
            raw: The raw download folder.
            case_id: One of :meth:`raw_cases`.

        Returns:
            The MR image (its own geometry) and ``{"hanseg": label}``: a uint16 array in
            SimpleITK's (k, j, i) order on the MR's grid, 0 background, organ ids 1..30 in
            ``HANSEG_ORGANS`` order, the smaller organ kept where two overlap.

        Raises:
            DataError: The case has no CT to register the masks from, or no organ masks.
        """
        folder = self._cases(raw)[case_id]
        mr = read_image(folder / f"{case_id}_IMG_MR_T1.nrrd")
        ct_path = folder / f"{case_id}_IMG_CT.nrrd"
        if not ct_path.is_file():
            raise DataError(f"no CT ({ct_path.name}) to register the organ masks from")
        ct = read_image(ct_path)
        transform = register_rigid(mr, ct, iterations=self.iterations)
        values = {name: i for i, name in enumerate(HANSEG_ORGANS, start=1)}
        masks: dict[int, np.ndarray] = {}
        for path in sorted(folder.glob(f"{case_id}_OAR_*.seg.nrrd")):
            organ = _OAR.match(path.name).group("organ")
            if organ not in values:
                say(f"  {case_id}: ignoring unknown organ mask {path.name}")
                continue
            mask = read_image(path)
            masks[values[organ]] = warp_mask(mask, mr, transform)
        if not masks:
            raise DataError("no organ masks (*_OAR_*.seg.nrrd)")
        size = mr.GetSize()
        label, overlap = paint_smallest_last(masks, (size[2], size[1], size[0]))
        if overlap:
            say(f"  {case_id}: {overlap} voxels claimed by two organs (smaller organ kept)")
        return mr, {"hanseg": label}


class HanSeg(PreparedDataset):
    """HaN-Seg organs at risk on MRI (paper D2)."""

    name: ClassVar[str] = "hanseg"
    modality: ClassVar[str] = "MRI (T1)"
    description: ClassVar[str] = "30 head-and-neck organs at risk on T1 MRI (Zenodo)"
    targets: ClassVar[str] = "30 organs at risk (organs)"
    size: ClassVar[str] = "42 cases, ~2.5 GB"
    licence: ClassVar[str] = "CC BY-NC-ND 4.0"


register_outputs(HanSegRecipe(), [HanSeg])
