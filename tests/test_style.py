"""The code style is enforced: ``ruff check`` and ``ruff format --check`` are clean over the
whole repository, so a change that is not formatted fails the test suite (and CI)."""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: `pip install -e .[dev]` installs it")
    return [found]


@pytest.mark.parametrize("arguments", [["check", "--quiet"], ["format", "--check", "--quiet"]])
def test_the_repository_is_ruff_clean(arguments):
    done = subprocess.run(
        [*_ruff(), *arguments, "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


#: The installed packages, whose comments and docstrings must not carry the project's history.
CODE_FOLDERS = ("intrabench", "models", "prompters", "datasets")

#: The project's own issue references: ``#13`` (not ``owner/repo#5`` or ``CVPR25#5``, which
#: cite another project's thread), ``issue 70``, ``issues 13 and 48``, ``item 4``.
ISSUE_REFERENCE = re.compile(r"(?<![\w/.-])#\d+\b|\bissues? #?\d+|\bitems? \d+\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> list[ast.Constant]:
    """The docstring nodes of a module and of every class and function in it."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, owners) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.append(value)
    return found


def _comments(source: str) -> list[tuple[int, str]]:
    """The ``(line, text)`` of every comment in ``source``."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]


def issue_references(
    path: Path, root: Path = ROOT, pattern: re.Pattern = ISSUE_REFERENCE
) -> list[str]:
    """Every match of ``pattern`` (issue references) in the comments and docstrings of one
    Python file, as ``path:line: text`` with the path relative to ``root`` (a docstring's line
    is its first)."""
    source = path.read_text(encoding="utf-8")
    texts = _comments(source)
    texts += [(node.lineno, node.value) for node in _docstrings(ast.parse(source))]
    relative = path.relative_to(root)
    return [
        f"{relative}:{line}: {match.group(0)}"
        for line, text in texts
        for match in pattern.finditer(text)
    ]


#: Words of a drawing tool and a design note the repository does not ship, in code.
NOT_IN_CODE = re.compile(r"\b(?:a|one) low room\b|\bDESIGN\.md section\b", re.IGNORECASE)


def test_issue_references_are_found_in_comments_and_docstrings(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        '"""Fast reads (issue 13, item 2)."""\n'
        "COLOR = '#222'  # see JunMa11/CVPR-MedSegFMCompetition#5\n"
        "def f():\n"
        '    """Cached (#48)."""\n'
        "    return '#13'  # faster since #13\n",
        encoding="utf-8",
    )
    assert issue_references(module, tmp_path) == [
        "module.py:5: #13",
        "module.py:1: issue 13",
        "module.py:1: item 2",
        "module.py:4: #48",
    ]


def test_code_comments_and_docstrings_name_no_issue():
    """History belongs to the git log: no comment or docstring of the installed packages names
    one of the project's issues or their items."""
    found = [
        reference
        for folder in CODE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for reference in issue_references(path)
    ]
    assert found == [], f"{len(found)} issue references in code:\n" + "\n".join(found)


def test_code_comments_and_docstrings_use_no_drawing_words_and_cite_no_missing_note(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        '"""Paths of a run. A low room: no feature imports it (DESIGN.md section 3)."""\n',
        encoding="utf-8",
    )
    assert issue_references(module, tmp_path, NOT_IN_CODE) == [
        "module.py:1: A low room",
        "module.py:1: DESIGN.md section",
    ]
    found = [
        reference
        for folder in CODE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for reference in issue_references(path, ROOT, NOT_IN_CODE)
    ]
    assert found == [], "\n".join(found)


def test_ruff_refuses_an_undocumented_public_function_and_a_stale_argument(tmp_path):
    """The docstring rules are on (pydocstyle, Google convention): a public function without a
    docstring (D103) and an ``Args:`` section that misses an argument (D417) fail
    ``ruff check`` with the repository's configuration."""
    module = tmp_path / "module.py"
    module.write_text(
        '"""A module."""\n\n\n'
        "def undocumented(x):\n"
        "    return x\n\n\n"
        "def documented(volume, spacing):\n"
        '    """Scale a volume.\n\n'
        "    Args:\n"
        "        volume: Float32 (z, y, x).\n"
        '    """\n'
        "    return volume * spacing[0]\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            *_ruff(),
            "check",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--output-format",
            "concise",
            str(module),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    codes = sorted(line.split(" ")[1] for line in done.stdout.splitlines() if ": D" in line)
    assert done.returncode == 1
    assert codes == ["D103", "D417"], done.stdout
