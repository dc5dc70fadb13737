"""``intrabench session import``: live sessions (region growing on a real case) read back with
the Dice after each step; hostile session files refused or skipped, one line each, counted."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.evaluation.metrics import dice
from intrabench.people.session_log import read_session
from intrabench.people.sessions.importing import import_sessions
from intrabench.people.sessions.live import LiveSession, session_header
from intrabench.people.sessions.setup import build_model, load_target


@pytest.fixture(scope="module")
def case_target():
    return load_target("demo-real", {}, "lung1", "lesion_1")


def live(folder, case_target, session_id="s1"):
    """A session by a scripted person through LiveSession, as the page drives it: a centre
    click, a negative click in a corner, an undo, a second click, accept."""
    case, target = case_target
    model = build_model("region-growing-3d", {})
    header = session_header(
        session_id, "bot", "demo-real", case, target, "region-growing-3d", {}, {}
    )
    session = LiveSession.open(folder, case, target, model, session_id=session_id, header=header)
    z, y, x = [(s.start + s.stop - 1) // 2 for s in case.target_box(target)]
    session.view(z, (40.0, 400.0))
    session.interact("point", {"zyx": [z, y, x], "positive": True}, shown_ago=0.5)
    session.interact("point", {"zyx": [z, 1, 1], "positive": False}, shown_ago=0.5)
    session.undo()
    session.interact("point", {"zyx": [z, y + 1, x], "positive": True}, shown_ago=0.5)
    session.accept()
    session.writer.close()
    return session


def test_import_computes_dice_after_each_step(tmp_path, case_target, capsys):
    session = live(tmp_path / "study", case_target)
    case, target = case_target
    reference = case.label == target.label_value
    expected = [round(dice(step.prediction.mask, reference), 6) for step in session.steps]
    assert 0.3 < expected[0] <= 1.0
    assert main(["session", "import", str(tmp_path / "study"), "--to", str(tmp_path / "out")]) == 0
    table = pd.read_csv(tmp_path / "out" / "session-steps.csv")
    assert table["step"].tolist() == [1, 2] and table["kind"].tolist() == ["point", "point"]
    assert table["dice"].tolist() == pytest.approx(expected, abs=1e-6)
    assert table["accepted"].tolist() == [True, True]
    assert set(table["target"]) == {"lesion_1"} and set(table["case_id"]) == {"lung1"}
    out = capsys.readouterr().out
    assert "imported 1 session (2 steps); refused 0 files, skipped 0 lines" in out


def test_resumed_session_keeps_its_steps(tmp_path, case_target):
    first = live(tmp_path, case_target)
    case, target = case_target
    header = session_header("s1", "bot", "demo-real", case, target, "region-growing-3d", {}, {})
    again = LiveSession.open(
        tmp_path, case, target, build_model("region-growing-3d", {}), session_id="s1", header=header
    )
    assert len(again.steps) == 2 and again.accepted
    assert np.array_equal(again.mask, first.mask)
    other = dict(header, target="lesion_2")
    with pytest.raises(Exception, match="a session of target 'lesion_1', not 'lesion_2'"):
        LiveSession.open(tmp_path, case, target, again.model, session_id="s1", header=other)


def test_hostile_files_one_line_each_counted(tmp_path, case_target, capsys):
    good = live(tmp_path / "good", case_target).writer.path
    lines = good.read_text().splitlines()
    header = json.loads(lines[0])
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "garbage.jsonl").write_bytes(b"\x89PNG garbage\n")
    (hostile / "other-case.jsonl").write_text(
        json.dumps(dict(header, session_id="o", case_id="nope")) + "\n" + "\n".join(lines[1:])
    )
    (hostile / "other-target.jsonl").write_text(
        json.dumps(dict(header, session_id="t", target="lesion_9")) + "\n"
    )
    (hostile / "grid.jsonl").write_text(
        json.dumps(dict(header, session_id="g", shape=[13, 130, 141])) + "\n"
    )
    nan = lines[2].replace('"latency_s":', '"latency_s":NaN,"x":')
    off = re.sub(r'"zyx":\[\d+,', '"zyx":[99,', lines[2])
    (hostile / "damaged.jsonl").write_text(
        "\n".join([json.dumps(dict(header, session_id="d")), lines[1], nan, off, "{oops", lines[2]])
        + "\n"
        + lines[3][:40]  # cut mid-write
    )
    code = main(["session", "import", str(hostile), str(good), "--to", str(tmp_path / "out")])
    assert code == 0
    captured = capsys.readouterr()
    refused = [line for line in captured.err.splitlines() if line.startswith("refused: ")]
    assert len(refused) == 4
    assert any("line 1 is not a session header" in line for line in refused)
    assert any("has no case 'nope'; its cases: brain1, breast1, lung1" in line for line in refused)
    assert any("has no target 'lesion_9'; its targets: lesion_1" in line for line in refused)
    assert any("grid [13, 130, 141] is not case lung1's [13, 130, 140]" in line for line in refused)
    skipped = [line for line in captured.err.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 3
    assert "line 3: NaN is not a number a session log holds" in skipped[0]
    assert "line 4: the point's point 0 at (99, " in skipped[1]
    assert "is off the grid [13, 130, 140]" in skipped[1]
    assert "line 5: not a JSON line" in skipped[2]
    assert "imported 2 sessions (3 steps); refused 4 files, skipped 3 lines, 1 cut last line" in (
        captured.out
    )
    table = pd.read_csv(tmp_path / "out" / "session-steps.csv")
    assert sorted(table["session_id"].unique()) == ["d", "s1"]
    # nothing a person did is attributed to another session: d's one step is its own line
    assert table[table["session_id"] == "d"]["step"].tolist() == [1]


def test_huge_file_and_nothing_importable(tmp_path, case_target, capsys):
    path = live(tmp_path, case_target).writer.path
    result = import_sessions([path], max_bytes=1000)
    (line,) = result.refused
    assert "more than a session log's 1000; not read" in line and result.sessions == 0
    (tmp_path / "bad.jsonl").write_text("nothing\n")
    code = main(["session", "import", str(tmp_path / "bad.jsonl"), "--to", str(tmp_path / "o")])
    assert code == 2
    assert "error: no session imported (1 file refused, listed above)" in capsys.readouterr().err


def test_dice_shown_only_when_the_protocol_asks(tmp_path, case_target):
    case, target = case_target
    reference = case.label == target.label_value
    z, y, x = [(s.start + s.stop - 1) // 2 for s in case.target_box(target)]
    answers = {}
    for shows in (False, True):
        header = session_header(
            f"d{int(shows)}", "bot", "demo-real", case, target, "region-growing-3d", {}, {},
            shows_dice=shows,
        )  # fmt: skip
        session = LiveSession.open(
            tmp_path, case, target, build_model("region-growing-3d", {}),
            session_id=f"d{int(shows)}", header=header,
        )  # fmt: skip
        answers[shows] = session.interact("point", {"zyx": [z, y, x], "positive": True}, None)
        answers[shows, "state"] = session.state()
        session.writer.close()
    assert "dice" not in answers[False] and "dice" not in answers[False, "state"]
    expected = round(dice(session.mask, reference), 4)
    assert answers[True]["dice"] == expected == answers[True, "state"]["dice"] > 0.3
    assert read_session(tmp_path / "sessions" / "d1.jsonl").header["protocol"] == {
        "shows_dice": True
    }
