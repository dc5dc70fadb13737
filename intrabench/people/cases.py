"""The cases and reference masks of people's sessions: read through the run's datasets.

A session names its dataset as the run does (its key: the label, else the name). With a run
folder, the datasets are those of its ``config.yaml``; without one, a session's dataset is
the registered dataset of that name with its default parameters (the built-in ``demo-real``).
Masks are boolean (z, y, x) arrays on the case's canonical grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from intrabench.errors import UserError
from intrabench.people.replay import Identity, SessionLibrary, identity_of

if TYPE_CHECKING:
    import numpy as np

    from intrabench.types import Case


def _datasets(run_dir: Path | None) -> dict[str, tuple[str, dict[str, Any]]]:
    """The run's datasets by key: (registered name, parameters); empty without a config."""
    if run_dir is None or not (Path(run_dir) / "config.yaml").is_file():
        return {}
    from intrabench.config import load_config

    config = load_config(Path(run_dir) / "config.yaml")
    return {spec.key: (spec.name, dict(spec.params)) for spec in config.datasets}


def session_cases(
    library: SessionLibrary, run_dir: Path | None = None
) -> dict[tuple[str, str], Case]:
    """The case of every session of ``library`` by (dataset, case id), each read once.

    Args:
        library: The recorded sessions.
        run_dir: A run folder whose config names the sessions' datasets (with their
            parameters); None: the datasets are created by their registered names, without
            parameters.

    Returns:
        (dataset, case id) -> the loaded case.

    Raises:
        UserError: A session's dataset is neither the run's nor registered, or lacks its case.
    """
    from intrabench import registry

    specs = _datasets(run_dir)
    made: dict[str, Any] = {}
    cases: dict[tuple[str, str], Case] = {}
    for session in library.sessions:
        dataset, case_id, _ = identity_of(session)
        if (dataset, case_id) in cases:
            continue
        if dataset not in made:
            name, params = specs.get(dataset, (dataset, {}))
            if name not in registry.datasets.names():
                where = f"the run's datasets ({', '.join(specs)})" if specs else "registered"
                raise UserError(
                    f"{session.path}: dataset {dataset!r} is not {where}; give the run folder "
                    "whose config names it"
                )
            made[dataset] = registry.datasets.create(name, params)
        if case_id not in made[dataset].case_ids():
            raise UserError(f"{session.path}: {dataset} has no case {case_id!r}")
        cases[(dataset, case_id)] = made[dataset].load(case_id)
    return cases


def references(
    library: SessionLibrary, cases: dict[tuple[str, str], Case]
) -> dict[Identity, np.ndarray]:
    """The reference mask of every session's target (targets the case lacks are left out).

    Args:
        library: The recorded sessions.
        cases: Their cases, as :func:`session_cases` gives them.

    Returns:
        (dataset, case id, target id) -> the target's boolean mask, canonical (z, y, x).
    """
    out: dict[Identity, np.ndarray] = {}
    for session in library.sessions:
        identity = identity_of(session)
        case = cases.get(identity[:2])
        target = (
            next((t for t in case.targets if t.target_id == identity[2]), None) if case else None
        )
        if target is not None and identity not in out:
            out[identity] = case.target_mask(target)
    return out
