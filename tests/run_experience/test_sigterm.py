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
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
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
    assert (out / ".lock").read_text() == ""  # it closed: the next run has nothing to say
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "ended without closing" not in again.stderr
    total = 4 * 3 * 2 * 2  # seeds x cases x models x prompters
    assert f"{total - saved} of {total} work units executed" in again.stdout + again.stderr
    assert Path(out / "results.csv").is_file()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


DRIVER = """
import sys, time
from intrabench.execution.subprocess_worker import SubprocessExecutor
executor = SubprocessExecutor()
executor.submit(time.sleep, 60)  # a long job: the worker is busy, not reading its pipe
print(executor._process.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_workers_exit_within_two_seconds_of_their_parents_death(tmp_path):
    """kill -9 of the process that started a worker busy with a long job: nobody closes the
    pipe the worker would read; it notices the lost parent itself, within 2 s."""
    parent = subprocess.Popen(
        [sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    worker = int(parent.stdout.readline())
    time.sleep(1.0)  # the job runs
    assert _running(worker)
    parent.kill()
    parent.wait()
    killed = time.monotonic()
    while _running(worker) and time.monotonic() - killed < 10:
        time.sleep(0.05)
    assert not _running(worker)
    assert time.monotonic() - killed < 2.0
