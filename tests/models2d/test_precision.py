"""The ``precision`` parameter of the 2D SAM-family adapters (fp32 / bf16 / fp16 autocast).

Runs on the CPU with tiny random-weight networks: bf16 autocast is real there (emulated on
CPUs without native bf16), so the autocast path, the float32 islands and the dtypes of what
comes back are all exercised without a GPU. fp16 autocast needs CUDA and is refused on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.errors import ConfigError
from intrabench.models.runtime._precision import forward_context, resolve_precision

from .conftest import MODEL_NAMES, tiny_model

# Measured on the demo-real lung case (box-per-slice, 2 center-error-click refinements):
# step 0: Dice between the fp32 and bf16 masks 0.995-0.999, voxels agreeing 0.9992-0.9997;
# refinement steps drift more (Dice >= 0.956, voxels >= 0.984) because the simulated clicks
# follow each run's own errors, so the two runs are no longer given the same prompts.
# (step -> (Dice bound, voxel agreement bound))
BOUNDS = {0: (0.98, 0.998), 1: (0.90, 0.98), 2: (0.90, 0.98)}


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2.0 * int((a & b).sum()) / total


def _first_linear(module: torch.nn.Module) -> torch.nn.Module:
    return next(m for m in module.modules() if isinstance(m, torch.nn.Linear))


def _episode(name: str, case, precision: str):
    model = tiny_model(name, precision=precision)
    model.set_case(case.image)
    refinable = "mask" in type(model).accepts
    refiner = registry.refiners.create("center-error-click") if refinable else None
    results = run_episode(
        case,
        case.targets[0],
        model,
        registry.prompters.create("box-per-slice"),
        "box-per-slice",
        refiner,
        "center-error-click",
        steps=2 if refinable else 0,
    )
    return model, results


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_bf16_masks_agree_with_fp32(name: str, lung) -> None:
    _, reference = _episode(name, lung, "fp32")
    model, results = _episode(name, lung, "bf16")
    assert model.active_precision == "bf16"
    assert len(results) == len(reference)
    for step, (ours, theirs) in enumerate(zip(results, reference)):
        mask, expected = ours.prediction.mask, theirs.prediction.mask
        assert mask.dtype == bool and mask.shape == lung.image.shape
        assert expected.sum() > 500  # a real comparison, not two empty masks
        dice_bound, voxel_bound = BOUNDS[step]
        assert _dice(mask, expected) > dice_bound, step
        assert (mask == expected).mean() > voxel_bound, step
        for logits in ours.prediction.feedback.values():
            assert isinstance(logits, np.ndarray) and logits.dtype == np.float32
            assert np.isfinite(logits).all()


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_autocast_is_active_in_the_encoder_under_bf16_only(name: str, lung) -> None:
    seen: dict[str, torch.dtype] = {}
    for precision in ("fp32", "bf16"):
        model = tiny_model(name, precision=precision)
        model.set_case(lung.image)
        layer = _first_linear(model.net.image_encoder)
        handle = layer.register_forward_hook(
            lambda module, inputs, output, key=precision: seen.__setitem__(key, output.dtype)
        )
        model.embedding(6)
        handle.remove()
    assert seen == {"fp32": torch.float32, "bf16": torch.bfloat16}


def test_default_is_float32_on_the_cpu_and_bf16_on_cuda(lung) -> None:
    model = tiny_model("sam")
    assert model.precision == "auto" and model.active_precision == "fp32"
    assert resolve_precision("auto", "cuda:0") == "bf16"  # the behaviour before the parameter
    assert resolve_precision("fp32", "cuda") == "fp32"
    assert resolve_precision("fp16", "cuda") == "fp16"


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_fp16_on_the_cpu_is_refused_at_construction(name: str) -> None:
    with pytest.raises(ConfigError, match="precision 'fp16' is not supported on the CPU"):
        tiny_model(name, precision="fp16")


def test_unknown_precision_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError,
        match="precision must be one of 'auto', 'fp32', 'bf16', 'fp16', 'tf32', not 'float16'",
    ):
        tiny_model("sam2", precision="float16")
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("half", "cuda")


@pytest.mark.parametrize("name", ["sam", "sam2"])
def test_positional_encoding_stays_float32_under_autocast(name: str, lung) -> None:
    """SAM's random-Fourier encoding: phases of tens of radians, blurred by a bf16 matmul."""
    model = tiny_model(name, precision="bf16")
    net = model.net
    encoder = net.prompt_encoder if name == "sam" else net.sam_prompt_encoder
    pe_layer = encoder.pe_layer
    coords = torch.tensor([[[13.0, 201.5], [250.0, 7.25], [128.0, 128.0]]])
    size = (256, 256)
    with forward_context("cpu", "fp32"):
        expected = pe_layer.forward_with_coords(coords, size)
        expected_grid = pe_layer((16, 16))
    with forward_context("cpu", "bf16"):
        points = pe_layer.forward_with_coords(coords, size)
        grid = pe_layer((16, 16))
        # what the unprotected formula gives under autocast: the matmul in bf16
        normalised = 2 * (coords / 256.0) - 1
        blurred = 2 * np.pi * (normalised @ pe_layer.positional_encoding_gaussian_matrix)
    assert points.dtype == grid.dtype == torch.float32
    torch.testing.assert_close(points, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(grid, expected_grid, rtol=0, atol=1e-6)
    exact = 2 * np.pi * (normalised @ pe_layer.positional_encoding_gaussian_matrix.float())
    assert blurred.dtype == torch.bfloat16
    assert (blurred.float() - exact).abs().max() > 1e-3  # the protection is not a no-op
    # class swap only: same parameters and buffers, same state dict keys
    assert "positional_encoding_gaussian_matrix" in dict(pe_layer.named_buffers())
    assert type(pe_layer).__name__ == "PositionEmbeddingRandom"


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_seeded_random_weights_are_drawn_on_the_cpu_whatever_the_device(name, monkeypatch):
    """``weights: random, seed: s`` must build the same network on every device: the weights
    are drawn by the CPU generator, then moved. Here the adapter's device is the meta device
    (a stand-in for CUDA, whose generator draws other numbers): what the builder created must
    be on the CPU and equal, tensor for tensor, to a CPU build with the same seed."""
    reference = {k: v.clone() for k, v in tiny_model(name, seed=3).net.state_dict().items()}
    built: dict[str, torch.Tensor] = {}
    model = tiny_model(name, seed=3)
    cls = type(model)
    original = cls.build_network

    def recording_build(self, tiny=False):
        net = original(self, tiny=tiny)
        built.update({k: v.clone() for k, v in net.state_dict().items()})
        return net

    monkeypatch.setattr(cls, "build_network", recording_build)
    monkeypatch.setattr(cls, "device", property(lambda self: torch.device("meta")))
    model.net  # noqa: B018 - builds the network
    assert built.keys() == reference.keys()
    for key, value in built.items():
        assert value.device.type == "cpu", key
        torch.testing.assert_close(value, reference[key], rtol=0, atol=0, msg=key)
    assert next(model.net.parameters()).device.type == "meta"  # then moved to the device
