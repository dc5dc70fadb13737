"""The imaging modality of a case, as the dataset declares it: ``"CT"``, ``"MR"`` or ``""``.

A model that was trained with modality-specific intensity handling (LiteMedSAM and MedSAM: a
CT window for CT, percentiles for MR) is *told* the modality by the dataset; it never guesses
it from intensities. Where a dataset declares it:

* nnU-Net folders: ``dataset.json``'s ``channel_names["0"]`` (nnU-Net's own rule: ``"CT"``
  means CT; ``"MRI"``, ``"T1"``, ``"T2"``, ``"FLAIR"``, ``"ADC"``... mean MR), or a per-case
  ``modalities_per_case`` mapping (the built-in demo mixes CT and MR cases);
* folder specs: the ``modality:`` key;
* built-in recipes and the phantoms: their registered ``modality``.

:func:`normalise_modality` turns those free-text names into the two values models act on.
"""

from __future__ import annotations

import re
from typing import Any

CT = "CT"
MR = "MR"

#: words that name an MR contrast or MR itself (matched as whole words, case-insensitive)
_MR_WORDS = ("MR", "MRI", "MRT", "T1", "T1W", "T1C", "T1CE", "T1GD", "T2", "T2W", "T2STAR",
             "FLAIR", "DWI", "ADC", "PD", "PDW", "SWI", "DCE", "BOLD", "NMR")


def normalise_modality(text: object) -> str:
    """``"CT"``, ``"MR"`` or ``""`` (unknown or ambiguous) for a declared modality name.

    >>> normalise_modality("CT"), normalise_modality("MRI (T1)"), normalise_modality("t2")
    ('CT', 'MR', 'MR')
    >>> normalise_modality("CT, MRI"), normalise_modality("noNorm"), normalise_modality(None)
    ('', '', '')
    """
    if not isinstance(text, str):
        return ""
    words = {word.upper() for word in re.split(r"[^A-Za-z0-9*]+", text) if word}
    words = {word.replace("*", "STAR") for word in words}
    is_ct = bool(words & {"CT", "CTA", "CECT", "NCCT", "HU"})
    is_mr = bool(words & set(_MR_WORDS))
    if is_ct == is_mr:  # neither, or both ("CT, MRI": a dataset of mixed cases)
        return ""
    return CT if is_ct else MR


def looks_like_ct(image: Any, modality: str = "") -> bool:
    """Whether ``image`` holds Hounsfield units: not when ``modality`` names MR, otherwise when
    air is present (the 0.5th percentile of every fourth voxel at or below -900). For display
    windows and body masks only (attributes, the review page): a model is never told a case's
    modality from this guess, only from its dataset."""
    import numpy as np

    if "MR" in modality.upper():
        return False
    sample = np.asarray(image[::4, ::4, ::4], dtype=np.float64)
    return bool(sample.size) and float(np.percentile(sample, 0.5)) <= -900.0
