"""The core's import rules, read from every module's source with ``ast``.

* ``intrabench.engine`` may import ``intrabench.evaluation`` and ``intrabench.io``;
* ``intrabench.evaluation`` imports neither ``intrabench.engine`` nor ``intrabench.io``;
* ``intrabench.io`` imports neither ``intrabench.engine`` nor ``intrabench.evaluation``;
* nothing in the core (``intrabench/``) imports ``intrabench.models``, ``intrabench.prompters``
  or ``intrabench.datasets``: components arrive through the registries. The entry, ``cli.py``
  and ``commands/`` (the command line that wires components in, e.g. ``datasets prepare``
  driving the recipes), is the one exception.

Imports inside functions count too (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "intrabench"

#: part -> the parts of the core it must not import
FORBIDDEN = {
    "intrabench.evaluation": ("intrabench.engine", "intrabench.io"),
    "intrabench.io": ("intrabench.engine", "intrabench.evaluation"),
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
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


ENTRY = ("intrabench.cli", "intrabench.commands")


def violations(modules: dict[str, str]) -> list[str]:
    """'importer -> forbidden part' for every rule broken by ``modules`` (name -> source)."""
    found = set()
    for module, source in modules.items():
        rules = [forbidden for part, forbidden in FORBIDDEN.items()
                 if module == part or module.startswith(part + ".")]
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
        "intrabench.engine.runner": "import intrabench.models.sam\nfrom intrabench.io import results\n",
        "intrabench.reports.html": "from intrabench.prompters import refiners\n",
    }
    assert violations(planted) == [
        "intrabench.engine.runner -> intrabench.models",
        "intrabench.evaluation.metrics -> intrabench.engine",
        "intrabench.io.volume -> intrabench.evaluation",
        "intrabench.reports.html -> intrabench.prompters",
    ]
    # the same imports from the command line are allowed; evaluation importing io is not
    assert violations({"intrabench.commands.x": "from intrabench.datasets import _recipe\n",
                       "intrabench.evaluation.aggregate": "import intrabench.io.results\n"}) == [
        "intrabench.evaluation.aggregate -> intrabench.io"]


def test_every_core_package_is_installed():
    """A non-editable install (``pip install .``) ships only the packages pyproject lists: a
    new package left out of it imports from a checkout but not from a wheel."""
    import pytest

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    listed = set(tomllib.loads((CORE.parent / "pyproject.toml").read_text())["tool"]
                 ["setuptools"]["packages"])
    packages = {".".join(path.parent.relative_to(CORE.parent).parts)
                for path in CORE.rglob("__init__.py")}
    assert packages - listed == set()
