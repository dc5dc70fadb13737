"""The next case's set-up runs beside the current case's forward passes (engine/case_ahead)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

from intrabench import registry
from intrabench.config import parse_config
from intrabench.execution._case_ahead import CaseSetupAhead, sets_up_ahead
from intrabench.execution.runner import Runner
from intrabench.io.results import measured_columns
from intrabench.models.volumetric._3d_common import CaseStateAhead
from intrabench.testing.synthetic_network import SyntheticNetwork


class _SlowSetUp(CaseStateAhead, SyntheticNetwork):
    """A GPU-like stand-in whose case set-up takes 0.2 s; it notes in which thread each case
    was set up, and when its forward passes end."""

    name = "test-slow-set-up"
    events: list[tuple[str, str, float]] = []  # ("state" | "predicted", thread, time)
    fail_ahead = False
    #: forward passes wait (10 s at most) for a set-up ahead to begin: the case is read by a
    #: worker process whose start a loaded machine may delay past a case's forward passes
    wait_for_ahead = False
    ahead_began = threading.Event()

    def case_state(self, image):
        thread = threading.current_thread().name
        if self.fail_ahead and thread != "MainThread":
            raise RuntimeError("the set-up ahead failed")
        type(self).events.append(("state", thread, time.perf_counter()))
        if thread != "MainThread":
            type(self).ahead_began.set()
        time.sleep(0.2)
        return float(image.array.mean())

    def set_case(self, image):
        if image is not self._image:
            type(self).events.append(
                ("set_case", threading.current_thread().name, time.perf_counter())
            )
        self.mean = self.state_for(image)
        super().set_case(image)

    def predict(self, prompt, previous=None, update_slices=None):
        if self.wait_for_ahead:
            type(self).ahead_began.wait(10)
        prediction = super().predict(prompt, previous, update_slices)
        type(self).events.append(
            ("predicted", threading.current_thread().name, time.perf_counter())
        )
        return prediction


registry.models.register(_SlowSetUp)

CONFIG = {
    "name": "case-ahead",
    "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
    "models": [{"name": "test-slow-set-up", "label": "model", "forward_ms": 5}],
    "prompters": ["center-points-per-volume"],
    "refiners": ["center-error-click"],
    "refinement_steps": 1,
}


def _run(folder, **options) -> pd.DataFrame:
    """The rows of a run of CONFIG with the runner's ``options``."""
    _SlowSetUp.events = []
    _SlowSetUp.ahead_began.clear()
    Runner(parse_config(CONFIG), folder, user_workers=0, **options).run()
    frame = pd.read_parquet(folder / "results.parquet")
    return frame.drop(columns=measured_columns(frame)).reset_index(drop=True)


def _threads() -> list[str]:
    """The threads that set up each case, in order."""
    return [thread for kind, thread, _ in _SlowSetUp.events if kind == "state"]


