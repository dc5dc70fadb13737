"""A case whose reading kills the reader process (#72 item 1: a file that crashes SimpleITK,
SIGSEGV): that case fails in one line, the run goes on with a fresh reader, the finished
units are saved; before, the runner read the case again in its own process and died with it
(exit 139, nothing saved, every rerun the same)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

CRASHING_DATASET = textwrap.dedent('''
    """A phantom dataset whose case phantom_001 crashes the process that reads it."""
    import ctypes

    from intrabench.datasets.phantoms import Phantoms
    from intrabench.registry import datasets


    @datasets.register
    class CrashingReader(Phantoms):
        name = "test-crashes-its-reader"

        def load(self, case_id):
            if case_id == "phantom_001":
                ctypes.string_at(0)  # a real SIGSEGV, as SimpleITK's on a hostile header
            return super().load(case_id)
''')


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_case_that_kills_its_reader_fails_alone_and_the_run_goes_on(tmp_path):
    (tmp_path / "crashing_reader_dataset.py").write_text(CRASHING_DATASET)
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "reader-crash",
                "imports": ["crashing_reader_dataset"],
                "datasets": [
                    {"name": "test-crashes-its-reader", "n_cases": 3, "shape": [12, 32, 32]}
                ],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
                "refinement_steps": 0,
            }
        )
    )
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        "-m",
        "intrabench",
        "run",
        str(config),
        "--out",
        str(tmp_path / "run"),
    ]
    for attempt in ("first", "rerun"):  # the rerun meets the same case: the same line
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
        output = done.stdout + done.stderr
        assert done.returncode in (0, 1), (attempt, done.returncode, output[-3000:])
        lines = [
            line
            for line in output.splitlines()
            if "phantom_001" in line and "the process reading this case died" in line
        ]
        assert lines and all("killed by signal 11" in line for line in lines), output[-3000:]
        assert "Traceback" not in output
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert sorted(rows["case"].unique()) == ["phantom_000", "phantom_002"]
    assert len(list((tmp_path / "run" / "units").glob("*.parquet"))) == 2
