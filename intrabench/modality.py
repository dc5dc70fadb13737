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

from intrabench.errors import UserError

CT = "CT"
MR = "MR"

#: words that name CT (matched as whole words, case-insensitive)
_CT_WORDS = ("CT", "CTA", "CECT", "NCCT", "HU")
#: words that name an MR contrast or MR itself (matched as whole words, case-insensitive)
_MR_WORDS = (
    "MR",
    "MRI",
    "MRT",
    "T1",
    "T1W",
    "T1C",
    "T1CE",
    "T1GD",
    "T2",
    "T2W",
    "T2STAR",
    "FLAIR",
    "DWI",
    "ADC",
    "PD",
    "PDW",
    "SWI",
    "DCE",
    "BOLD",
    "NMR",
)


def _words(text: str) -> set[str]:
    """The upper-case words of a modality name (``T2*`` is ``T2STAR``)."""
    words = {word.upper() for word in re.split(r"[^A-Za-z0-9*]+", text) if word}
    return {word.replace("*", "STAR") for word in words}


def normalise_modality(text: object) -> str:
    """``"CT"``, ``"MR"`` or ``""`` (unknown or ambiguous) for a declared modality name.

    Args:
        text: A modality name as a dataset declares it (``"MRI (T1)"``, ``"t2"``); anything that
            is not a ``str`` gives ``""``.

    Returns:
        ``"CT"``, ``"MR"``, or ``""`` when it names neither or both.

    >>> normalise_modality("CT"), normalise_modality("MRI (T1)"), normalise_modality("t2")
    ('CT', 'MR', 'MR')
    >>> normalise_modality("CT, MRI"), normalise_modality("noNorm"), normalise_modality(None)
    ('', '', '')
    """
    if not isinstance(text, str):
        return ""
    words = _words(text)
    is_ct = bool(words & set(_CT_WORDS))
    is_mr = bool(words & set(_MR_WORDS))
    if is_ct == is_mr:  # neither, or both ("CT, MRI": a dataset of mixed cases)
        return ""
    return CT if is_ct else MR


def declared_modality(value: object, where: str) -> str:
    """``"CT"`` or ``"MR"`` for a modality a user declares (a folder spec's ``modality:``, an
    nnU-Net folder's ``modalities_per_case``), ``""`` when it is left out (None or empty).

    Anything else is refused: a name that is neither CT nor MR ("CTT", "PET", "xray") or both
    ("CT, MRI"), read as undeclared, would make a model that needs the modality fail every unit
    later, and give one that adapts to it no modality without a word.

    Args:
        value: The declared value, as the user's file holds it.
        where: What the message names as its place (the spec file and key).

    Returns:
        ``"CT"``, ``"MR"``, or ``""`` when left out.

    Raises:
        UserError: Listing the known names, for any other value.

    >>> declared_modality("MRI (T1)", "spec"), declared_modality(None, "spec")
    ('MR', '')
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if not isinstance(value, str):
        problem = f"must be a name such as CT or MR, not {value!r}"[:120]
    elif normalised := normalise_modality(value):
        return normalised
    elif _words(value) & set(_CT_WORDS) and _words(value) & set(_MR_WORDS):
        problem = f"'{value[:60]}' names both CT and MR (a case is one or the other)"
    else:
        problem = f"'{value[:60]}' is not a known modality name"
    raise UserError(
        f"{where}: modality {problem}; known names: {', '.join(_CT_WORDS)} (CT), "
        f"{', '.join(_MR_WORDS)} (MR); or leave it out (undeclared)"
    )


def looks_like_ct(image: Any, modality: str = "") -> bool:
    """Whether ``image`` holds Hounsfield units: not when ``modality`` names MR, otherwise when
    air is present (the 0.5th percentile of every fourth voxel at or below -900). For display
    windows and body masks only (attributes, the review page): a model is never told a case's
    modality from this guess, only from its dataset.

    Args:
        image: A 3D array, canonical (z, y, x), in the image's own units.
        modality: The declared modality (``"MR"`` decides at once); empty: unknown.

    Returns:
        True when the values look like CT.
    """
    import numpy as np

    if "MR" in modality.upper():
        return False
    sample = np.asarray(image[::4, ::4, ::4], dtype=np.float64)
    return bool(sample.size) and float(np.percentile(sample, 0.5)) <= -900.0
