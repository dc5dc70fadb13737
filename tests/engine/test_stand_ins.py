"""The GPU proxy's stand-ins take the prompt kinds of the models they stand for."""

from __future__ import annotations

import pytest

from intrabench import registry
from intrabench.config import parse_config
from intrabench.engine.plan import make_plan
from intrabench.errors import ConfigError
from intrabench.interfaces import model_accepts


def _plan(models: list[dict]):
    config = parse_config(
        {
            "name": "stand-ins",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": models,
            "prompters": ["center-points-per-volume"],
            "refiners": ["center-error-click"],
            "refinement_steps": 3,
        }
    )
    datasets = {
        spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
    }
    return make_plan(config, datasets)


def test_a_stand_in_for_a_model_without_a_previous_mask_is_not_refined():
    """SegVol takes no previous mask: the H100 run refined SAM-Med3D only (85 forward passes
    for 17 targets, not 136), and so must its proxy."""
    segvol_kinds = sorted(model_accepts(registry.models.get("segvol")))
    plan = _plan(
        [
            {
                "name": "synthetic-network",
                "label": "stands-for-sam-med3d",
                "accepts": ["mask", "point", "scribble"],
            },
            {"name": "synthetic-network", "label": "stands-for-segvol", "accepts": segvol_kinds},
        ]
    )
    refiners = {unit.model.key: unit.refiner_key for unit in plan.units}
    assert refiners == {"stands-for-sam-med3d": "center-error-click", "stands-for-segvol": "none"}
    assert any(
        item["model"] == "stands-for-segvol" and "cannot be refined" in item["reason"]
        for item in plan.skipped
    )


@pytest.mark.parametrize("name", ["synthetic-network", "synthetic-network-2d"])
def test_accepts_narrows_and_never_widens(name):
    cls = registry.models.get(name)
    assert model_accepts(cls, {}) == cls.accepts
    assert model_accepts(cls, {"accepts": ["point"]}) == frozenset({"point"})
    model = registry.models.create(name, {"accepts": ["point", "mask"]})
    assert model.accepts == frozenset({"point", "mask"})
    with pytest.raises(ConfigError, match="cannot take text prompts"):
        model_accepts(cls, {"accepts": ["point", "text"]})
    with pytest.raises(ConfigError, match="a list of prompt kinds"):
        model_accepts(cls, {"accepts": "point"})


@pytest.mark.parametrize("name", ["synthetic-network", "synthetic-network-2d"])
@pytest.mark.parametrize("forward_ms", [float("nan"), float("inf"), -1.0, 1e400])
def test_a_forward_time_that_is_no_finite_duration_is_refused(name, forward_ms):
    """NaN passed the old check (NaN < 0 is false): no pass ever waited, and the proxy's
    nominal forward time became NaN."""
    with pytest.raises(ConfigError, match="forward_ms must be a finite number >= 0"):
        registry.models.create(name, {"forward_ms": forward_ms})


# -- setup_of: the real model's build and per-case set-up, never its forward pass ---------

TINY_SAM_MED3D = {
    "name": "sam-med3d",
    "params": {"weights": "random", "tiny": True, "device": "cpu"},
}


def _phantom():
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 1, "shape": [24, 64, 64]})
    return dataset.load(dataset.case_ids()[0])


def test_setup_of_builds_the_real_model_once_and_sets_up_each_case():
    """The proxy's stand-in for SAM-Med3D resamples every case to 1.5 mm as SAM-Med3D does
    (the set-up a real run pays between forward passes), and its masks stay the stand-in's."""
    import numpy as np

    from intrabench.models.volumetric._sammed3d_arch import TINY as TINY_CONFIG
    from intrabench.types import Prompt

    case = _phantom()
    plain = registry.models.create("synthetic-network", {"forward_ms": 0})
    with_setup = registry.models.create(
        "synthetic-network", {"forward_ms": 0, "setup_of": TINY_SAM_MED3D}
    )
    assert with_setup._real is None  # nothing built before prepare or the first case
    with_setup.prepare()
    real = with_setup._real
    assert type(real).__name__ == "SamMed3D" and real.config is TINY_CONFIG
    with_setup.set_case(case.image)
    with_setup.set_case(case.image)
    assert with_setup._real is real  # built once
    assert real._image is case.image
    # 24 x 64 x 64 at (2.5, 0.8, 0.8) mm on SAM-Med3D's 1.5 mm grid: 40 x 34 x 34 voxels
    assert real._grid.shape == (40, 34, 34)
    plain.set_case(case.image)
    target = np.argwhere(case.label == 1).mean(axis=0).round().astype(np.int64)
    prompt = Prompt(points=target[None], point_labels=np.array([1], dtype=np.int8))
    assert np.array_equal(with_setup.predict(prompt).mask, plain.predict(prompt).mask)


