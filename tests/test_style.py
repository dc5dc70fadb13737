"""The code style is enforced: ``ruff check`` and ``ruff format --check`` are clean over the
whole repository, so a change that is not formatted fails the test suite (and CI)."""

from __future__ import annotations

import shutil
import subprocess
import sys
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
