"""The SAM-family encoders' speed options compute the same function as upstream's code.

``attention='fused'`` (scaled_dot_product_attention with the relative-position terms as the
bias), ``encoder_weights='bf16'``, ``compile`` and the ``tf32`` precision, on tiny random-weight
networks on the CPU: the fused path against segment_anything's own modules within 1e-5 in
float32 and within bf16 rounding under autocast; parameter names and shapes unchanged.
"""

from __future__ import annotations

import pytest
import torch

from intrabench.models.runtime._precision import forward_context, resolve_precision, tf32_allowed
from intrabench.models.sam_family._encoder_speed import resolve_attention, use_fused_attention

from .conftest import tiny_model

ATTENTION_MODELS = ("sam", "medsam", "sam-med2d")


def _embeddings(model, lung, zs=(5, 6, 7)):
    model.set_case(lung.image)
    return torch.stack([model.embedding(z) for z in zs])


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_fused_attention_equals_upstream_in_float32(name, lung):
    reference = tiny_model(name, attention="reference")
    fused = tiny_model(name, attention="fused")
    swapped = [
        type(m).__name__
        for m in fused.net.image_encoder.modules()
        if type(m).__name__ == "SdpaAttention"
    ]
    assert len(swapped) == len(fused.net.image_encoder.blocks) >= 2
    assert not any(type(m).__name__ == "SdpaAttention" for m in reference.net.modules())
    # same parameters, same names: checkpoints load into either
    assert {k: v.shape for k, v in fused.net.state_dict().items()} == {
        k: v.shape for k, v in reference.net.state_dict().items()
    }
    expected, got = _embeddings(reference, lung), _embeddings(fused, lung)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ATTENTION_MODELS)
def test_fused_attention_under_bf16_autocast_is_within_bf16_rounding(name, lung):
    expected = _embeddings(tiny_model(name, attention="reference", precision="fp32"), lung)
    reference = _embeddings(tiny_model(name, attention="reference", precision="bf16"), lung)
    fused = _embeddings(tiny_model(name, attention="fused", precision="bf16"), lung)
    # the fused path is no further from float32 than upstream's own bf16 path (plus a margin)
    upstream_error = (reference - expected).abs().max().item()
    assert (fused - expected).abs().max().item() <= 2 * upstream_error + 1e-2


def test_fused_attention_on_a_lone_module_with_odd_sizes():
    """A window of 5 x 7 tokens, 3 heads, batch 2: the reshapes must not mix heads."""
    from segment_anything.modeling.image_encoder import Attention

    torch.manual_seed(0)
    module = Attention(dim=24, num_heads=3, use_rel_pos=True, input_size=(5, 7))
    torch.nn.init.normal_(module.rel_pos_h)
    torch.nn.init.normal_(module.rel_pos_w)
    tokens = torch.randn(2, 5, 7, 24)
    with torch.no_grad():
        expected = module(tokens)
        assert use_fused_attention(module) == 1 and use_fused_attention(module) == 0
        got = module(tokens)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["sam", "sam2"])
def test_bf16_encoder_weights_hand_on_float32_embeddings(name, lung):
    model = tiny_model(name, encoder_weights="bf16")
    encoder_dtypes = {p.dtype for p in model.net.image_encoder.parameters()}
    decoder_dtypes = {p.dtype for p in model.net.parameters()} - encoder_dtypes
    assert encoder_dtypes == {torch.bfloat16} and decoder_dtypes == {torch.float32}
    names = set(model.net.state_dict())
    assert names == set(tiny_model(name).net.state_dict())
    model.set_case(lung.image)
    embedding = model.embedding(6)
    first = embedding[0] if isinstance(embedding, tuple) else embedding
    assert first.dtype == torch.float32
    reference = tiny_model(name)
    reference.set_case(lung.image)
    expected = reference.embedding(6)
    expected = expected[0] if isinstance(expected, tuple) else expected
    scale = expected.abs().max().item()
    assert (first - expected).abs().max().item() < 0.1 * scale  # bf16 rounding, not garbage


def test_speed_options_are_checked_at_construction():
    from intrabench.errors import ConfigError

    with pytest.raises(ConfigError, match="attention must be one of"):
        tiny_model("sam", attention="flash")
    with pytest.raises(ConfigError, match="encoder_weights must be one of"):
        tiny_model("sam", encoder_weights="fp8")
    assert resolve_attention("auto", "cuda") == "fused"
    assert resolve_attention("auto", "cpu") == "reference"


def test_tf32_is_fp32_off_cuda_and_restored_after_a_cuda_forward():
    assert resolve_precision("tf32", "cpu") == "fp32"
    assert resolve_precision("tf32", "cuda:0") == "tf32"
    before = torch.get_float32_matmul_precision()
    with tf32_allowed():
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before
    with forward_context("cpu", "tf32"):  # not CUDA: nothing changes
        assert torch.get_float32_matmul_precision() == before


@pytest.mark.slow
def test_compiled_encoder_gives_the_same_embeddings(lung):
    expected = _embeddings(tiny_model("sam"), lung)
    got = _embeddings(tiny_model("sam", compile=True), lung)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
