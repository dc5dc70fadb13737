"""The GPU proxy's stand-ins take the prompt kinds of the models they stand for."""

from __future__ import annotations

import pytest

from intrabench import registry
from intrabench.config import parse_config
from intrabench.engine.plan import make_plan
from intrabench.errors import ConfigError
from intrabench.protocols import model_accepts


def _plan(models: list[dict]):
    config = parse_config({
        "name": "stand-ins", "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
        "models": models, "prompters": ["center-points-per-volume"],
        "refiners": ["center-error-click"], "refinement_steps": 3})
    datasets = {spec.key: registry.datasets.create(spec.name, spec.params)
                for spec in config.datasets}
    return make_plan(config, datasets)


def test_a_stand_in_for_a_model_without_a_previous_mask_is_not_refined():
    """SegVol takes no previous mask: the H100 run refined SAM-Med3D only (85 forward passes
    for 17 targets, not 136), and so must its proxy."""
    segvol_kinds = sorted(model_accepts(registry.models.get("segvol")))
    plan = _plan([{"name": "synthetic-network", "label": "stands-for-sam-med3d",
                   "accepts": ["mask", "point", "scribble"]},
                  {"name": "synthetic-network", "label": "stands-for-segvol",
                   "accepts": segvol_kinds}])
    refiners = {unit.model.key: unit.refiner_key for unit in plan.units}
    assert refiners == {"stands-for-sam-med3d": "center-error-click",
                        "stands-for-segvol": "none"}
    assert any(item["model"] == "stands-for-segvol" and "cannot be refined" in item["reason"]
               for item in plan.skipped)


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
