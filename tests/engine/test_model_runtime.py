"""A model's runtime (device, backend, batch size, threads) apart from its identity: under
``runtime:`` it reaches the model's constructor but not its key, its units' keys or the
recorded config, so a run folder made on one machine resumes on another."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench import registry
from intrabench.config import parse_config
from intrabench.errors import ConfigError
from intrabench.execution.runner import Runner
from intrabench.interfaces import Model
from intrabench.io.results import measured_columns


class _DeviceModel(Model):
    """Region growing that takes a ``device`` and records the devices it was built for."""

    name = "test-device-region-growing"
    dimension = 3
    accepts = frozenset({"point", "box3d", "mask"})
    built_for: list[str] = []

    def __init__(self, device: str = "auto") -> None:
        type(self).built_for.append(device)
        self.inner = registry.models.create("region-growing-3d")

    def set_case(self, image):
        self.inner.set_case(image)

    def predict(self, prompt, previous=None, update_slices=None):
        return self.inner.predict(prompt, previous, update_slices)


registry.models.register(_DeviceModel)


def _config(model: dict):
    return parse_config(
        {
            "name": "runtime",
            "datasets": [{"name": "demo-phantoms", "n_cases": 2, "shape": [12, 32, 32]}],
            "models": [{"name": _DeviceModel.name, **model}],
            "prompters": ["box-3d"],
            "refiners": ["center-error-click"],
            "refinement_steps": 1,
        }
    )


def _rows(run_dir) -> pd.DataFrame:
    rows = pd.read_parquet(run_dir / "results.parquet")
    return rows.drop(columns=measured_columns(rows))


def test_the_runtime_reaches_the_model_but_not_the_keys(tmp_path):
    on_gpu = _config({"runtime": {"device": "cuda"}})
    on_cpu = _config({"runtime": {"device": "cpu"}})
    assert on_gpu.models[0].key == on_cpu.models[0].key == _DeviceModel.name
    assert on_gpu.models[0].build_params == {"device": "cuda"}
    gpu_keys = [u.key for u in Runner(on_gpu, tmp_path / "plan").plan().units]
    assert gpu_keys == [u.key for u in Runner(on_cpu, tmp_path / "plan").plan().units]
    assert len(gpu_keys) == 2

    _DeviceModel.built_for.clear()
    first = Runner(on_gpu, tmp_path / "run", background="inline")
    first.run()
    assert first.executed == 2 and _DeviceModel.built_for == ["cuda"]
    assert "cuda" not in (tmp_path / "run" / "config.yaml").read_text()
    rows = _rows(tmp_path / "run")

    # the same folder on "another machine": not refused as another config, nothing redone
    again = Runner(on_cpu, tmp_path / "run", background="inline")
    again.run()
    assert again.executed == 0 and again.failures == []
    pd.testing.assert_frame_equal(rows, _rows(tmp_path / "run"))


def test_a_parameter_beside_the_name_keeps_its_place_in_the_key():
    """Configs written before ``runtime:`` keep their keys, so their run folders resume."""
    spec = _config({"device": "cpu"}).models[0]
    assert spec.key == f"{_DeviceModel.name}(device=cpu)"
    assert spec.build_params == {"device": "cpu"}


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ({"runtime": {"checkpoint": "a.pth"}}, "checkpoint: not a runtime parameter"),
        ({"device": "cpu", "runtime": {"device": "cuda"}}, "device: given both beside the name"),
        ({"runtime": {"threads": 2}}, "threads"),  # a runtime parameter the model lacks
    ],
)
def test_what_the_runtime_cannot_hold_is_one_line(model, words):
    with pytest.raises(ConfigError, match=words):
        _config(model)
