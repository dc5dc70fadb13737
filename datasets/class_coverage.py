"""Which declared classes the cases hold: a class no case holds is a mistake, not a result.

A folder spec or ``dataset.json`` that names a class with the wrong label value (``liver: 55``
where the files store 6) gives no target of that class and no error from any one case: each
case is fine on its own. Only over all cases does it show. ``intrabench datasets verify`` and
``intrabench run`` both call :func:`class_coverage` and say the same: an **error** for a
declared class that no case holds (with the label values the files hold that are no class,
the likely right value), a **warning** naming the class and how many cases hold it when some
cases lack it (legitimate: not every scan shows every organ).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class Coverage:
    """``errors``: one line per declared class that no case holds; ``warnings``: one line per
    declared class that only some cases hold."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def declared_classes(dataset: object) -> dict[str, int]:
    """The dataset's declared foreground classes (name -> label value); {} when it declares
    none (a built-in dataset whose classes are fixed)."""
    classes = getattr(dataset, "classes", None)
    if not isinstance(classes, Mapping):
        return {}
    return {str(name): int(value) for name, value in classes.items() if int(value) != 0}


def class_coverage(declared: Mapping[str, int], cases_holding: Mapping[str, int], n_cases: int,
                   undeclared_values: Iterable[int] = ()) -> Coverage:
    """The lines to print for ``declared`` classes over ``n_cases`` cases read, of which
    ``cases_holding[name]`` hold at least one target of that class; ``undeclared_values``:
    label values the files hold that no class declares."""
    coverage = Coverage()
    if n_cases == 0:
        return coverage
    others = sorted(set(int(v) for v in undeclared_values))
    hint = (f"; the labels hold values {others[:10]} that are no class: is one of them meant?"
            if others else "")
    for name, value in sorted(declared.items(), key=lambda item: item[1]):
        held = int(cases_holding.get(name, 0))
        if held == 0:
            coverage.errors.append(
                f"class '{name}' (label value {value}) is declared but none of the {n_cases} "
                f"case(s) holds it: check its label value{hint}")
        elif held < n_cases:
            coverage.warnings.append(
                f"class '{name}' (label value {value}) is in {held} of {n_cases} cases")
    return coverage


def run_coverage(config: object, rows: object) -> list[tuple[str, Coverage]]:
    """(dataset key, coverage) of each dataset of a run ``config`` that declares classes, over
    the cases with result ``rows`` (a class counts as held by a case with a row of it)."""
    from intrabench import registry

    found = []
    for spec in getattr(config, "datasets", []):
        try:
            declared = declared_classes(registry.datasets.create(spec.name, spec.params))
        except Exception:  # noqa: BLE001 - the run itself reported a dataset it could not build
            continue
        mine = rows[rows["dataset"] == spec.key] if len(rows) else rows
        if not declared or not len(mine):
            continue
        holding = mine.groupby("target_class")["case"].nunique().to_dict()
        found.append((spec.key, class_coverage(declared, holding, int(mine["case"].nunique()))))
    return found
