"""A live session with a model served in another process (``--runs-in``), as a run's
``runs_in:`` serves it: the same masks as the model in this process."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from intrabench.errors import ConfigError
from intrabench.people.sessions.live import LiveSession, session_header
from intrabench.people.sessions.setup import build_model, load_target


def one_click(folder, model, name):
    case, target = load_target("demo-real", {}, "lung1", "lesion_1")
    header = session_header("s", "bot", "demo-real", case, target, name, {}, {})
    session = LiveSession.open(folder, case, target, model, session_id="s", header=header)
    z, y, x = [(s.start + s.stop - 1) // 2 for s in case.target_box(target)]
    session.interact("point", {"zyx": [z, y, x], "positive": True}, shown_ago=0.2)
    session.writer.close()
    return session.mask


def test_served_model_gives_the_same_mask(tmp_path):
    here = one_click(tmp_path / "here", build_model("region-growing-3d", {}), "region-growing-3d")
    served = build_model("region-growing-3d", {}, {"python": sys.executable})
    assert type(served).__name__ == "Served[region-growing-3d]"
    there = one_click(tmp_path / "there", served, "region-growing-3d")
    assert here.sum() > 100 and np.array_equal(here, there)


def test_runs_in_mistake_is_one_line():
    with pytest.raises(ConfigError, match="--runs-in: pyhton: Extra inputs are not permitted"):
        build_model("region-growing-3d", {}, {"pyhton": "/usr/bin/python3"})
