"""What machine something was measured on: host, CPU, cores, memory, GPU, torch threads.

Stored in every run's ``run.json`` (``machine``) and with every latency table, so a figure
always says where it comes from. Reading it costs no import of torch unless torch is already
imported (a run has it; ``intrabench tables`` need not).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def physical_memory_bytes() -> int | None:
    """The machine's physical memory in bytes (None where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_gib() -> float | None:
    """:func:`physical_memory_bytes` in GiB, to one decimal."""
    total = physical_memory_bytes()
    return None if total is None else round(total / 2**30, 1)


def describe_machine() -> dict[str, Any]:
    """host, cpu, architecture, cores, memory_gib, gpu (None without CUDA), torch_threads
    (None when torch is not imported yet), omp_num_threads (the environment's, or None)."""
    torch = sys.modules.get("torch")
    gpu, threads = None, None
    if torch is not None:
        threads = torch.get_num_threads()
        try:
            if torch.cuda.is_available():
                gpu = torch.cuda.get_device_name(torch.cuda.current_device())
        except Exception:  # a broken CUDA set-up is no GPU here
            gpu = None
    return {"host": platform.node(), "cpu": cpu_name(), "architecture": platform.machine(),
            "cores": os.cpu_count(), "memory_gib": memory_gib(), "gpu": gpu,
            "torch_threads": threads, "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}


def machine_text(machine: dict[str, Any] | None) -> str:
    """``host 'ci-1': AMD EPYC 7B13, 2 cores, 24 GiB, no GPU, 2 torch threads``."""
    if not machine:
        return "an unrecorded machine"
    parts = [machine.get("cpu") or machine.get("architecture") or "CPU"]
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores")
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']:g} GiB")
    parts.append(f"GPU {machine['gpu']}" if machine.get("gpu") else "no GPU")
    if machine.get("torch_threads"):
        parts.append(f"{machine['torch_threads']} torch threads")
    elif machine.get("omp_num_threads"):
        parts.append(f"OMP_NUM_THREADS={machine['omp_num_threads']}")
    return f"host '{machine.get('host', '?')}': " + ", ".join(parts)
