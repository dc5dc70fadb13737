"""The session log (intrabench.people.session_log): written as it goes, read back exactly,
hostile lines skipped and described."""

from __future__ import annotations

import json

import numpy as np
import pytest

from intrabench.errors import DataError
from intrabench.people.session_log import (
    SessionWriter,
    decode_mask,
    encode_mask,
    new_header,
    read_session,
)

SHAPE = (4, 10, 12)


def header(**changes):
    values = dict(
        session_id="s1",
        rater="ana",
        dataset="demo",
        case_id="case-1",
        target="lesion-1",
        shape=SHAPE,
        spacing=(2.0, 0.5, 0.5),
        model="region-growing-3d",
        params={"tolerance": 0.2},
    )
    values.update(changes)
    return new_header(**values)


def mask_with(*voxels):
    mask = np.zeros(SHAPE, dtype=bool)
    for z, y, x in voxels:
        mask[z, y, x] = True
    return mask


def written(path):
    writer = SessionWriter.create(path, header())
    writer.view(2, (40.0, 400.0), t=1.0)
    writer.interaction(
        "point",
        {"zyx": [2, 3, 4], "positive": True},
        mask_with((2, 3, 4), (2, 3, 5)),
        latency_s=0.25,
        shown_at=1.0,
        t=3.0,
    )
    writer.interaction(
        "box2d",
        {"slice": 1, "y0": 2, "x0": 3, "y1": 5, "x1": 7},
        mask_with((1, 2, 3)),
        latency_s=0.5,
        shown_at=1.0,
        t=5.0,
    )
    writer.undo(t=6.0)
    writer.interaction(
        "scribble",
        {"slice": 2, "points": [[1, 1], [1, 4]], "positive": False},
        mask_with((3, 9, 11)),
        latency_s=0.1,
        shown_at=1.0,
        t=9.0,
    )
    writer.accept(t=10.0)
    writer.close()
    return path


def test_mask_round_trip_exact():
    mask = mask_with((0, 0, 0), (3, 9, 11), (1, 5, 6))
    data = encode_mask(mask)
    assert data["bbox"] == [0, 0, 0, 4, 10, 12]
    assert np.array_equal(decode_mask(data, SHAPE), mask)
    small = encode_mask(mask_with((1, 5, 6), (1, 5, 8)))
    assert small["bbox"] == [1, 5, 6, 2, 6, 9]
    assert encode_mask(np.zeros(SHAPE, bool)) == {
        "shape": [4, 10, 12],
        "bbox": [0] * 6,
        "packbits": "",
    }


def test_written_session_reads_back(tmp_path):
    session = read_session(written(tmp_path / "s1.jsonl"))
    assert session.problems == [] and session.cut_lines == 0
    assert session.header["target"] == "lesion-1" and session.header["protocol"] == {
        "shows_dice": False
    }
    assert [e["event"] for e in session.events] == [
        "view",
        "interaction",
        "interaction",
        "undo",
        "interaction",
        "accept",
    ]
    assert [e["step"] for e in session.events] == [0, 1, 2, 1, 2, 2]
    assert [e["kind"] for e in session.effective_interactions()] == ["point", "scribble"]
    assert session.accepted
    masks = session.masks()
    assert [int(m.sum()) for m in masks] == [2, 1] and masks[1][3, 9, 11]
    assert session.final_mask()[3, 9, 11]
    point, scribble = session.prompts()
    assert point.points.tolist() == [[2, 3, 4]] and point.point_labels.tolist() == [1]
    assert point.effort == 1
    assert scribble.scribbles[0].points.tolist() == [[2, 1, 1], [2, 1, 2], [2, 1, 3], [2, 1, 4]]
    assert scribble.scribbles[0].label == 0 and scribble.effort == 3
    # 3.0 - 0; 5.0 - (3.0 + 0.25); 9.0 - 6.0 (the undo)
    assert session.seconds_per_interaction() == [("point", 3.0), ("box2d", 1.75), ("scribble", 3.0)]


def test_each_event_is_on_disk_before_the_next(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = SessionWriter.create(path, header())
    writer.view(0, (0, 100))
    assert len(path.read_text().splitlines()) == 2  # read by another handle: flushed
    with pytest.raises(DataError, match="never overwritten"):
        SessionWriter.create(path, header())


def test_cut_last_line_is_counted_and_resume_continues(tmp_path):
    path = written(tmp_path / "s.jsonl")
    text = path.read_text()
    path.write_text(text + '{"event": "interaction", "t": 11.0, "ki')
    session = read_session(path)
    assert session.cut_lines == 1 and session.problems == [] and len(session.events) == 6
    writer = SessionWriter.resume(path)
    assert writer.step == 2 and writer.now() >= 10.0
    writer.undo()
    writer.close()
    again = read_session(path)
    assert again.cut_lines == 0 and [e["event"] for e in again.events][-1] == "undo"
    assert [e["kind"] for e in again.effective_interactions()] == ["point"]


def line_problem(tmp_path, line):
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(header()) + "\n" + line + "\n")
    session = read_session(path)
    assert session.events == []
    (problem,) = session.problems
    return problem


def good_point(**changes):
    event = {
        "event": "interaction",
        "t": 1.0,
        "step": 1,
        "kind": "point",
        "geometry": {"zyx": [1, 2, 3], "positive": True},
        "shown_at": 0.5,
        "latency_s": 0.2,
        "mask": encode_mask(mask_with((1, 2, 3))),
    }
    event.update(changes)
    return json.dumps(event)


def test_hostile_lines_are_skipped_one_line_each(tmp_path):
    assert line_problem(tmp_path, "garbage{") == "line 2: not a JSON line"
    assert "NaN is not a number" in line_problem(tmp_path, good_point().replace("0.2", "NaN"))
    off = line_problem(tmp_path, good_point(geometry={"zyx": [4, 2, 3], "positive": True}))
    assert off == "line 2: the point's point 0 at (4, 2, 3) is off the grid [4, 10, 12]"
    negative = line_problem(tmp_path, good_point(geometry={"zyx": [-1, 2, 3], "positive": True}))
    assert "off the grid" in negative
    stroke = {"slice": 1, "points": [[0, 0], [10, 3]], "positive": True}
    assert "vertex (10, 3) is off the grid" in line_problem(
        tmp_path, good_point(kind="lasso", geometry=stroke)
    )
    mask = encode_mask(np.ones((4, 10, 11), bool))
    assert "is not the session's [4, 10, 12]" in line_problem(tmp_path, good_point(mask=mask))
    cut_bits = dict(encode_mask(mask_with((1, 2, 3), (2, 5, 5))), packbits="AA==")
    assert "holds 1 bytes; its bbox needs 3" in line_problem(tmp_path, good_point(mask=cut_bits))
    assert "view of slice 9" in line_problem(
        tmp_path, json.dumps({"event": "view", "t": 1, "step": 0, "slice": 9, "window": [0, 1]})
    )


def test_files_that_are_not_sessions_raise_one_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\x00\xff garbage\n")
    with pytest.raises(DataError, match="line 1 is not a session header"):
        read_session(path)
    path.write_text(json.dumps(dict(header(), version=7)) + "\n")
    with pytest.raises(DataError, match="version 7; this IntraBench reads version 1"):
        read_session(path)
    path.write_text(json.dumps(header()) + "\n" + " " * 2000 + "\n")
    with pytest.raises(DataError, match="more than a session log's 1000"):
        read_session(path, max_bytes=1000)
