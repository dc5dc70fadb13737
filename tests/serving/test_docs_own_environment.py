"""docs/adding-a-model.md, "Your model in its own environment": every code block of the section
is executed as written, with the example environment's paths replaced by this machine's (the
test's Python for /opt/model-env, a free port for 8765, the tests' predict.sh)."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from intrabench.cli import main
from intrabench.io.results import load_results

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-a-model.md"
BLOCK = re.compile(r"<!-- docs-test: (?P<action>[^>]+?) -->\n```\w+\n(?P<body>.*?)```", re.S)


def section_blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    start = text.index("## Your model in its own environment")
    end = text.index("\n## ", start + 1)
    return [(m["action"], m["body"]) for m in BLOCK.finditer(text[start:end])]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_sections_code_blocks_run_as_written(tmp_path, monkeypatch):
    blocks = section_blocks()
    assert [action for action, _ in blocks] == [
        "write served.yaml",
        "run",
        "serve",
        "write remote.yaml",
        "run",
        "write challenge.yaml",
    ]
    port = str(free_port())
    bin_dir = str(Path(sys.executable).parent)

    def here(text: str) -> str:
        return (
            text.replace("/opt/model-env/bin/python", sys.executable)
            .replace("/opt/model-env/bin/intrabench", f"{bin_dir}/intrabench")
            .replace("8765", port)
        )

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PYTHON", sys.executable)
    monkeypatch.setenv("WRAPPED_MODEL", "region-growing-3d")
    shutil.copy(ROOT / "tests" / "serving" / "predict.sh", tmp_path / "predict.sh")
    shutil.copy(ROOT / "tests" / "serving" / "cvpr25_predict.py", tmp_path / "cvpr25_predict.py")
    server = None
    try:
        for action, body in blocks:
            body = here(body)
            if action.startswith("write "):
                (tmp_path / action.split()[1]).write_text(body)
            elif action == "serve":
                words = shlex.split(body.strip())
                assert words[0] == "intrabench"
                server = subprocess.Popen(
                    [f"{bin_dir}/intrabench", *words[1:]], stderr=subprocess.PIPE, text=True
                )
                assert "serving model 'region-growing-3d'" in server.stderr.readline()
            else:
                words = shlex.split(body.strip())
                assert words[0] == "intrabench"
                assert main(words[1:]) == 0, body
        assert main(["run", "challenge.yaml", "--out", "runs/challenge"]) == 0
    finally:
        if server is not None:
            server.kill()
            server.wait()
    served = load_results(tmp_path / "runs" / "served")
    assert set(served["model"]) == {"region-growing-3d", "random-walker-2d"}
    assert len(load_results(tmp_path / "runs" / "remote")) > 0
    challenge = load_results(tmp_path / "runs" / "challenge")
    assert challenge["dice"].mean() > 0.3 and set(challenge["prompter"]) == {"cvpr25-box"}
