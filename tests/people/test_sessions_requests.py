"""The session server's answers to mistaken and hostile requests: one line each (HTTP 400),
nothing logged, the session going on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from intrabench.people.session_log import read_session
from intrabench.people.sessions.live import LiveSession, session_header
from intrabench.people.sessions.server import SessionServer
from intrabench.people.sessions.setup import build_model, load_target


@pytest.fixture()
def server(tmp_path):
    case, target = load_target("demo-real", {}, "lung1", "lesion_1")
    model = build_model("region-growing-3d", {})
    header = session_header("r", "bot", "demo-real", case, target, "region-growing-3d", {}, {})
    session = LiveSession.open(tmp_path, case, target, model, session_id="r", header=header)
    served = SessionServer(session)
    served.start()
    yield served
    served.shutdown()
    served.server_close()


def send(server, path: str, data: bytes | None, length: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(server.url + path, data, {"Content-Type": "application/json"})
    if length is not None:
        request.add_header("Content-Length", length)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def point(zyx, positive=True) -> bytes:
    return json.dumps({"kind": "point", "geometry": {"zyx": zyx, "positive": positive}}).encode()


def test_hostile_requests_one_line_nothing_logged(server):
    errors = {
        b"not json": "the request is not JSON",
        b"[1, 2]": "the request is not a JSON object",
        b'{"kind": "point", "geometry": {"zyx": [6, NaN, 3], "positive": true}}': (
            "NaN is not a number the page sends"
        ),
        point([6, 65, 999]): "the point's point 0 at (6, 65, 999) is off the grid [13, 130, 140]",
        point([6, 65.5, 70]): "the point's coordinates are not voxel indices (whole numbers)",
        point([6, 65, 70], positive=1): "the point's positive is not true or false",
        json.dumps(
            {"kind": "box2d", "geometry": {"slice": 6, "y0": 1, "x0": 1, "y1": 5, "x1": 5}}
        ).encode(): "region-growing-3d does not take a box2d; it takes box3d, point, scribble",
        json.dumps(
            {"kind": "blob", "geometry": {}}
        ).encode(): "interaction kind 'blob', not one of",
    }
    for body, message in errors.items():
        status, answer = send(server, "api/interaction", body)
        assert status == 400 and answer["error"].startswith(message), body
    status, answer = send(server, "api/view", b'{"slice": 13, "window": [0, 100]}')
    assert (status, answer["error"]) == (400, "slice 13 is off the grid (0 to 12)")
    status, answer = send(server, "api/view", b'{"slice": 3, "window": [0, -1]}')
    assert answer["error"] == "window is not [level, width] with a positive width"
    status, answer = send(server, "api/undo", b"{}")
    assert (status, answer["error"]) == (400, "nothing to undo")
    status, answer = send(server, "api/interaction", b"{}", length=str(2 * 1024 * 1024))
    assert answer["error"] == "a request of more than 1048576 bytes is refused"
    assert read_session(server.session.writer.path).events == []
    status, answer = send(server, "api/interaction", point([6, 65, 70]))
    assert status == 200 and answer["step"] == 1
    assert send(server, "api/accept", b"{}")[1] == {"step": 1, "accepted": True}
    status, answer = send(server, "api/interaction", point([6, 66, 70]))
    assert answer["error"].startswith("this session's mask is accepted")
    events = [e["event"] for e in read_session(server.session.writer.path).events]
    assert events == ["interaction", "accept"]
