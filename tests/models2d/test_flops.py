"""FLOP counting and the GPU peak table of :mod:`intrabench.testing.flops`."""

from __future__ import annotations

import pytest
import torch

from intrabench.models.sam_family._sam_common import SAM_CONFIGS, TINY_SAM, build_sam
from intrabench.testing.flops import (
    H100_SXM,
    KNOWN_GPUS,
    achieved_tflops,
    count_flops,
    count_module_flops,
    flops_by_operator,
    lookup_gpu,
)


def test_linear_and_convolution_match_the_closed_form() -> None:
    linear = torch.nn.Linear(48, 20)
    assert count_module_flops(linear, torch.zeros(7, 48)) == 2 * 7 * 48 * 20
    conv = torch.nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1)
    out_h = out_w = 16  # 32 x 32 input, stride 2
    assert count_module_flops(conv, torch.zeros(2, 3, 32, 32)) == 2 * 2 * 8 * out_h * out_w * 3 * 9
    a, b = torch.zeros(4, 5, 6), torch.zeros(4, 6, 3)
    assert count_flops(lambda: a @ b) == 2 * 4 * 5 * 6 * 3
    assert flops_by_operator(lambda: a @ b) == {"aten.bmm": 2 * 4 * 5 * 6 * 3}


def test_attention_counts_on_the_cpu_as_on_meta() -> None:
    """torch's counter knows the CUDA attention kernels; the CPU one is added here."""
    q, k, v = torch.zeros(2, 3, 10, 8), torch.zeros(2, 3, 12, 8), torch.zeros(2, 3, 12, 5)
    expected = 2 * 2 * 3 * 10 * 8 * 12 + 2 * 2 * 3 * 10 * 12 * 5  # q k^T, then (.) v

    def attention(device: str) -> int:
        tensors = [t.to(device) for t in (q, k, v)]
        return count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(*tensors))

    assert attention("cpu") == attention("meta") == expected


def test_meta_device_counts_what_the_cpu_runs() -> None:
    torch.manual_seed(0)
    net = build_sam(TINY_SAM)
    image = torch.zeros(2, 3, TINY_SAM.image_size, TINY_SAM.image_size)
    on_cpu = count_module_flops(net.image_encoder, image)
    with torch.device("meta"):
        meta_net = build_sam(TINY_SAM)
    on_meta = count_module_flops(meta_net.image_encoder, image.to("meta"))
    assert on_cpu == on_meta > 0


def test_sam_vit_b_encoder_flops_match_the_architecture() -> None:
    """972.08 GFLOPs per 1024 x 1024 image, term by term (full size, on the meta device)."""
    with torch.device("meta"):
        net = build_sam(SAM_CONFIGS["vit_b"])
    counted = count_module_flops(net.image_encoder, torch.zeros(1, 3, 1024, 1024, device="meta"))
    dim, heads, head_dim, tokens = 768, 12, 64, 64 * 64
    expected = 2 * (3 * 16 * 16) * dim * tokens  # patch embedding
    for block in range(12):
        is_global = block in (2, 5, 8, 11)
        # 14 x 14 windows over the grid padded to 70 x 70: 25 windows of 196 tokens
        padded, windows, side = (tokens, 1, 64) if is_global else (70 * 70, 25, 14)
        expected += 2 * padded * dim * (3 * dim) + 2 * padded * dim * dim  # qkv, projection
        expected += 2 * (2 * tokens * dim * 4 * dim)  # MLP
        expected += 2 * (2 * windows * heads * (side * side) ** 2 * head_dim)  # qk^T, attn v
        expected += 2 * (2 * windows * heads * side**3 * head_dim)  # decomposed rel pos
    expected += 2 * tokens * dim * 256 + 2 * tokens * 256 * 256 * 9  # neck
    assert counted == expected == 972_077_334_528


@pytest.mark.parametrize(
    "device_name, card",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA L40", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
        ("Tesla T4", None),
    ],
)
def test_gpu_lookup_by_device_name(device_name: str, card: str | None) -> None:
    found = lookup_gpu(device_name)
    assert (found.name if found else None) == card


def test_peaks_per_precision() -> None:
    assert lookup_gpu("nvidia h100 80gb hbm3") is H100_SXM  # case-insensitive
    assert H100_SXM.for_precision("fp32") == 67.0
    assert H100_SXM.for_precision("fp32", tf32=True) == 494.5
    assert H100_SXM.for_precision("bf16") == H100_SXM.for_precision("fp16") == 989.5
    with pytest.raises(ValueError, match="no peak for precision 'int8'"):
        H100_SXM.for_precision("int8")
    for _, peak in KNOWN_GPUS:  # dense tensor-core rates above the CUDA-core FP32 rate
        assert peak.bf16 == peak.fp16 >= peak.tf32 >= peak.fp32 > 0 and peak.source
    assert achieved_tflops(3e12, 1.5) == pytest.approx(2.0)


def test_tf32_setting_is_read_from_torch() -> None:
    from intrabench.testing.flops import cuda_fp32_matmul_uses_tf32

    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert not cuda_fp32_matmul_uses_tf32()
        torch.set_float32_matmul_precision("high")
        assert cuda_fp32_matmul_uses_tf32()
    finally:
        torch.set_float32_matmul_precision(previous)
