"""Reading cases in a worker process (the runner's read-ahead).

Decoding a compressed CT volume takes seconds of CPU; done in the runner's own process it
would compete with the model loop for the GIL. :func:`load_case` runs in a worker subprocess
(see :mod:`intrabench.execution.lanes`) and returns the :class:`~intrabench.types.Case`, which comes
back pickled (arrays as raw bytes, through a spool file when large).
"""

from __future__ import annotations

import importlib
from typing import Any

from intrabench import registry
from intrabench.interfaces import Dataset
from intrabench.types import Case

#: datasets built in this process, by (name, parameters)
_DATASETS: dict[str, Dataset] = {}


def load_case(
    imports: list[str],
    dataset_name: str,
    dataset_params: dict[str, Any],
    case_id: str,
    attributes: bool = False,
) -> Case:
    """Case ``case_id`` of the registered dataset ``dataset_name`` built with ``dataset_params``.

    The dataset is built once per process for each (name, parameters) and reused; a case without
    a modality gets the dataset's declared one, and the first target's box is computed here (one
    pass over the label map for every target's box, off the model loop).

    Args:
        imports: The run's plugin modules (dotted names), imported first so that the components
            they register by decorator are in the registry.
        dataset_name: The dataset's registered name.
        dataset_params: The dataset's parameters from the config (already checked by the
            runner, which built the same dataset).
        case_id: The case to load, one of the dataset's ``case_ids()``.
        attributes: Also measure its targets' attributes
            (:func:`intrabench.attributes.cache.case_with_attributes`).

    Returns:
        The loaded case (image and label map (z, y, x), targets), with its targets' attributes
        when ``attributes`` is true.

    Raises:
        DataError: The dataset cannot read the case (whatever else the dataset raises, too).
    """
    for module in imports:
        importlib.import_module(module)
    key = repr((dataset_name, sorted(dataset_params.items())))
    dataset = _DATASETS.get(key)
    if dataset is None:  # the parameters were checked when the runner built the same dataset
        dataset = _DATASETS[key] = registry.datasets.get(dataset_name)(**dataset_params)
    case = dataset.load(case_id)
    if not case.image.modality:  # recipes declare one modality for every case
        from intrabench.modality import normalise_modality

        case.image = case.image.with_modality(normalise_modality(getattr(dataset, "modality", "")))
    if case.targets:  # one pass over the label map for every target's box, here, not in the loop
        case.target_box(case.targets[0])
    if not attributes:
        return case
    from intrabench.attributes.cache import case_with_attributes

    return case_with_attributes(case, dataset)
