"""The public API's docstrings follow one convention (Google): every public function and method
that takes arguments documents them in an ``Args:`` section, and every one that returns a value
says what in a ``Returns:`` (or ``Yields:``) section.

Public: a function, method or class whose name and module name do not start with ``_``, in the
installed packages. Exempt: dunder methods, properties, ``@overload`` stubs, and methods that
implement a method of the same name on a base class in the same package family (the base
documents it; e.g. an adapter's ``predict``). ``ruff``'s pydocstyle rules (D417) check that an
``Args:`` section, once there, names every argument.

:data:`NOT_YET` lists the files still to be brought to the convention; it only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE_FOLDERS = ("intrabench", "models", "prompters", "datasets")

#: Files (relative to the repository root) whose public functions are not yet documented with
#: sections. Remove a file once it is done; the test fails if a listed file has become clean,
#: so the list stays honest.
NOT_YET: frozenset[str] = frozenset()


def _interface_methods() -> frozenset[str]:
    """The public method names of the interfaces (``intrabench/interfaces.py``), documented there."""
    tree = ast.parse((ROOT / "intrabench" / "interfaces.py").read_text(encoding="utf-8"))
    return frozenset(
        item.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_")
    )


#: Methods an implementation takes over from its interface (documented there).
INTERFACE_METHODS = _interface_methods()


def _is_public_module(path: Path) -> bool:
    relative = path.relative_to(ROOT)
    return not any(part.startswith("_") and part != "__init__.py" for part in relative.parts)


def _decorators(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _arguments(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    names = [argument.arg for argument in every]
    if arguments.vararg:
        names.append(arguments.vararg.arg)
    if arguments.kwarg:
        names.append(arguments.kwarg.arg)
    return [name for name in names if name not in ("self", "cls")]


def _returns_value(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    annotation = node.returns
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return text not in ("None", "NoReturn", "Never")


def _base_method_names(tree: ast.Module) -> dict[str, set[str]]:
    """For each class in the module: the method names defined by its bases in the module."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    own = {
        name: {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        for name, node in classes.items()
    }
    inherited: dict[str, set[str]] = {}
    for name, node in classes.items():
        names: set[str] = set()
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
            names |= own.get(base_name, set())
        inherited[name] = names
    return inherited


def missing_sections(path: Path) -> list[str]:
    """Every public function or method of ``path`` without the sections it needs.

    Args:
        path: A Python file of the installed packages.

    Returns:
        ``"name: Args"`` / ``"name: Returns"`` entries, in source order.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inherited = _base_method_names(tree)
    found = []

    def visit(body: list[ast.stmt], owner: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, node.name)
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            name = node.name
            if name.startswith("_") or _decorators(node) & {"property", "overload", "setter"}:
                continue
            implements = name in inherited.get(owner or "", set()) or (
                name in INTERFACE_METHODS and path.name != "interfaces.py"
            )
            if owner is not None and implements:
                continue
            docstring = ast.get_docstring(node) or ""
            label = f"{owner}.{name}" if owner else name
            if _arguments(node) and "Args:" not in docstring:
                found.append(f"{label}: Args")
            returns = "Returns:" in docstring or "Yields:" in docstring
            if _returns_value(node) and not returns:
                found.append(f"{label}: Returns")

    visit(tree.body, None)
    return found


def _public_files() -> list[Path]:
    files = []
    for folder in CODE_FOLDERS:
        files += [path for path in sorted((ROOT / folder).rglob("*.py")) if _is_public_module(path)]
    return files


def test_public_functions_document_their_arguments_and_results():
    problems = []
    for path in _public_files():
        relative = str(path.relative_to(ROOT))
        if relative in NOT_YET:
            continue
        problems += [f"{relative}: {entry}" for entry in missing_sections(path)]
    assert not problems, f"{len(problems)} without sections:\n" + "\n".join(problems[:60])


def test_the_list_of_files_not_yet_done_only_names_files_still_to_do():
    done = sorted(
        name for name in NOT_YET if not (ROOT / name).exists() or not missing_sections(ROOT / name)
    )
    assert not done, f"remove from NOT_YET (done or gone): {done}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(a):\n    '''Doc.'''\n", ["f: Args"]),
        ("def f(a) -> int:\n    '''Doc.\n\n    Args:\n        a: x.\n    '''\n", ["f: Returns"]),
        ("def f() -> None:\n    '''Doc.'''\n", []),
        ("def _f(a):\n    '''Doc.'''\n", []),
        (
            "class A:\n    def run(self, x):\n        '''Doc.'''\n"
            "class B(A):\n    def run(self, x):\n        '''Doc.'''\n",
            ["A.run: Args"],
        ),
        ("class A:\n    @property\n    def size(self) -> int:\n        '''Doc.'''\n", []),
    ],
)
def test_the_checker_finds_what_is_missing(tmp_path, source, expected):
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    assert missing_sections(path) == expected
