"""``intrabench session serve`` as a person starts it: the address printed, the page's API
answering, Ctrl+C ending it with the log kept, a restart resuming, mistakes in one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

from intrabench.cli import main
from intrabench.people.session_log import read_session

SERVE = [
    sys.executable, "-m", "intrabench", "session", "serve", "--model", "region-growing-3d",
    "--dataset", "demo-real", "--case", "lung1", "--target", "lesion_1", "--rater", "ann",
    "--port", "0",
]  # fmt: skip


def start(out) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        SERVE + ["--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default in the server, even when the tests run in the background (where a
        # command inherits SIGINT ignored, and keeps it so)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    line = process.stdout.readline()
    return process, line


def stop(process: subprocess.Popen) -> tuple[int, str]:
    """Ctrl+C: the command's exit status and its last line on stderr."""
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=60)
    return code, process.stderr.read().strip().splitlines()[-1]


def post(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    return json.loads(urllib.request.urlopen(request, timeout=60).read())


def test_serve_click_stop_and_resume(tmp_path):
    process, line = start(tmp_path)
    try:
        assert "session ann_lung1_lesion_1: open http://127.0.0.1:" in line
        url = line.split("open ")[1].split()[0]
        state = json.loads(urllib.request.urlopen(url + "api/state", timeout=60).read())
        assert state["shape"] == [13, 130, 140] and state["step"] == 0
        assert state["accepts"] == ["box3d", "point", "scribble"]
        z = state["start_slice"]
        done = post(
            url,
            "api/interaction",
            {"kind": "point", "geometry": {"zyx": [z, 65, 70], "positive": True}},
        )
        assert done["step"] == 1 and done["mask"]["bbox"] != [0] * 6
    finally:
        code, said = stop(process)
        assert code == 130 and said.startswith("interrupted: finished work is saved; re-run")
    log = tmp_path / "sessions" / "ann_lung1_lesion_1.jsonl"
    assert [e["event"] for e in read_session(log).events] == ["interaction"]
    process, line = start(tmp_path)
    try:
        assert "(resumed at step 1)" in line
    finally:
        stop(process)


def test_serve_mistakes_are_one_line(tmp_path, capsys):
    args = SERVE[3:-2] + ["--out", str(tmp_path)]
    assert main([a if a != "lung1" else "nope" for a in args]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "error: dataset demo-real has no case 'nope'; its cases: brain1, breast1, lung1"
    )
    assert main(args + ["--params", "[1]"]) == 2
    assert capsys.readouterr().err.strip() == "error: --params: give a JSON object"
    assert main(args + ["--session", "../escape"]) == 2
    assert "use letters, digits, '.', '_' and '-' only" in capsys.readouterr().err
