"""Which declared classes the cases hold: a class no case holds is a mistake, not a result.

A folder spec or ``dataset.json`` that names a class with the wrong label value (``liver: 55``
where the files store 6) gives no target of that class and no error from any one case: each
case is fine on its own. Only over all cases does it show. ``intrabench datasets verify`` and
``intrabench run`` both call :func:`class_coverage` and say the same: an **error** for a
declared class that no case holds, a **warning** naming the class and how many cases hold it
when some cases lack it (legitimate: not every scan shows every organ). (A label value that no
class declares is refused case by case when the case is read: ``load_pair``'s one rule.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Coverage:
    """``errors``: one line per declared class that no case holds; ``warnings``: one line per
    declared class that only some cases hold."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: the datasets whose classes a user declares (a recipe's classes are the dataset's own: a
#: class it lacks in some selection of cases is no mistake of the user's)
USER_DECLARED = ("folder", "nnunet-folder")


def declared_classes(dataset: object) -> dict[str, int]:
    """The classes a user declared for their own data (name -> label value: the folder spec's
    or dataset.json's, as ``use_classes`` chose them); {} for every other dataset.

    Args:
        dataset: A built dataset.

    Returns:
        Class name to label value (background left out).
    """
    if getattr(dataset, "name", None) not in USER_DECLARED:
        return {}
    classes = getattr(dataset, "classes", None)
    if not isinstance(classes, Mapping):
        return {}
    return {str(name): int(value) for name, value in classes.items() if int(value) != 0}


def class_coverage(
    declared: Mapping[str, int],
    cases_holding: Mapping[str, int],
    n_cases: int,
    of_cases: int | None = None,
) -> Coverage:
    """The lines to print for ``declared`` classes (those segmented) over ``n_cases`` cases
    read, of which ``cases_holding[name]`` hold at least one target of that class.
    ``of_cases``: the dataset's number of cases when only ``n_cases`` of them were read (a
    run on some cases): a class none of those holds is then a warning, not an error.

    Args:
        declared: Class name to label value, as the user declared them.
        cases_holding: Class name to the number of read cases holding a target of it.
        n_cases: The number of cases read.
        of_cases: The dataset's number of cases, or None when every case was read.

    Returns:
        The coverage: its error and warning lines (none when no case was read).
    """
    coverage = Coverage()
    if n_cases == 0:
        return coverage
    partial = of_cases is not None and of_cases > n_cases
    for name, value in sorted(declared.items(), key=lambda item: item[1]):
        held = int(cases_holding.get(name, 0))
        if held == 0 and partial:
            coverage.warnings.append(
                f"class '{name}' (label value {value}): none of the {n_cases} case(s) read of "
                f"{of_cases} holds it"
            )
        elif held == 0:
            coverage.errors.append(
                f"class '{name}' (label value {value}) is declared but none of the {n_cases} "
                "case(s) holds it: check its label value"
            )
        elif held < n_cases:
            coverage.warnings.append(
                f"class '{name}' (label value {value}) is in {held} of {n_cases} cases"
            )
    return coverage


def run_coverage(config: object, rows: object) -> list[tuple[str, Coverage]]:
    """(dataset key, coverage) of each dataset of a run ``config`` that declares classes, over
    the cases with result ``rows`` (a class counts as held by a case with a row of it).

    Args:
        config: The run's configuration (its ``datasets``).
        rows: The run's result rows (``dataset``, ``case``, ``target_class``).

    Returns:
        (dataset key, coverage) per dataset with declared classes and rows.
    """
    from intrabench import registry

    found = []
    for spec in getattr(config, "datasets", []):
        if spec.name not in USER_DECLARED:  # nothing to check: not built again for nothing
            continue
        try:
            dataset = registry.datasets.create(spec.name, spec.params)
            declared = declared_classes(dataset)
            of_cases = len(dataset.case_ids())
        except Exception:  # noqa: BLE001 - the run itself reported a dataset it could not build
            continue
        mine = rows[rows["dataset"] == spec.key] if len(rows) else rows
        if not declared or not len(mine):
            continue
        holding = mine.groupby("target_class")["case"].nunique().to_dict()
        found.append(
            (spec.key, class_coverage(declared, holding, int(mine["case"].nunique()), of_cases))
        )
    return found
