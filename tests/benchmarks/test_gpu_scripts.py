"""The card session's scripts, checked without a card: a lent GPU gives minutes, rarely, and a
part that is missing, a benchmark that is not rehearsed or a flag a benchmark does not take
costs them. benchmarks/gpu_session.sh's parts are read from its text; benchmarks/
gpu_rehearse.sh's plan from its ``--list`` (which builds and runs nothing)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def joined_lines(path: Path) -> list[str]:
    """The script's lines with backslash continuations joined."""
    return path.read_text().replace("\\\n", " ").splitlines()


def session_parts() -> dict[str, list[str]]:
    """gpu_session.sh's ``part NAME LIMIT COMMAND...`` lines: name -> command words."""
    parts = {}
    for line in joined_lines(BENCHMARKS / "gpu_session.sh"):
        words = shlex.split(line.strip(), comments=True)
        if len(words) > 3 and words[0] == "part" and words[2].isdigit():
            parts[words[1]] = words[3:]
    return parts


def session_choices() -> set[str]:
    """The part names gpu_session.sh's ``case`` takes."""
    text = (BENCHMARKS / "gpu_session.sh").read_text()
    block = text[text.index("case $wanted in") : text.index("esac")]
    return {
        name
        for pattern in re.findall(r"^\s+([a-z0-9|-]+)\)", block, flags=re.MULTILINE)
        for name in pattern.split("|")
    }


def rehearsal_plan(*parts: str) -> dict[str, list[str]]:
    """``gpu_rehearse.sh --list [PARTS]``: part name -> command words."""
    listed = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_rehearse.sh"), "--list", *parts],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    plan = {}
    for line in listed.stdout.splitlines():
        name, command = line.split(": ", 1)
        plan[name] = command.split()
    return plan


def script_of(command: list[str]) -> str | None:
    """The benchmarks/*.py a command runs, if any."""
    return next((word for word in command if word.startswith("benchmarks/")), None)


def test_the_session_has_the_mobilesam_and_served_parts_with_their_benchmarks():
    choices = session_choices()
    assert {"runs", "naive", "lite", "mobilesam", "served"} <= choices
    parts = session_parts()
    assert script_of(parts["mobilesam-clicks"]) == "benchmarks/bench_mobilesam_clicks.py"
    assert script_of(parts["served"]) == "benchmarks/bench_served_model.py"
    assert "--device" in parts["served"] and "cuda" in parts["served"]


def test_every_benchmark_of_the_session_exists_and_is_rehearsed():
    session = {script_of(command) for command in session_parts().values()}
    rehearsed = {script_of(command) for command in rehearsal_plan().values()}
    assert None not in session
    for script in session:
        assert (ROOT / script).is_file(), script
    assert session <= rehearsed, session - rehearsed


def test_the_rehearsal_plan_includes_mobilesam_and_can_be_narrowed():
    plan = rehearsal_plan()
    assert list(plan)[-3:] == ["mobilesam-weights", "mobilesam-clicks", "served"]
    assert "--tiny" in plan["mobilesam-clicks"] and "--tiny" in plan["served"]
    assert list(rehearsal_plan("served", "naive")) == ["naive", "served"]


def test_an_unknown_rehearsal_part_is_one_line():
    done = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_rehearse.sh"), "--list", "mobilesamm"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unknown part 'mobilesamm'" in done.stderr


def test_the_prepared_folders_carry_mobilesam_s_code_at_the_project_s_pin():
    listed = subprocess.run(
        [
            "bash",
            "-c",
            "GPU_PREPARE_LISTS_ONLY=1 . benchmarks/gpu_prepare.sh; echo $MOBILESAM_WHEELS",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    carried = listed.stdout.split()
    pyproject = (ROOT / "pyproject.toml").read_text()
    pinned = re.search(r'"(mobilesam-mirror==[^"]+)"', pyproject).group(1)
    assert carried == [pinned]


@pytest.mark.slow
def test_every_flag_the_card_session_passes_is_one_its_benchmark_takes():
    commands = list(session_parts().values()) + list(rehearsal_plan().values())
    helps: dict[str, str] = {}
    for command in commands:
        script = script_of(command)
        if script is None or not script.endswith(".py"):
            continue
        if script not in helps:
            helps[script] = subprocess.run(
                [sys.executable, str(ROOT / script), "--help"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        for flag in (word for word in command if re.fullmatch(r"--[a-z][a-z0-9-]*", word)):
            assert flag in helps[script], f"{script} does not take {flag}"
