"""The core's import rules, read from every module's source with ``ast``.

* ``intrabench.engine`` may import ``intrabench.evaluation`` and ``intrabench.io``;
* ``intrabench.evaluation`` imports neither ``intrabench.engine`` nor ``intrabench.io``;
* ``intrabench.io`` imports neither ``intrabench.engine`` nor ``intrabench.evaluation``;
* nothing in the core (``intrabench/``) imports ``intrabench.models``, ``intrabench.prompters``
  or ``intrabench.datasets``: components arrive through the registries. The entry, ``cli.py``
  and ``commands/`` (the command line that wires components in, e.g. ``datasets prepare``
  driving the recipes), is the one exception;
* **no import runs back up**: the features (``attributes``, ``clicks``, ``review``,
  ``timing``) stand beside each other and never import one another nor ``reports`` (which
  assembles them); the low rooms they share (``io``: run-folder paths, the cache; ``evaluation``:
  aggregation and statistics; ``plotting``: figure style; ``modality``, ``types``) import no
  feature, no ``reports`` and (``plotting``) no engine.

Imports inside functions count too (a lazy import is still a dependency). And no module of
the installed packages (intrabench/, models/, prompters/, datasets/) takes part in an import
circle, ``importlib.import_module("literal")`` calls included.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "intrabench"

#: part -> the parts of the core it must not import
FEATURES = ("intrabench.attributes", "intrabench.clicks", "intrabench.review", "intrabench.timing")
REPORTS = ("intrabench.reports",)
FORBIDDEN = {
    "intrabench.evaluation": ("intrabench.engine", "intrabench.io", *FEATURES, *REPORTS),
    "intrabench.io": ("intrabench.engine", "intrabench.evaluation", *FEATURES, *REPORTS),
    "intrabench.plotting": ("intrabench.engine", *FEATURES, *REPORTS),
    "intrabench.modality": ("intrabench.engine", *FEATURES, *REPORTS),
    "intrabench.types": ("intrabench.engine", *FEATURES, *REPORTS),
    **{
        feature: (*(other for other in FEATURES if other != feature), *REPORTS)
        for feature in FEATURES
    },
}
COMPONENTS = ("intrabench.models", "intrabench.prompters", "intrabench.datasets")


def imported_modules(source: str, module: str) -> set[str]:
    """Absolute names of every module ``source`` (the module ``module``) imports."""
    names: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


ENTRY = ("intrabench.cli", "intrabench.commands")


def violations(modules: dict[str, str]) -> list[str]:
    """'importer -> forbidden part' for every rule broken by ``modules`` (name -> source)."""
    found = set()
    for module, source in modules.items():
        rules = [
            forbidden
            for part, forbidden in FORBIDDEN.items()
            if module == part or module.startswith(part + ".")
        ]
        entry = any(module == e or module.startswith(e + ".") for e in ENTRY)
        banned = (() if entry else COMPONENTS) + tuple(p for rule in rules for p in rule)
        for name in imported_modules(source, module):
            for part in banned:
                if name == part or name.startswith(part + "."):
                    found.add(f"{module} -> {part}")
    return sorted(found)


def core_modules() -> dict[str, str]:
    modules = {}
    for path in sorted(CORE.rglob("*.py")):
        relative = path.relative_to(CORE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1] + ["__init__"]
        modules[".".join(parts)] = path.read_text()
    return modules


def test_the_core_follows_its_import_rules():
    modules = core_modules()
    assert "intrabench.engine.runner" in modules and "intrabench.evaluation.metrics" in modules
    assert violations(modules) == []


def test_the_rule_check_finds_planted_violations():
    planted = {
        "intrabench.evaluation.metrics": "from intrabench.engine.runner import Runner\n",
        "intrabench.io.volume": "def f():\n    from ..evaluation import aggregate\n",
        "intrabench.engine.runner": "import intrabench.models.sam_family.sam\nfrom intrabench.io import results\n",
        "intrabench.reports.html": "from intrabench.prompters import refiners\n",
    }
    assert violations(planted) == [
        "intrabench.engine.runner -> intrabench.models",
        "intrabench.evaluation.metrics -> intrabench.engine",
        "intrabench.io.volume -> intrabench.evaluation",
        "intrabench.reports.html -> intrabench.prompters",
    ]
    # the same imports from the command line are allowed; evaluation importing io is not
    assert violations(
        {
            "intrabench.commands.x": "from intrabench.datasets import _recipe\n",
            "intrabench.evaluation.aggregate": "import intrabench.io.results\n",
        }
    ) == ["intrabench.evaluation.aggregate -> intrabench.io"]


def test_every_core_package_is_installed():
    """A non-editable install (``pip install .``) ships only the packages pyproject lists: a
    new package left out of it imports from a checkout but not from a wheel."""
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    listed = set(
        tomllib.loads((CORE.parent / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    packages = {
        ".".join(path.parent.relative_to(CORE.parent).parts) for path in CORE.rglob("__init__.py")
    }
    assert packages - listed == set()


# --------------------------------------------------------------------------------------
# No import circles, anywhere in the installed packages
# --------------------------------------------------------------------------------------

#: source folder -> the package it installs as (pyproject's package-dir)
INSTALLED_AS = {
    "intrabench": "intrabench",
    "models": "intrabench.models",
    "prompters": "intrabench.prompters",
    "datasets": "intrabench.datasets",
}


def installed_modules() -> dict[str, tuple[str, bool]]:
    """Every module of intrabench/, models/, prompters/ and datasets/ under its installed
    name: (source, whether it is a package's __init__)."""
    root = CORE.parent
    modules = {}
    for folder, package in INSTALLED_AS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if folder == "intrabench" and parts[0] in ("models", "prompters", "datasets"):
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join([package] + (parts[:-1] if is_package else parts))
            modules[name] = (path.read_text(), is_package)
    return modules


def import_graph(modules: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules of ``modules`` it imports: at the top, inside functions, and by
    ``importlib.import_module("a.literal.name")``; ``from package import module`` counts as
    the module."""
    graph: dict[str, set[str]] = {}
    for name, (source, is_package) in modules.items():
        package = name if is_package else name.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else base)
            elif isinstance(node, ast.Call):
                called = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if (
                    called == "import_module"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    found.add(node.args[0].value)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_no_import_circles_in_the_installed_packages():
    modules = installed_modules()
    assert {
        "intrabench.models.sam_family.litemedsam",
        "intrabench.prompters.basic",
        "intrabench.datasets._recipe",
        "intrabench.io.volume",
    } <= set(modules)
    assert circles(import_graph(modules)) == []


def test_the_circle_check_finds_planted_circles():
    planted = {
        "intrabench.a": ("def f():\n    from intrabench import b\n", False),  # a lazy import
        "intrabench.b": ("from . import c\n", False),
        "intrabench.c": ("import importlib\nimportlib.import_module('intrabench.a')\n", False),
        "intrabench.d": ("from intrabench.a import f\n", False),  # into the circle, not in it
        "intrabench.models.x": ("from .y import thing\n", False),
        "intrabench.models.y": ("from intrabench.models import x\n", False),
    }
    assert circles(import_graph(planted)) == [
        ["intrabench.a", "intrabench.b", "intrabench.c"],
        ["intrabench.models.x", "intrabench.models.y"],
    ]
