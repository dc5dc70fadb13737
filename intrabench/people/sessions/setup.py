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
    names it).

    Args:
        dataset: The registered dataset's name.
        dataset_params: Its parameters, as a run config gives them; None: none.
        case_id: The case's id.
        target_id: The target's id within the case.

    Returns:
        ``(case, target)``, the case loaded.

    Raises:
        DataError: Naming the valid cases or targets when either is not there.
    """
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


def build_model(
    name: str, params: dict[str, Any] | None, runs_in: dict[str, Any] | None = None
) -> Any:
    """The registered model ``name``, built and ready (weights loaded) before the page opens:
    in this process, or served as a run's ``runs_in:`` says (``{"python": ...}``, ``{"url":
    "tcp://HOST:PORT"}``...; :mod:`intrabench.serving`).

    Args:
        name: The registered model's name.
        params: Its parameters; None: the defaults.
        runs_in: Where it runs, as a run config's ``runs_in:``; None: in this process.

    Returns:
        The model, prepared.

    Raises:
        ConfigError: ``runs_in`` is not valid.
    """
    from types import SimpleNamespace

    from pydantic import ValidationError

    from intrabench.errors import ConfigError
    from intrabench.serving import building
    from intrabench.serving.spec import RunsIn

    where = None
    if runs_in is not None:
        try:
            where = RunsIn.model_validate(runs_in)
        except ValidationError as error:
            first = error.errors()[0]
            place = ".".join(str(p) for p in first["loc"]) or "runs_in"
            raise ConfigError(f"--runs-in: {place}: {first['msg']}") from None
    given = dict(params or {})
    spec = SimpleNamespace(name=name, params=given, build_params=given, runs_in=where)
    if where is not None:
        building.register_served(spec)
    model = building.build_model(spec)
    prepare = getattr(model, "prepare", None)
    if callable(prepare):
        prepare()
    return model