def test_the_2d_stand_in_sets_up_its_real_model_too():
    case = _phantom()
    model = registry.models.create(
        "synthetic-network-2d",
        {
            "forward_ms": 0,
            "setup_of": {"name": "sam", "params": {"weights": "random", "tiny": True}},
        },
    )
    model.set_case(case.image)  # builds it when the run did not call prepare
    assert type(model._real).__name__ == "SAM"
    assert model.image is case.image and model._real.image is case.image


@pytest.mark.parametrize(
    ("setup_of", "message"),
    [
        ({"name": "no-such-model"}, "unknown model 'no-such-model'"),
        ({"name": "synthetic-network-2d"}, "must name a real model"),
        ({"name": 3}, "names no model"),
        ({"name": "sam", "params": [1]}, "params must be a mapping"),
        ({"name": "sam", "params": {"bogus": 1}}, "has no parameter 'bogus'"),
        ({"name": "sam", "extra": 1}, "a mapping with 'name' and 'params'"),
        ("sam", "valid dictionary"),
    ],
)
def test_a_setup_of_that_names_no_real_model_is_one_line(setup_of, message):
    with pytest.raises(ConfigError, match=message) as raised:
        registry.models.create("synthetic-network", {"setup_of": setup_of})
    assert "\n" not in str(raised.value)


def test_the_proxy_config_sets_up_each_real_model_on_the_cpu():
    """bench_gpu_run's --proxy-of: each stand-in sets up its model as configured, on the CPU;
    --set-up none leaves the real models out."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_gpu_run import stand_in_config

    config = parse_config(
        {
            "name": "gpu",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [
                {"name": "sam-med3d", "weights": "random", "device": "cuda"},
                {"name": "region-growing-3d"},
            ],
            "prompters": ["center-points-per-volume"],
        }
    )
    proxy = stand_in_config(
        config, {"sam-med3d(device=cuda,weights=random)": 805, "region-growing-3d": 5}
    )
    setups = [spec.params.get("setup_of") for spec in proxy.models]
    assert setups == [
        {"name": "sam-med3d", "params": {"weights": "random", "device": "cpu"}},
        {"name": "region-growing-3d", "params": {}},
    ]
    assert [spec.params["forward_ms"] for spec in proxy.models] == [805, 5]
    bare = stand_in_config(config, 10.0, set_up=False)
    assert all("setup_of" not in spec.params for spec in bare.models)


def test_a_run_with_set_up_stand_ins_gives_the_same_rows_and_sets_up_every_group(tmp_path):
    """The real model's build and set-up add time, never rows: a proxy run with them gives the
    rows of the run without them, and each (model, case) group calls the model's set_case."""
    import pandas as pd

    from intrabench.execution.runner import Runner
    from intrabench.io.results import measured_columns

    def run(folder, setup: bool) -> tuple[pd.DataFrame, Runner]:
        extra = {"setup_of": TINY_SAM_MED3D} if setup else {}
        config = parse_config(
            {
                "name": "set-up",
                "datasets": [{"name": "demo-phantoms", "n_cases": 2, "shape": [24, 64, 64]}],
                "models": [
                    {"name": "synthetic-network", "label": "stand-in", "forward_ms": 1, **extra}
                ],
                "prompters": ["center-points-per-volume"],
                "refiners": ["center-error-click"],
                "refinement_steps": 1,
            }
        )
        runner = Runner(config, folder, user_workers=0)
        runner.run()
        frame = pd.read_parquet(folder / "results.parquet")
        return frame.drop(columns=measured_columns(frame)).reset_index(drop=True), runner

    plain, _ = run(tmp_path / "plain", setup=False)
    set_up, runner = run(tmp_path / "set-up", setup=True)
    pd.testing.assert_frame_equal(set_up, plain)
    assert runner.loop_clock.entries["model set_case"] == 2
    assert runner.loop_clock.entries["building models"] == 1


@pytest.mark.parametrize(
    ("stands_for", "message"),
    [
        ("", "stands_for must be a model's name"),
        ("x" * 10_000, "stands_for must be a model's name"),
        (3, "valid string"),
        (["sam"], "valid string"),
        ({"name": "sam"}, "valid string"),
    ],
)
def test_a_stands_for_that_is_no_model_name_is_one_line(stands_for, message):
    with pytest.raises(ConfigError, match=message) as raised:
        registry.models.create("synthetic-network", {"stands_for": stands_for})
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300
