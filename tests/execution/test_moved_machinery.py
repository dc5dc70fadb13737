"""The progress line, its ETA and the dry run moved from the engine into execution: their old
paths give the very same module objects, with one DeprecationWarning line each."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from intrabench.old_paths import WARNED, new_path

ROOT = Path(__file__).resolve().parents[2]


def test_the_old_engine_paths_of_eta_progress_and_dry_run_are_the_execution_modules():
    code = """
        import intrabench.engine.eta as old_eta
        import intrabench.engine.progress as old_progress
        from intrabench.engine.dry_run import print_dry_run
        import intrabench.execution.dry_run as dry_run
        import intrabench.execution.eta as eta
        import intrabench.execution.progress as progress
        print(old_eta is eta, old_progress is progress, print_dry_run is dry_run.print_dry_run)
        print(progress.RunProgress.__module__, eta.__spec__.name)
    """
    env = {k: v for k, v in os.environ.items() if k != WARNED}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "True",
        "True",
        "intrabench.execution.progress",
        "intrabench.execution.eta",
    ]
    assert result.stderr.splitlines() == [
        f"intrabench:0: DeprecationWarning: intrabench.engine.{name} moved to "
        f"intrabench.execution.{name}; import intrabench.execution.{name} instead "
        "(the old path will be removed)"
        for name in ("eta", "progress", "dry_run")
    ]


def test_nothing_is_left_at_the_old_engine_paths():
    for name in ("eta", "progress", "dry_run"):
        assert new_path(f"intrabench.engine.{name}") == f"intrabench.execution.{name}"
        assert not (ROOT / "intrabench" / "engine" / f"{name}.py").exists()