def test_the_next_case_is_set_up_beside_the_current_cases_forward_passes(tmp_path, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(_SlowSetUp, "wait_for_ahead", True)
        rows = _run(tmp_path / "ahead")
    states = [event for event in _SlowSetUp.events if event[0] == "state"]
    # one set-up per case, none twice: the first in the loop, the second ahead
    assert [thread for _, thread, _ in states] == ["MainThread", "intrabench-case-setup_0"]
    # each set-up ahead began before a forward pass on the previous case ended: they overlap
    set_cases = [t for kind, _, t in _SlowSetUp.events if kind == "set_case"]
    assert len(set_cases) == 2
    for (_, _, started), next_set_case in zip(states[1:], set_cases[1:]):
        assert started < next_set_case
        assert any(
            kind == "predicted" and started < t < next_set_case for kind, _, t in _SlowSetUp.events
        )
    plain = _run(tmp_path / "plain", set_up_ahead=False)
    assert _threads() == ["MainThread"] * 2
    pd.testing.assert_frame_equal(rows, plain)


def test_a_set_up_that_fails_ahead_is_done_again_by_set_case(tmp_path, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(_SlowSetUp, "fail_ahead", True)
        rows = _run(tmp_path / "failing")
    assert _threads() == ["MainThread"] * 2
    pd.testing.assert_frame_equal(rows, _run(tmp_path / "plain", set_up_ahead=False))


def test_models_on_the_cpu_set_up_in_the_loop_unless_told(tmp_path, monkeypatch):
    """A CPU model would lose a core to the set-up: only where the model frees the CPU."""
    monkeypatch.setattr(_SlowSetUp, "forward_frees_cpu", classmethod(lambda cls, params: False))
    _run(tmp_path / "cpu")
    assert _threads() == ["MainThread"] * 2
    _run(tmp_path / "told", set_up_ahead=True)
    assert _threads() == ["MainThread", "intrabench-case-setup_0"]


def test_only_models_that_split_their_set_up_out_are_set_up_ahead():
    assert sets_up_ahead(_SlowSetUp())
    assert sets_up_ahead(registry.models.create("sam-med3d", {"weights": "random", "tiny": True}))
    assert not sets_up_ahead(registry.models.create("region-growing-3d"))


def test_a_set_up_in_flight_is_waited_for():
    ahead = CaseSetupAhead()

    class Model:
        prepared = None

        def prepare_case(self, image):
            time.sleep(0.1)
            self.prepared = image

    model = Model()
    ahead.start(model, lambda: "image")
    ahead.wait()
    assert model.prepared == "image" and (ahead.started, ahead.done) == (1, 1)
    ahead.close()


def _phantom(index: int):
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 2, "shape": [24, 64, 64]})
    return dataset.load(dataset.case_ids()[index])


@pytest.mark.parametrize("name", ["sam-med3d", "segvol"])
def test_a_3d_model_prepared_ahead_takes_the_same_state_without_computing_it_again(
    name, monkeypatch
):
    first, second = _phantom(0), _phantom(1)
    plain = registry.models.create(name, {"weights": "random", "tiny": True, "device": "cpu"})
    plain.set_case(second.image)
    model = registry.models.create(name, {"weights": "random", "tiny": True, "device": "cpu"})
    model.set_case(first.image)
    model.prepare_case(second.image)
    calls = []
    computed = type(model).case_state
    monkeypatch.setattr(
        type(model), "case_state", lambda self, image: calls.append(image) or computed(self, image)
    )
    model.set_case(second.image)
    assert calls == []  # the state prepared ahead was taken
    if name == "sam-med3d":
        assert np.array_equal(model._grid, plain._grid)
    else:
        assert model._crop == plain._crop and model._native_shape == plain._native_shape
        assert np.array_equal(model._volume, plain._volume)
    # a state prepared for another image is not taken
    model.prepare_case(first.image)
    other = _phantom(1).image  # equal to the second case's image, another object
    model.set_case(other)
    assert len(calls) == 2 and calls[0] is first.image and calls[1] is other


def test_a_model_built_ahead_sets_up_its_first_case_there(tmp_path):
    """The next model, built beside the current model's last group (model_ahead), sets up its
    first case in the same thread: no set-up is left between the two models' passes."""
    config = parse_config(
        {
            **CONFIG,
            "models": [
                {"name": "synthetic-network", "label": "first", "forward_ms": 5},
                CONFIG["models"][0],
            ],
        }
    )
    _SlowSetUp.events = []
    Runner(config, tmp_path / "run", user_workers=0, build_ahead=True).run()
    assert _threads() == ["intrabench-next-model_0", "intrabench-case-setup_0"]
    frame = pd.read_parquet(tmp_path / "run" / "results.parquet")
    plain = tmp_path / "plain"
    _SlowSetUp.events = []
    Runner(config, plain, user_workers=0, build_ahead=False, set_up_ahead=False).run()
    assert _threads() == ["MainThread"] * 2
    other = pd.read_parquet(plain / "results.parquet")
    pd.testing.assert_frame_equal(
        frame.drop(columns=measured_columns(frame)), other.drop(columns=measured_columns(other))
    )
