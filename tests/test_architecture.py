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

* the components (models/, prompters/, datasets/) import only the core listed in
  ``COMPONENT_CORE`` (and ``COMPONENT_EXTRA``), never one another;
* no two folders import each other round in a loop (a core folder, a top-level module of
  intrabench/, a component package and each of its subfolders are the nodes).

Imports inside functions count too (a lazy import is still a dependency); imports under
``if TYPE_CHECKING:`` do not (they never run). And no module of the installed packages
(intrabench/, models/, prompters/, datasets/) takes part in an import circle,
``importlib.import_module("literal")`` calls included. docs/architecture.md states the rules.
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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_nodes(source: str) -> list[ast.AST]:
    """Every node of ``source``'s syntax tree but those under ``if TYPE_CHECKING:``: an import
    there never runs (it names a type for annotations), every other one counts, inside
    functions too."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                skipped.update(id(inner) for inner in ast.walk(child))
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def imported_modules(source: str, module: str) -> set[str]:
    """Absolute names of every module ``source`` (the module ``module``) imports."""
    names: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in runtime_nodes(source):
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
    assert "intrabench.execution.runner" in modules and "intrabench.evaluation.metrics" in modules
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
    # the component folders' subfolders too (models/sam_family installs as
    # intrabench.models.sam_family)
    for folder, package in INSTALLED_AS.items():
        if folder != "intrabench":
            root = CORE.parent / folder
            packages |= {
                ".".join([package, *path.parent.relative_to(root).parts])
                for path in root.rglob("__init__.py")
            }
    assert "intrabench.models.sam_family" in packages
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
        for node in runtime_nodes(source):
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


# --------------------------------------------------------------------------------------
# The components (models/, prompters/, datasets/): what of the core they may import
# --------------------------------------------------------------------------------------

#: the core a component may import: the vocabulary it implements (types, interfaces,
#: registry, errors), the low rooms (io: volumes and checkpoints; masks: boxes, components,
#: distances; seeding; safe_yaml) and small facts (device, modality, model cards, wording).
#: Never what runs or reports a benchmark (engine, execution, config, evaluation, features,
#: reports, the command line), and never another component package.
COMPONENT_CORE = (
    "intrabench",  # the package itself (its version)
    "intrabench.device",
    "intrabench.errors",
    "intrabench.interfaces",
    "intrabench.io",
    "intrabench.masks",
    "intrabench.modality",
    "intrabench.model_cards",
    "intrabench.prompt_elements",
    "intrabench.registry",
    "intrabench.safe_yaml",
    "intrabench.seeding",
    "intrabench.types",
    "intrabench.wording",
)
#: more for one component package: the simulated user draws on where people click
#: (clickability maps) and replays what people did
COMPONENT_EXTRA = {
    "intrabench.prompters": (
        "intrabench.clicks.base",
        "intrabench.clicks.observed",
        "intrabench.people.replay",
        "intrabench.people.session_log",
    ),
}


def _within(name: str, part: str) -> bool:
    return name == part or name.startswith(part + ".")


def component_violations(graph: dict[str, set[str]]) -> list[str]:
    """'importer -> imported' for every import of a component module outside its own
    package and the allowed core (``graph``: :func:`import_graph`)."""
    found = set()
    for module, imported in graph.items():
        own = next((c for c in COMPONENTS if _within(module, c)), None)
        if own is None:
            continue
        allowed = COMPONENT_EXTRA.get(own, ())
        for name in imported:
            if _within(name, own) or name in allowed:
                continue
            if name == "intrabench" or any(
                _within(name, part) for part in COMPONENT_CORE if part != "intrabench"
            ):
                continue
            found.add(f"{module} -> {name}")
    return sorted(found)


def test_components_import_only_the_allowed_core():
    graph = import_graph(installed_modules())
    assert "intrabench.models.sam_family.litemedsam" in graph
    assert "intrabench.prompters.clickability.uniform" in graph
    assert component_violations(graph) == []


def test_the_component_check_finds_planted_violations():
    planted = {
        "intrabench.models.sam_family.x": (
            "def f():\n    from intrabench.config import y\n",
            False,
        ),
        "intrabench.datasets.y": ("from intrabench.engine.plan import make_plan\n", False),
        "intrabench.prompters.z": ("from intrabench.models.sam_family import x\n", False),
        "intrabench.prompters.ok": (
            "from intrabench.clicks.base import B\nfrom intrabench.masks import m\n",
            False,
        ),
        "intrabench.datasets.typed": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from intrabench.engine.plan import WorkUnit\n",
            False,
        ),
        "intrabench.config": ("", False),
        "intrabench.engine.plan": ("", False),
        "intrabench.clicks.base": ("", False),
        "intrabench.masks": ("", True),
    }
    assert component_violations(import_graph(planted)) == [
        "intrabench.datasets.y -> intrabench.engine.plan",
        "intrabench.models.sam_family.x -> intrabench.config",
        "intrabench.prompters.z -> intrabench.models.sam_family.x",
    ]


# --------------------------------------------------------------------------------------
# No loops between folders
# --------------------------------------------------------------------------------------


def folder_of(module: str) -> str:
    """The node ``module`` belongs to in the folder graph: a folder of the core
    (``intrabench.engine``) or a top-level module of it (``intrabench.types``: the core's
    root also holds the entry, which imports everything); a component package or one of its
    subfolders (``intrabench.models.sam_family``)."""
    parts = module.split(".")
    own = next((c for c in COMPONENTS if _within(module, c)), None)
    if own is None:
        return ".".join(parts[:2])
    depth = len(own.split("."))
    return ".".join(parts[: depth + 1]) if len(parts) > depth + 1 else own


def folder_loops(graph: dict[str, set[str]], packages: set[str]) -> list[list[str]]:
    """The folder groups that import each other round in a loop (each sorted), from the
    module ``graph`` (imports inside functions included). ``packages``: the modules that are
    a package's ``__init__`` (a subfolder's own ``__init__`` belongs to the subfolder)."""
    folders: dict[str, set[str]] = {}
    for module, imported in graph.items():
        source = folder_of(module + ".__init__" if module in packages else module)
        folders.setdefault(source, set())
        for name in imported:
            target = folder_of(name + ".__init__" if name in packages else name)
            folders.setdefault(target, set())
            if target != source:
                folders[source].add(target)
    return circles(folders)


def test_no_import_loops_between_folders():
    modules = installed_modules()
    packages = {name for name, (_, is_package) in modules.items() if is_package}
    graph = import_graph(modules)
    assert folder_of("intrabench.engine.runner") == "intrabench.engine"
    assert folder_of("intrabench.models.sam_family.sam") == "intrabench.models.sam_family"
    assert folder_loops(graph, packages) == []


def test_the_folder_loop_check_finds_planted_loops():
    planted = {
        # io <-> types, one side lazy
        "intrabench.types": ("from intrabench.io.volume import Volume\n", False),
        "intrabench.io.volume": ("def f():\n    from intrabench.types import Case\n", False),
        # engine -> attributes -> engine, through two different modules of each
        "intrabench.engine.reader": ("from intrabench.attributes.cache import c\n", False),
        "intrabench.attributes.cache": ("", False),
        "intrabench.attributes.join": ("from intrabench.engine.plan import p\n", False),
        "intrabench.engine.plan": ("", False),
        # subfolders of models in a loop
        "intrabench.models.runtime.a": ("from intrabench.models.sam_family.b import x\n", False),
        "intrabench.models.sam_family.b": ("from intrabench.models.runtime import a\n", False),
        # a loop hidden under TYPE_CHECKING is no loop
        "intrabench.evaluation.m": ("from intrabench.timing.t import x\n", False),
        "intrabench.timing.t": (
            "if TYPE_CHECKING:\n    from intrabench.evaluation import m\n",
            False,
        ),
    }
    assert folder_loops(import_graph(planted), set()) == [
        ["intrabench.attributes", "intrabench.engine"],
        ["intrabench.io", "intrabench.types"],
        ["intrabench.models.runtime", "intrabench.models.sam_family"],
    ]
