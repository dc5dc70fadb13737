"""Which device a model gets, told without importing torch where it can be
(``intrabench.device.device_type_without_torch``), and that the answer is torch's."""

from __future__ import annotations

import fnmatch
import glob
import sys

import pytest

from intrabench import device as devices


def test_an_explicit_request_names_its_type():
    assert devices.device_type_without_torch("cpu") == "cpu"
    assert devices.device_type_without_torch("cuda:1") == "cuda"
    assert devices.device_type_without_torch("mps") == "mps"


@pytest.mark.parametrize("present, expected", [
    ((), "cpu"), (("/dev/nvidiactl",), None), (("/dev/nvidia0",), None),
    (("/dev/kfd",), None), (("/dev/dxg",), None)])
def test_auto_is_the_cpu_on_linux_only_without_an_accelerators_device_files(monkeypatch, present,
                                                                            expected):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(glob, "glob", lambda pattern: [p for p in present
                                                       if fnmatch.fnmatch(p, pattern)])
    assert devices.device_type_without_torch("auto") == expected
    assert devices.device_type_without_torch(None) == expected


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_elsewhere_auto_asks_torch(monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    assert devices.device_type_without_torch("auto") is None


def test_the_answer_without_torch_is_torchs_on_this_machine():
    torch = pytest.importorskip("torch")
    told = devices.device_type_without_torch("auto")
    if told is not None:
        assert told == devices.select_device("auto").type
    assert not torch.cuda.is_available() or told is None
