"""The model loop's clock: each second counted once, in the innermost phase open."""

from __future__ import annotations

import pytest

from intrabench.execution.loop_clock import PHASES, LoopClock


class _Ticks:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nested_phases_count_each_second_once():
    ticks = _Ticks()
    clock = LoopClock(ticks)
    clock.start()
    ticks.now += 1.0  # untracked
    with clock.phase("waiting for simulated users"):
        ticks.now += 2.0
        with clock.phase("forward passes"):
            ticks.now += 5.0
        ticks.now += 0.5
    with clock.phase("forward passes"):
        ticks.now += 3.0
    ticks.now += 0.25  # untracked
    clock.stop()
    ticks.now += 50.0  # after stop: not the loop's
    assert clock.seconds == {"waiting for simulated users": 2.5, "forward passes": 8.0}
    assert clock.entries == {"waiting for simulated users": 1, "forward passes": 2}
    assert clock.wall == pytest.approx(11.75)
    assert clock.untracked == pytest.approx(1.25)
    summary = clock.summary()
    # the engine's order of phases, then the rest of the wall time
    assert list(summary) == ["forward passes", "waiting for simulated users", "untracked"]
    assert summary["forward passes"] == {"seconds": 8.0, "entries": 2}
    assert summary["untracked"] == {"seconds": 1.25, "entries": 0}


def test_a_phase_left_by_an_exception_is_still_counted():
    ticks = _Ticks()
    clock = LoopClock(ticks)
    with pytest.raises(RuntimeError), clock.phase("model set_case"):
        ticks.now += 4.0
        raise RuntimeError("the model cannot take this case")
    with clock.phase("forward passes"):
        ticks.now += 1.0
    assert clock.seconds == {"model set_case": 4.0, "forward passes": 1.0}
    assert clock.wall == pytest.approx(5.0)  # the first phase started the clock


def test_phases_the_engine_does_not_name_follow_its_own_in_name_order():
    ticks = _Ticks()
    clock = LoopClock(ticks)
    for name in ("zeta plugin work", "alpha plugin work", "model set_case"):
        with clock.phase(name):
            ticks.now += 1.0
    assert list(clock.summary()) == [
        "model set_case",
        "alpha plugin work",
        "zeta plugin work",
        "untracked",
    ]
    lines = clock.lines()
    assert lines[0] == "model loop: 3.00 s"
    assert lines[1].split()[:4] == ["model", "set_case", "1.00", "s"]
    assert "33.3%" in lines[1] and lines[1].rstrip().endswith("1 x")


def test_an_unstarted_clock_reads_zero():
    clock = LoopClock(_Ticks())
    assert clock.wall == 0.0 and clock.untracked == 0.0
    assert clock.summary() == {"untracked": {"seconds": 0.0, "entries": 0}}
    assert "forward passes" in PHASES
