"""What machine something was measured on: host, CPU, cores, memory, GPU, torch threads.

Stored in every run's ``run.json`` (``machine``) and with every latency table, so a figure
always says where it comes from. Reading it costs no import of torch unless torch is already
imported (a run has it; ``intrabench tables`` need not): the GPU is read through NVML
(``nvidia-ml-py``: name, memory, driver, the driver's CUDA version) where it is installed, else
through torch when torch is imported; torch's own version from the package's metadata.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else :func:`platform.processor`).

    Returns:
        The model name, or the architecture (``x86_64``) when nothing better is known.
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def physical_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (None where it cannot be read).

    Returns:
        Page size x physical pages, or None.
    """
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_gib() -> float | None:
    """:func:`physical_memory_bytes` in GiB, to one decimal.

    Returns:
        The memory in GiB, or None where it cannot be read.
    """
    total = physical_memory_bytes()
    return None if total is None else round(total / 2**30, 1)


def _nvml_gpu() -> dict[str, Any] | None:
    """GPU 0 through NVML: name, memory (GiB), driver and the driver's CUDA version; None
    without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no nvidia-ml-py, no driver: no GPU seen this way
        return None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "gpu": name.decode() if isinstance(name, bytes) else str(name),
            "gpu_memory_gib": round(pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30, 1),
            "gpu_driver": driver.decode() if isinstance(driver, bytes) else str(driver),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpu_count": int(pynvml.nvmlDeviceGetCount()),
        }
    except Exception:  # a half-working NVML: what torch says, if anything
        return None
    finally:
        with contextlib.suppress(Exception):  # nothing to release
            pynvml.nvmlShutdown()


def _torch_gpu(torch: Any) -> dict[str, Any] | None:
    try:
        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device()
        properties = torch.cuda.get_device_properties(index)
        return {
            "gpu": torch.cuda.get_device_name(index),
            "gpu_memory_gib": round(properties.total_memory / 2**30, 1),
            "gpu_count": torch.cuda.device_count(),
        }
    except Exception:  # a broken CUDA set-up is no GPU here
        return None


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def describe_machine() -> dict[str, Any]:
    """The machine this process runs on, as recorded in ``run.json``.

    Returns:
        host, cpu, architecture, cores, memory_gib, gpu (its name; None without one),
        gpu_memory_gib, gpu_driver, cuda_driver (the driver's CUDA version), gpu_count, torch
        (its version), torch_cuda (the CUDA torch was built with; None when torch is not imported
        yet), torch_threads (None when torch is not imported yet), omp_num_threads (the
        environment's, or None).
    """
    torch = sys.modules.get("torch")
    gpu = _nvml_gpu() or (_torch_gpu(torch) if torch is not None else None) or {}
    threads = torch.get_num_threads() if torch is not None else None
    torch_cuda = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    return {
        "host": platform.node(),
        "cpu": cpu_name(),
        "architecture": platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpu": gpu.get("gpu"),
        "gpu_memory_gib": gpu.get("gpu_memory_gib"),
        "gpu_driver": gpu.get("gpu_driver"),
        "cuda_driver": gpu.get("cuda_driver"),
        "gpu_count": gpu.get("gpu_count"),
        "torch": _version("torch"),
        "torch_cuda": torch_cuda,
        "torch_threads": threads,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }


def machine_text(machine: dict[str, Any] | None) -> str:
    """``host 'ci-1': AMD EPYC 7B13, 2 cores, 24 GiB, no GPU, 2 torch threads``.

    Args:
        machine: A description as :func:`describe_machine` gives it (from a run's
            ``run.json``); None or empty for a run that did not record one.

    Returns:
        One line for reports and timing tables; ``"an unrecorded machine"`` without a
        description.
    """
    if not machine:
        return "an unrecorded machine"
    parts = [machine.get("cpu") or machine.get("architecture") or "CPU"]
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores")
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']:g} GiB")
    if machine.get("gpu"):
        memory = f" ({machine['gpu_memory_gib']:g} GiB)" if machine.get("gpu_memory_gib") else ""
        driver = f", driver {machine['gpu_driver']}" if machine.get("gpu_driver") else ""
        parts.append(f"GPU {machine['gpu']}{memory}{driver}")
    else:
        parts.append("no GPU")
    if machine.get("torch_threads"):
        parts.append(f"{machine['torch_threads']} torch threads")
    elif machine.get("omp_num_threads"):
        parts.append(f"OMP_NUM_THREADS={machine['omp_num_threads']}")
    return f"host '{machine.get('host', '?')}': " + ", ".join(parts)
