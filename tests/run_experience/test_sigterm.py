"""SIGTERM (what ``kill`` and SLURM send) ends a run like Ctrl-C: finished units saved, one
line saying how to resume, exit 143, no traceback from any process; the same command resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFIG = """
name: sigterm
seeds: [0, 1, 2, 3]
datasets: [{name: demo-phantoms, n_cases: 3}]
models: [random-walker-2d, region-growing-3d]
prompters: [box-3d, {name: center-points-per-volume, n_points: 1}]
refiners: [scribble]
refinement_steps: 3
"""


@pytest.mark.parametrize("whole_group", [False, True])
def test_sigterm_saves_finished_work_in_one_line_and_the_run_resumes(tmp_path, whole_group):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "intrabench", "run", str(config), "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((out / "units").glob("*.parquet")) and time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the run ended before a unit was saved: {process.stderr.read()}")
        time.sleep(0.05)
    if whole_group:  # SLURM's scancel: every process of the job
        os.killpg(process.pid, signal.SIGTERM)
    else:  # kill PID: the main process only
        process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "terminated (SIGTERM): finished work is saved; re-run the same command to resume" in err
    assert "Traceback" not in err and "BrokenPipeError" not in err
    saved = len(list((out / "units").glob("*.parquet")))
    assert saved >= 1
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    total = 4 * 3 * 2 * 2  # seeds x cases x models x prompters
    assert f"{total - saved} of {total} work units executed" in again.stdout + again.stderr
    assert Path(out / "results.csv").is_file()
