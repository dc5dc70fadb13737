"""Device selection and autocast policy for torch models (CUDA > MPS > CPU)."""

from __future__ import annotations

import contextlib
import glob
import sys
from typing import Any

#: device files through which a process reaches an accelerator torch could select on Linux:
#: NVIDIA's driver (CUDA), AMD's kernel driver (ROCm) and WSL2's GPU paravirtualisation
ACCELERATOR_DEVICE_FILES: tuple[str, ...] = (
    "/dev/nvidiactl",
    "/dev/nvidia[0-9]*",
    "/dev/kfd",
    "/dev/dxg",
)


def computes_off_cpu(device: str | None) -> bool:
    """Whether a torch model on ``device`` computes off the CPU: 'cuda...' and 'mps' do, and
    'auto' (or None) where torch sees a CUDA device.

    Args:
        device: The model's ``device`` parameter; None: ``"auto"``.

    Returns:
        True for a GPU device.
    """
    device = "auto" if device is None else str(device)
    if device.startswith(("cuda", "mps")):
        return True
    if device != "auto":
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def select_device(requested: str | None = None) -> Any:
    """A torch.device: ``requested`` if given ('cuda', 'cuda:1', 'mps', 'cpu'), else the best
    one (CUDA, then MPS, then the CPU).

    Args:
        requested: The device asked for; None or ``"auto"``: the best one.

    Returns:
        The ``torch.device``.

    Raises:
        UserError: In one line, when the requested device cannot be used on this machine.
    """
    import torch

    if requested and requested != "auto":
        return check_device_request(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def check_device_request(requested: str) -> Any:
    """The torch.device ``requested`` names, checked against this machine.

    Refused: a name torch does not know, a CUDA device without a CUDA GPU (or in a torch built
    without CUDA), an index beyond the GPUs present, MPS off Apple silicon. Otherwise a model
    asked for 'cuda' on a CPU machine would fail in every unit with torch's message about NVIDIA
    drivers.

    Args:
        requested: The device asked for (``cpu``, ``cuda``, ``cuda:N``, ``mps``).

    Returns:
        The ``torch.device``.

    Raises:
        UserError: In one line, naming what the machine has.
    """
    import torch

    from intrabench.errors import UserError

    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError, ValueError):
        raise UserError(
            f"device '{requested}': not a device torch knows (auto, cpu, cuda, cuda:N, mps)"
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = (
                "built without CUDA"
                if torch.version.cuda is None
                else f"built for CUDA {torch.version.cuda}"
            )
            raise UserError(
                f"device '{requested}': torch finds no CUDA GPU on this machine "
                f"(torch {torch.__version__}, {built}); use device 'auto' or 'cpu'"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise UserError(
                f"device '{requested}': this machine has {count} CUDA GPU(s), "
                f"cuda:0 to cuda:{count - 1}"
            )
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise UserError(
                f"device '{requested}': MPS (Apple silicon) is not available on "
                "this machine; use device 'auto' or 'cpu'"
            )
    elif device.type != "cpu":
        raise UserError(
            f"device '{requested}': IntraBench runs models on auto, cpu, cuda, cuda:N or mps"
        )
    return device


def device_type_without_torch(requested: str | None = None) -> str | None:
    """The type ('cpu', 'cuda', 'mps') of the device :func:`select_device` will give for
    ``requested``, where it can be told without importing torch, else None.

    An explicit request names its type ('cuda:1' -> 'cuda'). For 'auto' the answer is 'cpu'
    only on Linux when none of :data:`ACCELERATOR_DEVICE_FILES` exists (without them no CUDA or
    ROCm device can be opened, so torch would pick the CPU); anywhere else (macOS and its MPS,
    Windows, a machine with a driver's device files) it is None and the caller asks torch.

    Args:
        requested: The device asked for; None or ``"auto"``: the best one.

    Returns:
        The type, or None when torch must be asked.
    """
    if requested and requested != "auto":
        return str(requested).split(":")[0]
    if not sys.platform.startswith("linux"):
        return None
    if any(glob.glob(pattern) for pattern in ACCELERATOR_DEVICE_FILES):
        return None
    return "cpu"


def inference_context(device: Any, dtype: str | None = "bfloat16"):
    """``torch.inference_mode`` plus autocast on CUDA only (never on CPU: slow and lossy there).

    Args:
        device: The ``torch.device`` (or its name) the model runs on.
        dtype: The autocast type's torch name (``"bfloat16"``, ``"float16"``); None or empty:
            no autocast.

    Returns:
        A context manager (an :class:`contextlib.ExitStack`) holding both.
    """
    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode())
    if getattr(device, "type", str(device)) == "cuda" and dtype:
        stack.enter_context(torch.autocast("cuda", dtype=getattr(torch, dtype)))
    return stack
