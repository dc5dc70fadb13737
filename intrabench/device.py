"""Device selection and autocast policy for torch models (CUDA > MPS > CPU)."""

from __future__ import annotations

import contextlib
from typing import Any


def select_device(requested: str | None = None) -> Any:
    """A torch.device: ``requested`` if given ('cuda', 'cuda:1', 'mps', 'cpu'), else the best one."""
    import torch

    if requested and requested != "auto":
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def inference_context(device: Any, dtype: str | None = "bfloat16"):
    """``torch.inference_mode`` plus autocast on CUDA only (never on CPU: slow and lossy there)."""
    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode())
    if getattr(device, "type", str(device)) == "cuda" and dtype:
        stack.enter_context(torch.autocast("cuda", dtype=getattr(torch, dtype)))
    return stack
