"""run.json's machine record names the GPU (issue #48: it said "gpu": null on an H100)."""

from __future__ import annotations

import sys
import types

from intrabench.io import machine


def _fake_nvml(
    name="NVIDIA H100 80GB HBM3", total=85_520_809_984, driver="580.159.04", cuda=13000, count=1
) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetCount = lambda: count
    nvml.nvmlDeviceGetHandleByIndex = lambda index: object()
    nvml.nvmlDeviceGetName = lambda handle: name
    nvml.nvmlSystemGetDriverVersion = lambda: driver
    nvml.nvmlSystemGetCudaDriverVersion = lambda: cuda
    nvml.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(total=total)
    return nvml


def test_the_gpu_is_recorded_through_nvml_without_importing_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    record = machine.describe_machine()
    assert record["gpu"] == "NVIDIA H100 80GB HBM3"
    assert record["gpu_memory_gib"] == 79.6
    assert record["gpu_driver"] == "580.159.04"
    assert record["cuda_driver"] == "13.0"
    assert record["gpu_count"] == 1
    assert record["torch_cuda"] is None and record["torch_threads"] is None
    assert "torch" not in sys.modules
    text = machine.machine_text(record)
    assert "GPU NVIDIA H100 80GB HBM3 (79.6 GiB), driver 580.159.04" in text


def test_no_nvml_and_no_gpu_is_no_gpu(monkeypatch):
    broken = types.ModuleType("pynvml")

    def fail():
        raise RuntimeError("NVML Shared Library Not Found")

    broken.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    record = machine.describe_machine()
    assert record["gpu"] is None and record["gpu_driver"] is None
    assert "no GPU" in machine.machine_text(record)
