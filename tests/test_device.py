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


@pytest.mark.parametrize(
    "present, expected",
    [
        ((), "cpu"),
        (("/dev/nvidiactl",), None),
        (("/dev/nvidia0",), None),
        (("/dev/kfd",), None),
        (("/dev/dxg",), None),
    ],
)
def test_auto_is_the_cpu_on_linux_only_without_an_accelerators_device_files(
    monkeypatch, present, expected
):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(
        glob, "glob", lambda pattern: [p for p in present if fnmatch.fnmatch(p, pattern)]
    )
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


def test_a_requested_device_this_machine_lacks_is_one_line_at_the_models_construction(monkeypatch):
    torch = pytest.importorskip("torch")
    from intrabench import registry
    from intrabench.errors import UserError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        UserError,
        match=r"^device 'cuda': torch finds no CUDA GPU on this "
        r"machine \(torch .*\); use device 'auto' or 'cpu'$",
    ):
        devices.select_device("cuda")
    with pytest.raises(UserError, match="device 'cuda:1': torch finds no CUDA GPU"):
        registry.models.create("sam", {"tiny": True, "weights": "random", "device": "cuda:1"})
    for garbage in ("gpu", "cuda:x", "cuda:-1"):
        with pytest.raises(UserError, match=rf"^device '{garbage}': not a device torch knows"):
            devices.select_device(garbage)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.select_device("cuda:1") == torch.device("cuda:1")
    assert devices.select_device("cuda") == torch.device("cuda")
    with pytest.raises(
        UserError,
        match=r"^device 'cuda:2': this machine has 2 CUDA GPU\(s\), "
        r"cuda:0 to cuda:1$",
    ):
        devices.select_device("cuda:2")
    assert devices.select_device("cpu") == torch.device("cpu")


def test_a_run_asking_for_a_missing_gpu_skips_that_model_in_one_line(tmp_path, capsys, monkeypatch):
    """It failed in every unit with torch's message about NVIDIA drivers, each a traceback
    file and a retry hint."""
    torch = pytest.importorskip("torch")
    import json

    import pandas as pd

    from intrabench.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = tmp_path / "gpu.json"
    config.write_text(
        json.dumps(
            {
                "name": "gpu",
                "datasets": [{"name": "demo-phantoms", "n_cases": 1, "shape": [8, 32, 32]}],
                "models": [
                    {"name": "sam", "tiny": True, "weights": "random", "device": "cuda"},
                    "region-growing-3d",
                ],
                "prompters": ["box-per-slice", "box-3d"],
            }
        )
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert (
        "warning: model 'sam(device=cuda,tiny=True,weights=random)' skipped: device 'cuda': "
        "torch finds no CUDA GPU" in err
    )
    assert "Traceback" not in err and "failed" not in err
    assert pd.read_csv(tmp_path / "run" / "failures.csv").empty
    assert pd.read_csv(tmp_path / "run" / "problems.csv").model.tolist() == [
        "sam(device=cuda,tiny=True,weights=random)"
    ]
    assert set(pd.read_parquet(tmp_path / "run" / "results.parquet").model) == {"region-growing-3d"}
