"""Modalities per case in a folder spec, and intensities that contradict a declared modality.

A folder spec's ``modality:`` is one name for every case (``modality: CT``) or a mapping from
case ids or glob patterns of case ids to names (``modality: {lung2: CT, "brain*": MR}``); a
case no key matches is undeclared. :func:`modality_contradiction` is what ``datasets verify``
asks of each case: a CT with no voxel below -500 HU (no air: an MR or a normalised image?) or
an MR with voxels below -500 (CT's air) contradicts its declaration.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import numpy as np

from intrabench.errors import UserError
from intrabench.modality import CT, MR, declared_modality
from intrabench.wording import listed

#: below this (HU) a CT holds air; an MR's intensities never go this low
AIR_HU = -500.0


def case_modalities(value: Any, case_ids: list[str], where: str) -> tuple[str, dict[str, str]]:
    """(the modality of every case, the modality of each case a mapping names): ``value`` is
    a spec's ``modality:``. A key that matches no case, or a case two keys give different
    modalities, is a UserError naming them.

    Args:
        value: The spec's ``modality:``: 'CT' or 'MR' for every case (None or empty: not
            declared), or a mapping of case ids or patterns (``lung*``) to 'CT' or 'MR'.
        case_ids: The dataset's case ids.
        where: The spec's name, to start the error line.

    Returns:
        (the modality of every case: 'CT', 'MR' or "" (undeclared, or a mapping); case id
        to 'CT' or 'MR', {} for one value).

    Raises:
        UserError: A name is not a modality, a key matches no case, or two keys disagree.
    """
    if not isinstance(value, dict):
        return declared_modality(value, where), {}
    per_case: dict[str, str] = {}
    given_by: dict[str, str] = {}
    for key, name in value.items():
        key = str(key)
        modality = declared_modality(name, f"{where}: modality: {key}")
        matched = [c for c in case_ids if c == key or fnmatch.fnmatchcase(c, key)]
        if not matched:
            raise UserError(
                f"{where}: modality: '{key[:60]}' matches no case (cases: "
                f"{listed(case_ids)}); give case ids or patterns such as 'lung*'"
            )
        for case_id in matched:
            if per_case.get(case_id, modality) != modality:
                raise UserError(
                    f"{where}: modality: case '{case_id}' is {per_case[case_id]} by "
                    f"'{given_by[case_id]}' and {modality} by '{key}'; give it one"
                )
            per_case[case_id], given_by[case_id] = modality, key
    return "", per_case


def modality_contradiction(array: np.ndarray, modality: str) -> str | None:
    """Why the intensities of ``array`` (any axis order) contradict ``modality`` (``CT``,
    ``MR``), or None: a CT without a voxel below -500 HU, an MR with one.

    Args:
        array: The case's intensities (any axis order), as stored.
        modality: The declared modality; anything but 'CT' or 'MR' is not checked.

    Returns:
        One line saying what is wrong and how to declare it, or None.
    """
    if modality not in (CT, MR) or array.size == 0:
        return None
    lowest = float(np.min(array))
    if modality == CT and lowest >= AIR_HU:
        return (
            f"declared CT, but no voxel is below {AIR_HU:g} HU (the lowest is {lowest:g}): "
            "not CT in HU (an MR, a normalised image?); declare its modality (modality: "
            "{case: MR}), or set trust_modality: true in the spec (datasets verify "
            "--trust-modality) if it is CT"
        )
    if modality == MR and lowest < AIR_HU:
        return (
            f"declared MR, but voxels go down to {lowest:g} (below {AIR_HU:g}, CT's air "
            "in HU): a CT?; declare its modality (modality: {case: CT}), or set "
            "trust_modality: true in the spec (datasets verify --trust-modality) if it is MR"
        )
    return None
