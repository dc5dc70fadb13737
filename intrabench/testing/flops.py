"""FLOP counts of network forward passes and the theoretical peak of known GPUs.

Used by ``benchmarks/bench_throughput.py`` to put an encoder's measured speed next to the
card's FLOP bound (achieved TFLOP/s divided by the datasheet peak).

Convention: FLOPs are counted by :class:`torch.utils.flop_counter.FlopCounterMode`, i.e. the
matrix products and convolutions of the forward pass (mm, bmm, addmm, baddbmm, convolution,
scaled-dot-product attention, also its CPU kernel), **2 FLOPs per multiply-accumulate**; elementwise operations,
normalisations and softmax are not counted. That is the usual convention for a network's
FLOP bound, since those products are what the tensor cores execute. Counting works on any
device, including ``meta`` (shapes only: no memory, no time).

Peaks are **dense** (no 2:4 structured sparsity) TFLOP/s at boost clock, from the vendors'
datasheets, for four kinds of arithmetic: FP32 on the CUDA cores (what an fp32 matmul gets
unless TF32 is enabled), TF32, BF16 and FP16 on the tensor cores (FP32 accumulate). torch is
imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuPeak:
    """Dense peak TFLOP/s of one card (see the module docstring for the convention)."""

    name: str
    fp32: float
    tf32: float
    bf16: float
    fp16: float
    source: str

    def for_precision(self, precision: str, tf32: bool = False) -> float:
        """Peak for 'fp32' (TF32 tensor cores when ``tf32`` is on), 'bf16' or 'fp16'.

        Args:
            precision: ``"fp32"``, ``"bf16"`` or ``"fp16"``.
            tf32: Whether fp32 matrix products run on the TF32 tensor cores
                (:func:`cuda_fp32_matmul_uses_tf32`).

        Returns:
            The dense peak in TFLOP/s.

        Raises:
            ValueError: Another precision.
        """
        if precision == "fp32":
            return self.tf32 if tf32 else self.fp32
        if precision in ("bf16", "fp16"):
            return getattr(self, precision)
        raise ValueError(f"no peak for precision {precision!r}; use 'fp32', 'bf16' or 'fp16'")


# Datasheet figures. The data-centre datasheets quote the tensor-core rates "with sparsity";
# the dense rates used here are half of those (the datasheets' own footnote).
# - NVIDIA H100 Tensor Core GPU datasheet: H100 SXM FP32 67, TF32 989*, BF16/FP16 1,979*;
#   H100 PCIe FP32 51, TF32 756*, BF16/FP16 1,513*; H100 NVL FP32 60, TF32 835*,
#   BF16/FP16 1,671* (* with sparsity).
# - NVIDIA H200 Tensor Core GPU datasheet: H200 SXM FP32 67, TF32 989*, BF16/FP16 1,979*;
#   H200 NVL FP32 60, TF32 835*, BF16/FP16 1,671*.
# - NVIDIA A100 Tensor Core GPU datasheet (40 GB and 80 GB, PCIe and SXM): FP32 19.5,
#   TF32 156 (312*), BF16/FP16 312 (624*).
# - NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*).
# - NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090: FP32 82.6, TF32 82.6 (165.2*),
#   BF16 and FP16-with-FP32-accumulate 165.2 (330.4*) (GeForce cards accumulate FP32 at half
#   the rate of FP16 accumulate; torch's fp16 matmuls accumulate in FP32).
H100_SXM = GpuPeak("H100 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet")
H100_PCIE = GpuPeak("H100 PCIe", 51.0, 378.0, 756.5, 756.5, "NVIDIA H100 datasheet")
H100_NVL = GpuPeak("H100 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H100 datasheet")
H200_SXM = GpuPeak("H200 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet")
H200_NVL = GpuPeak("H200 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H200 datasheet")
A100 = GpuPeak("A100", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet")
L40S = GpuPeak("L40S", 91.6, 183.0, 362.05, 362.05, "NVIDIA L40S datasheet")
RTX_4090 = GpuPeak(
    "GeForce RTX 4090", 82.6, 82.6, 165.2, 165.2, "NVIDIA Ada GPU architecture whitepaper"
)

#: (pattern searched case-insensitively in ``torch.cuda.get_device_name()``, card); first match
#: wins, so the specific names come first. An H100 SXM reports "NVIDIA H100 80GB HBM3"; GH200
#: superchips and laptop or "D" variants of the 4090 are deliberately not matched.
KNOWN_GPUS: tuple[tuple[str, GpuPeak], ...] = (
    (r"\bH200\b.*\bNVL\b", H200_NVL),
    (r"\bH200\b", H200_SXM),
    (r"\bH100\b.*\bNVL\b", H100_NVL),
    (r"\bH100\b.*\bPCIe\b", H100_PCIE),
    (r"\bH100\b", H100_SXM),
    (r"\bA100\b", A100),
    (r"\bL40S\b", L40S),
    (r"\bRTX 4090\s*$", RTX_4090),
)


def lookup_gpu(device_name: str) -> GpuPeak | None:
    """The known card whose pattern matches ``device_name``, or None.

    Args:
        device_name: The name torch reports (``torch.cuda.get_device_name()``).

    Returns:
        The card's peaks, or None for a card not in :data:`KNOWN_GPUS`.
    """
    for pattern, peak in KNOWN_GPUS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return peak
    return None


def cuda_fp32_matmul_uses_tf32() -> bool:
    """Whether fp32 matrix products on CUDA may run on the TF32 tensor cores (torch setting).

    Returns:
        True when torch's setting allows TF32.
    """
    import torch

    setting = getattr(torch.backends.cuda.matmul, "fp32_precision", "none")
    if setting in ("tf32", "ieee"):
        return setting == "tf32"
    return torch.get_float32_matmul_precision() != "highest"


def count_flops(function: Callable[[], Any]) -> int:
    """FLOPs (2 per multiply-accumulate) of the matrix products and convolutions that
    ``function()`` runs; its return value is discarded.

    Args:
        function: Called once, without arguments, under torch's FLOP counter.

    Returns:
        The FLOPs counted.
    """
    return sum(flops_by_operator(function).values())


def _cpu_attention_formulas() -> dict[Any, Any]:
    """Formulas torch's counter lacks: the CPU kernel of ``scaled_dot_product_attention``
    (without it, attention on the CPU would count 0 FLOPs while CUDA and meta count it)."""
    import torch
    from torch.utils.flop_counter import sdpa_flop_count

    def attention(
        query_shape: Any,
        key_shape: Any,
        value_shape: Any,
        *args: Any,
        out_shape: Any = None,
        **kwargs: Any,
    ) -> int:
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    operator = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return {} if operator is None else {operator: attention}


def flops_by_operator(function: Callable[[], Any]) -> dict[str, int]:
    """FLOPs of ``function()`` per aten operator name (e.g. 'aten.convolution', 'aten.bmm').

    Args:
        function: Called once, without arguments, under torch's FLOP counter.

    Returns:
        Operator name -> FLOPs.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, custom_mapping=_cpu_attention_formulas()) as counter:
        function()
    totals = counter.get_flop_counts().get("Global", {})
    return {str(operator): int(count) for operator, count in totals.items()}


def count_module_flops(module: Any, *inputs: Any) -> int:
    """FLOPs of ``module(*inputs)`` under ``torch.no_grad()`` (any device, ``meta`` included).

    Args:
        module: A ``torch.nn.Module``.
        inputs: Its positional inputs (tensors, on ``module``'s device).

    Returns:
        The FLOPs of one forward pass.
    """
    import torch

    with torch.no_grad():
        return count_flops(lambda: module(*inputs))


def achieved_tflops(flops: float, seconds: float) -> float:
    """TFLOP/s of ``flops`` done in ``seconds``.

    Args:
        flops: The work done, in FLOPs.
        seconds: The wall-clock time it took.

    Returns:
        TFLOP/s; NaN when ``seconds`` is not positive.
    """
    return flops / seconds / 1e12 if seconds > 0 else float("nan")
