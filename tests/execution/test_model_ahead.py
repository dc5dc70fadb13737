"""The next model is built beside the current model's last group, where there is room."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from intrabench import registry
from intrabench.config import parse_config
from intrabench.engine import model_ahead
from intrabench.errors import UserError
from intrabench.execution.runner import Runner
from intrabench.io.results import measured_columns
from intrabench.testing.synthetic_network import SyntheticNetwork


class _SlowToBuild(SyntheticNetwork):
    """A GPU-like stand-in whose ``prepare`` takes 0.3 s; it notes in which thread it was
    built, and when each instance's builds start and forward passes end."""

    name = "test-slow-to-build"
    builds: list[str] = []  # threads
    events: list[tuple[str, int, float]] = []  # ("build" | "predicted", instance, time)

    def __init__(self, broken: bool = False, forward_ms: float = 1.0) -> None:
        if broken:
            raise UserError("test-slow-to-build: its checkpoint is missing")
        super().__init__(forward_ms=forward_ms)

    def prepare(self) -> None:
        type(self).builds.append(threading.current_thread().name)
        type(self).events.append(("build", id(self), time.perf_counter()))
        time.sleep(0.3)

    def predict(self, prompt, previous=None, update_slices=None):
        prediction = super().predict(prompt, previous, update_slices)
        type(self).events.append(("predicted", id(self), time.perf_counter()))
        return prediction


registry.models.register(_SlowToBuild)


def _config(second: dict):
    return parse_config(
        {
            "name": "ahead",
            "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
            # the first model's passes take 40 ms: its last group outlasts the second one's start
            "models": [{"name": "test-slow-to-build", "label": "first", "forward_ms": 40}, second],
            "prompters": ["center-points-per-volume"],
            "refiners": ["center-error-click"],
            "refinement_steps": 1,
        }
    )


def _rows(folder) -> pd.DataFrame:
    frame = pd.read_parquet(folder / "results.parquet")
    return frame.drop(columns=measured_columns(frame)).reset_index(drop=True)


def test_the_second_model_is_built_while_the_first_computes(tmp_path):
    _SlowToBuild.builds.clear()
    _SlowToBuild.events.clear()
    config = _config({"name": "test-slow-to-build", "label": "second"})
    runner = Runner(config, tmp_path / "ahead", user_workers=0)
    _, problems = runner.run()
    assert not problems
    assert _SlowToBuild.builds == [
        "intrabench-model_0",  # beside the first case's reading
        "intrabench-next-model_0",
    ]  # beside the first model's work
    first, second = dict.fromkeys(instance for _, instance, _ in _SlowToBuild.events)
    second_built = next(t for kind, i, t in _SlowToBuild.events if kind == "build" and i == second)
    first_done = max(t for kind, i, t in _SlowToBuild.events if kind == "predicted" and i == first)
    assert second_built < first_done  # it was built while the first model still computed
    assert runner.loop_clock.entries["building models"] == 2
    # the same rows as a run that builds each model where it is first used
    _SlowToBuild.builds.clear()
    Runner(config, tmp_path / "plain", user_workers=0, build_ahead=False).run()
    assert _SlowToBuild.builds == ["intrabench-model_0", "MainThread"]
    pd.testing.assert_frame_equal(_rows(tmp_path / "ahead"), _rows(tmp_path / "plain"))


def test_a_model_that_fails_to_build_ahead_is_reported_once_where_it_is_used(tmp_path):
    config = _config({"name": "test-slow-to-build", "label": "broken", "broken": True})
    runner = Runner(config, tmp_path / "run", user_workers=0, build_ahead=True)
    _, problems = runner.run()
    assert problems == ["model 'broken' skipped: test-slow-to-build: its checkpoint is missing"]
    assert set(pd.read_parquet(tmp_path / "run" / "results.parquet").model) == {"first"}


def test_room_for_both_needs_two_models_off_the_cpu_and_half_the_card_free(monkeypatch):
    config = _config({"name": "region-growing-3d"})
    stand_in, cpu_model = config.models
    monkeypatch.setattr(model_ahead, "device_memory_free_share", lambda: None)
    assert model_ahead.room_for_both(stand_in, stand_in)
    assert not model_ahead.room_for_both(stand_in, cpu_model)  # it would take the loop's cores
    assert not model_ahead.room_for_both(cpu_model, stand_in)
    for share, room in ((0.49, False), (0.5, True), (0.9, True)):
        monkeypatch.setattr(model_ahead, "device_memory_free_share", lambda share=share: share)
        assert model_ahead.room_for_both(stand_in, stand_in) is room


def test_without_cuda_in_use_the_free_share_is_not_asked():
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip("this process uses a CUDA device")
    assert model_ahead.device_memory_free_share() is None


def test_a_model_built_ahead_and_never_used_is_dropped():
    from intrabench.config import ComponentSpec

    ahead = model_ahead.NextModel()
    ahead.start(ComponentSpec(name="region-growing-3d"))
    assert ahead.key == "region-growing-3d"
    assert ahead.take("another") is None and ahead.key == "region-growing-3d"
    ahead.close()
    assert ahead.key is None
    ahead.start(ComponentSpec(name="region-growing-3d"))
    model = ahead.take("region-growing-3d")
    assert model is not None and model.name == "region-growing-3d" and ahead.key is None
    ahead.close()
