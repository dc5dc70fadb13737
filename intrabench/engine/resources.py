"""What a case costs the model process: its set-up time and peak memory (docs/time-aware.md).

``timed_set_case`` measures :meth:`Model.set_case` (reading weights at first use, encoding a
3D model's image), CUDA synchronised: the *cold* part of a case's first interaction.
:class:`PeakMemory` follows one (case, model) group: the peak GPU memory allocated by torch
since the group started (``torch.cuda.max_memory_allocated`` after a reset), and the peak of
the process's resident memory sampled after each episode (Linux ``/proc/self/statm``; the
process's lifetime peak ``ru_maxrss`` elsewhere).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class CaseResources:
    """Measured for one (case, model) group: seconds in ``set_case``, peak GPU memory (MiB,
    NaN without CUDA) and peak host memory (MiB) so far."""

    setup_seconds: float
    peak_gpu_mb: float
    peak_host_mb: float


def _cuda():
    """``torch.cuda`` when this process already uses CUDA, else None (torch not imported for
    the question)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda
    return None


def synchronize_device() -> None:
    """Wait for queued CUDA work, so that a timer stopped next measures it (no-op without CUDA)."""
    cuda = _cuda()
    if cuda is not None:
        cuda.synchronize()


def timed_set_case(model, case) -> float:
    """``model.set_case(case.image)``, timed with the device synchronised before and after.

    Args:
        model: The model to set to the case.
        case: The loaded case (its ``image`` is handed to the model).

    Returns:
        The call's wall time, in seconds.
    """
    synchronize_device()
    started = time.perf_counter()
    model.set_case(case.image)
    synchronize_device()
    return time.perf_counter() - started


def resident_mb() -> float:
    """The process's resident memory now (MiB).

    Returns:
        The resident set size in MiB (2**20 bytes), from ``/proc/self/statm``; where that file
        cannot be read, the process's lifetime peak (``ru_maxrss``) instead.
    """
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        import resource

        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


class PeakMemory:
    """Peak GPU and host memory of the model process since this group started."""

    def __init__(self) -> None:
        cuda = _cuda()
        if cuda is not None:
            cuda.reset_peak_memory_stats()
        self.host_mb = resident_mb()

    def sample(self) -> None:
        """Take the process's resident memory (MB) into the peak."""
        self.host_mb = max(self.host_mb, resident_mb())

    def snapshot(self, setup_seconds: float) -> CaseResources:
        """The case's resources: its set-up seconds, peak GPU memory (MB, NaN without CUDA) and
        peak host memory (MB).

        Samples the resident memory once more first.

        Args:
            setup_seconds: The group's seconds in ``set_case`` (:func:`timed_set_case`).

        Returns:
            The resources so far: set-up seconds, peak GPU memory allocated by torch since the
            group started and peak host memory, both in MiB.
        """
        self.sample()
        cuda = _cuda()
        gpu = cuda.max_memory_allocated() / 2**20 if cuda is not None else float("nan")
        return CaseResources(float(setup_seconds), float(gpu), float(self.host_mb))
