"""What a run's models need from its datasets, checked before anything is loaded.

LiteMedSAM's intensity window depends on the case's modality, which the dataset must declare
(:mod:`intrabench.modality`). Found only when the model meets the case, a missing declaration
would cost a model's build and then fail every work unit, while ``--dry-run`` and
``datasets verify`` call the cases ok. So ``run`` refuses such a plan before it starts,
``--dry-run`` says what the run would refuse, and both name the model, the dataset, the cases
and the fix.
"""

from __future__ import annotations

from typing import Any

from intrabench import registry
from intrabench.wording import listed


def unmet_needs(units: list[Any], datasets: dict[str, Any]) -> list[str]:
    """One line per (model, dataset) whose cases lack what the model needs (a declared CT/MR
    modality, the one need checked); [] when every unit's needs are met or cannot be told
    before reading.

    Args:
        units: The plan's work units (their model, dataset key and case id).
        datasets: The run's built datasets by key; each answers ``declared_modality(case_id)``
            ("" when it declares none, None when it cannot tell) without reading the case.

    Returns:
        One line per (model key, dataset key) with a case missing a modality, naming up to five
        of its cases and the fix, in the order the units meet them.
    """
    missing: dict[tuple[str, str], list[str]] = {}
    for unit in units:
        model = registry.models.get(unit.model.name)
        if not model.needs_modality(unit.model.build_params):
            continue
        declared = datasets[unit.dataset.key].declared_modality(unit.case_id)
        if declared == "":
            cases = missing.setdefault((unit.model.key, unit.dataset.key), [])
            if unit.case_id not in cases:
                cases.append(unit.case_id)
    lines = []
    for (model, dataset), cases in missing.items():
        shown = listed(cases, limit=5)
        lines.append(
            f"{model} needs each case's modality (CT or MR), and dataset '{dataset}' "
            f"declares none for {len(cases)} case(s) ({shown}): declare it "
            "('modality:' in a folder spec, channel_names in dataset.json), or set the "
            "model's modality parameter"
        )
    return lines
