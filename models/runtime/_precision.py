"""Numeric precision of the torch adapters: float32, or bf16/fp16 autocast around the networks.

Every torch adapter (the 2D SAM family and the 3D models) takes a ``precision`` parameter:

* ``"auto"`` (default): bf16 autocast on CUDA, float32 elsewhere, which is what the adapters
  did before the parameter existed;
* ``"fp32"``: no autocast anywhere (CUDA included: the reference numbers);
* ``"bf16"``: ``torch.autocast(<device type>, dtype=torch.bfloat16)`` around the network forward
  passes, on any device (on a CPU without native bf16 it is emulated and slower, see
  ``docs/models.md``);
* ``"fp16"``: the same with ``torch.float16``; refused on the CPU (an error at construction);
* ``"tf32"``: float32 tensors, with matrix products and convolutions on a CUDA GPU's TF32
  tensor cores (10-bit mantissa inputs, float32 accumulation: Ampere and later); exactly
  ``"fp32"`` on other devices. TF32 is switched on for the forward passes only and restored
  after, so other code in the process keeps its setting.

Only the network forward passes run under autocast; intensity preprocessing, resampling and
thresholding stay in float32, and the random-Fourier positional encodings run in float32
whatever the precision (their phases reach tens of radians, which bf16 would blur by ~0.1 rad:
see :func:`keep_float32` and ``_3d_sam_blocks.RandomFourierPE``). Masks come back as bool and
fed-back logits as float32 numpy arrays whatever the precision.

torch is imported inside functions so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

#: accepted values of the ``precision`` parameter
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "tf32")
#: precision -> torch dtype name used by autocast (fp32: no autocast)
AUTOCAST_DTYPES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16"}


def device_type(device: Any) -> str:
    """'cuda', 'cpu', 'mps'... of a torch.device or a device string such as 'cuda:1'."""
    return getattr(device, "type", None) or str(device).split(":")[0]


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` itself when it is one of ``choices``, else a ValueError naming parameter
    ``name`` and the choices."""
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {', '.join(repr(c) for c in choices)}, not {value!r}"
        )
    return value


def check_precision(precision: str) -> str:
    """``precision`` itself when it is one of :data:`PRECISIONS`, else a ValueError."""
    return check_choice("precision", precision, PRECISIONS)


def resolve_precision(precision: str, device: Any) -> str:
    """The precision used on ``device``: 'fp32', 'bf16', 'fp16' or 'tf32' ('auto' resolved;
    'tf32' is 'fp32' off CUDA).

    Raises ValueError for an unknown value and for 'fp16' on the CPU.
    """
    check_precision(precision)
    kind = device_type(device)
    if precision == "auto":
        return "bf16" if kind == "cuda" else "fp32"
    if precision == "tf32" and kind != "cuda":
        return "fp32"
    if precision == "fp16" and kind == "cpu":
        raise ValueError(
            "precision 'fp16' is not supported on the CPU (float16 autocast there "
            "is slow and inaccurate); use 'bf16' or 'fp32', or a CUDA device"
        )
    return precision


def autocast_dtype(precision: str) -> Any:
    """The torch dtype of a resolved ``precision`` ('bf16', 'fp16'), or None for 'fp32'."""
    import torch

    name = AUTOCAST_DTYPES.get(precision)
    return None if name is None else getattr(torch, name)


@contextlib.contextmanager
def forward_context(device: Any, precision: str) -> Iterator[None]:
    """``torch.inference_mode()`` plus autocast to ``precision`` (resolved) on ``device``.

    ``precision='fp32'`` gives inference mode alone (no autocast, even on CUDA); 'tf32' on
    CUDA also allows TF32 matrix products and convolutions inside the context.
    """
    import torch

    dtype = autocast_dtype(precision)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.inference_mode())
        if dtype is not None:
            stack.enter_context(torch.autocast(device_type=device_type(device), dtype=dtype))
        if precision == "tf32" and device_type(device) == "cuda":
            stack.enter_context(tf32_allowed())
        yield


@contextlib.contextmanager
def tf32_allowed() -> Iterator[None]:
    """TF32 for CUDA float32 matrix products inside the context (torch's float32 matmul
    precision 'high'), restored on exit. cuDNN convolutions use TF32 by torch's default."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def autocast_disabled(kind: str) -> contextlib.AbstractContextManager:
    """A context that switches autocast off for device type ``kind`` if it is on there."""
    import torch

    try:
        enabled = torch.is_autocast_enabled(kind)
    except RuntimeError:  # a device type without autocast ('meta'): nothing to switch off
        enabled = False
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=kind, enabled=False)


def _float32_method(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` run with autocast off and its floating tensor arguments in float32."""
    import torch

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        kind = tensors[0].device.type if tensors else "cpu"

        def to_float(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return value.float()
            return value

        with autocast_disabled(kind):
            return method(
                self, *(to_float(a) for a in args), **{k: to_float(v) for k, v in kwargs.items()}
            )

    return wrapper


_DERIVED_CLASSES: dict[tuple[type, Any], type] = {}


def swap_to_derived_class(
    module: Any, tag: Any, prefix: str, namespace: Callable[[type], dict[str, Any]]
) -> Any:
    """Swap ``module``'s class for a subclass with ``namespace(base)`` (methods wrapping the
    base class's), made once per (base class, ``tag``) and marked with ``tag``; a module whose
    class already carries ``tag`` is left alone. State dict, buffers and other methods are
    untouched. Returns ``module``."""
    base = type(module)
    if getattr(base, "_derived_tag", None) == tag:
        return module
    cls = _DERIVED_CLASSES.get((base, tag))
    if cls is None:
        cls = type(base.__name__, (base,), {**namespace(base), "_derived_tag": tag})
        cls.__qualname__ = f"{prefix}{base.__qualname__}"
        _DERIVED_CLASSES[(base, tag)] = cls
    module.__class__ = cls
    return module


def keep_float32(module: Any, *method_names: str) -> Any:
    """Make ``module``'s methods ``method_names`` always run in float32, autocast or not.

    The module's class is swapped for a subclass that wraps those methods (state dict, buffers
    and the other methods are untouched; the subclass is created once per class). Used for
    the random-Fourier positional encodings of ``segment_anything`` and ``sam2``
    (``PositionEmbeddingRandom._pe_encoding``), whose phases bf16 would blur.
    """

    def namespace(base: type) -> dict[str, Any]:
        return {
            "__doc__": f"{base.__name__} with {', '.join(method_names)} in float32.",
            **{name: _float32_method(getattr(base, name)) for name in method_names},
        }

    return swap_to_derived_class(module, ("float32", tuple(method_names)), "Float32", namespace)
