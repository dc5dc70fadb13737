"""The ``precision`` parameter of the 3D adapters (SAM-Med3D, SAM-Med3D Turbo, SegVol).

Tiny random-weight networks on the CPU, where bf16 autocast is real: the autocast path, the
float32 positional encoding and the dtypes handed back are exercised without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.errors import ConfigError
from intrabench.models.runtime._precision import forward_context

from .conftest import MODELS_3D

# Measured on the three demo-real cases (points-per-volume; SAM-Med3D with 2
# center-error-click refinements): Dice between the fp32 and bf16 masks 0.9973-0.9978
# (SAM-Med3D, every step) and 0.9989-0.9990 (SegVol); voxels agreeing >= 0.993.
DICE_BOUND = 0.99
VOXEL_BOUND = 0.99


def _model(name: str, precision: str):
    return registry.models.create(
        name, {"weights": "random", "tiny": True, "device": "cpu", "precision": precision}
    )


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2.0 * int((a & b).sum()) / total


def _episode(name: str, case, precision: str):
    model = _model(name, precision)
    model.set_case(case.image)
    refinable = "mask" in type(model).accepts
    refiner = registry.refiners.create("center-error-click") if refinable else None
    return run_episode(
        case,
        case.targets[0],
        model,
        registry.prompters.create("points-per-volume"),
        "points-per-volume",
        refiner,
        "center-error-click",
        steps=2 if refinable else 0,
    )


@pytest.mark.parametrize("name", MODELS_3D)
def test_bf16_masks_agree_with_fp32(name: str, brain) -> None:
    reference = _episode(name, brain, "fp32")
    results = _episode(name, brain, "bf16")
    assert len(results) == len(reference) == (3 if name != "segvol" else 1)
    for ours, theirs in zip(results, reference):
        mask, expected = ours.prediction.mask, theirs.prediction.mask
        assert mask.dtype == bool and mask.shape == brain.image.shape
        assert expected.sum() > 1000  # a real comparison, not two empty masks
        assert _dice(mask, expected) > DICE_BOUND
        assert (mask == expected).mean() > VOXEL_BOUND
        logits = ours.prediction.feedback.get("low_res_logits")
        if name != "segvol":
            assert isinstance(logits, np.ndarray) and logits.dtype == np.float32
            assert logits.shape == (1, 1, 16, 16, 16) and np.isfinite(logits).all()


@pytest.mark.parametrize("name", ["sam-med3d", "segvol"])
def test_autocast_is_active_in_the_encoder_under_bf16_only(name: str, brain) -> None:
    seen: dict[str, torch.dtype] = {}
    for precision in ("fp32", "bf16"):
        model = _model(name, precision)
        assert model.precision == precision
        layer = next(m for m in model.net.image_encoder.modules() if isinstance(m, torch.nn.Linear))
        layer.register_forward_hook(
            lambda module, inputs, output, key=precision: seen.__setitem__(key, output.dtype)
        )
        model.set_case(brain.image)
        prompter = registry.prompters.create("points-per-volume")
        run_episode(brain, brain.targets[0], model, prompter, "points-per-volume")
    assert seen == {"fp32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.parametrize("name", MODELS_3D)
def test_fp16_on_the_cpu_and_unknown_values_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="precision 'fp16' is not supported on the CPU"):
        _model(name, "fp16")
    with pytest.raises(ConfigError, match="precision must be one of 'auto', 'fp32', 'bf16'"):
        _model(name, "bfloat16")
    assert _model(name, "auto").precision == "fp32"  # auto: bf16 on CUDA only


def test_positional_encoding_stays_float32_under_cpu_autocast() -> None:
    from intrabench.models.volumetric._3d_sam_blocks import RandomFourierPE

    torch.manual_seed(0)
    pe = RandomFourierPE(24, harmonics="sin_cos_sin")
    coords = torch.tensor([[[3.0, 60.5, 17.25], [63.0, 0.0, 31.0]]])
    with forward_context("cpu", "fp32"):
        expected_points = pe.points(coords, (64, 64, 64))
        expected_grid = pe.dense((4, 4, 4))
    with forward_context("cpu", "bf16"):
        points = pe.points(coords, (64, 64, 64))
        grid = pe.dense((4, 4, 4))
    assert points.dtype == grid.dtype == torch.float32
    torch.testing.assert_close(points, expected_points, rtol=0, atol=1e-6)
    torch.testing.assert_close(grid, expected_grid, rtol=0, atol=1e-6)
