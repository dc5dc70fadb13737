"""The case, target and model of a session, found from their names with one-line errors."""

from __future__ import annotations

from typing import Any

from intrabench.errors import DataError
from intrabench.types import Case, Target
from intrabench.wording import listed


def load_target(
    dataset: str, dataset_params: dict[str, Any] | None, case_id: str, target_id: str
) -> tuple[Case, Target]:
    """Case ``case_id`` of the registered dataset and its target ``target_id`` (as a run
    names it); ``DataError`` naming the valid ones when either is not there."""
    from intrabench import registry

    data = registry.datasets.create(dataset, dict(dataset_params or {}))
    ids = [str(i) for i in data.case_ids()]
    if str(case_id) not in ids:
        raise DataError(f"dataset {dataset} has no case {case_id!r}; its cases: {listed(ids)}")
    case = data.load(str(case_id))
    for target in case.targets:
        if target.target_id == str(target_id):
            return case, target
    names = [t.target_id for t in case.targets]
    raise DataError(f"case {case_id} has no target {target_id!r}; its targets: {listed(names)}")


def build_model(name: str, params: dict[str, Any] | None) -> Any:
    """The registered model ``name``, built and ready (weights loaded) before the page opens."""
    from intrabench import registry

    model = registry.models.create(name, dict(params or {}))
    prepare = getattr(model, "prepare", None)
    if callable(prepare):
        prepare()
    return model
