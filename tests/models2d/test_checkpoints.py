"""Checkpoint handling of the 2D adapters: strict round trip, readable key diffs, missing files,
availability listing. Tiny configurations only; nothing is downloaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intrabench import registry
from intrabench.errors import ConfigError
from intrabench.io.checkpoints import CheckpointError
from intrabench.types import Box2D, SlicePrompt

from .conftest import MODEL_NAMES, tiny_model

PROMPT = SlicePrompt(
    z=6, points=np.array([[70, 60]]), labels=np.array([1], np.int8), box=Box2D(50, 40, 90, 80)
)


def _save(name: str, net, path) -> None:
    """Save as the published files are laid out: plain state dict (SAM), 'module.'-prefixed
    (a MedSAM training dump), weights under 'model' (SAM2, SAM-Med2D)."""
    state = net.state_dict()
    if name == "medsam":
        state = {f"module.{k}": v for k, v in state.items()}
    if name in ("sam2", "sam-med2d"):
        state = {"model": state, "epoch": 3}
    torch.save(state, path)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_tiny_checkpoint_round_trip(name: str, lung, tmp_path) -> None:
    source = tiny_model(name, seed=7)
    source.set_case(lung.image)
    expected = source.predict_slice(PROMPT)
    path = tmp_path / "tiny.pth"
    _save(name, source.net, path)

    loaded = registry.models.create(
        name, {"tiny": True, "checkpoint": str(path), "device": "cpu"}
    )  # seed 0 before loading
    loaded.set_case(lung.image)
    output = loaded.predict_slice(PROMPT)
    assert np.array_equal(output.mask, expected.mask)
    assert np.array_equal(output.feedback, expected.feedback)
    for key, value in source.net.state_dict().items():
        assert torch.equal(loaded.net.state_dict()[key], value), key

    other = tiny_model(name, seed=0)  # what 'loaded' was before its weights were read
    other.set_case(lung.image)
    assert not np.array_equal(other.predict_slice(PROMPT).feedback, expected.feedback)


def test_mismatched_checkpoint_gives_the_key_diff(lung, tmp_path) -> None:
    path = tmp_path / "plain_sam.pth"
    torch.save(tiny_model("sam").net.state_dict(), path)  # no adapters, 256 input
    model = registry.models.create(
        "sam-med2d", {"tiny": True, "checkpoint": str(path), "device": "cpu"}
    )
    model.set_case(lung.image)
    with pytest.raises(CheckpointError) as raised:
        model.predict_slice(PROMPT)  # weights are read at first use
    message = str(raised.value)
    assert str(path) in message and "does not fit Sam" in message
    assert "missing 12: image_encoder.blocks.0.Adapter.channel.0.weight" in message
    # 128 vs 256 input: pos_embed and the global block's relative positions differ
    assert "shape mismatch 5: " in message
    assert "image_encoder.blocks.1.attn.rel_pos_h: (15, 32) vs (31, 32)" in message
    assert "unexpected" not in message


def test_extra_keys_are_reported(tmp_path) -> None:
    state = tiny_model("sam").net.state_dict()
    state["image_encoder.blocks.9.norm1.weight"] = torch.zeros(64)
    path = tmp_path / "extra.pth"
    torch.save(state, path)
    model = registry.models.create("sam", {"tiny": True, "checkpoint": str(path), "device": "cpu"})
    with pytest.raises(CheckpointError, match=r"unexpected 1: image_encoder\.blocks\.9\.norm1"):
        _ = model.net


def test_corrupted_checkpoint(tmp_path) -> None:
    path = tmp_path / "broken.pth"
    path.write_bytes(b"PK\x03\x04 definitely not a torch archive" * 10)
    model = registry.models.create("sam", {"tiny": True, "checkpoint": str(path), "device": "cpu"})
    with pytest.raises(CheckpointError, match="cannot load checkpoint .*broken.pth"):
        _ = model.net


@pytest.mark.parametrize(
    "name,params,filename,source",
    [
        ("sam", {}, "sam_vit_h_4b8939.pth", "dl.fbaipublicfiles.com/segment_anything"),
        ("sam", {"variant": "vit_b"}, "sam_vit_b_01ec64.pth", "dl.fbaipublicfiles.com"),
        ("sam2", {}, "sam2.1_hiera_large.pt", "segment_anything_2/092824"),
        ("sam2", {"variant": "sam2-hiera-tiny"}, "sam2_hiera_tiny.pt", "segment_anything_2/072824"),
        ("medsam", {}, "medsam_vit_b.pth", "github.com/bowang-lab/MedSAM"),
        ("sam-med2d", {}, "sam-med2d_b.pth", "github.com/OpenGVLab/SAM-Med2D"),
    ],
)
def test_missing_checkpoint_fails_at_construction(name, params, filename, source, tmp_path) -> None:
    with pytest.raises(CheckpointError) as raised:
        registry.models.create(name, {**params, "checkpoint_dir": str(tmp_path)})
    message = str(raised.value)
    assert str(tmp_path / filename) in message and source in message


def test_unknown_variant_and_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown variant 'vit_x'.*vit_h"):
        registry.models.create("sam", {"variant": "vit_x"})
    with pytest.raises(ConfigError, match="weights must be"):
        registry.models.create("sam2", {"weights": "imagenet"})
    with pytest.raises(ConfigError, match="explicit checkpoint"):
        registry.models.create("medsam", {"tiny": True})


def test_availability_reflects_the_checkpoint_directory(tmp_path, monkeypatch, capsys) -> None:
    import dataclasses
    import hashlib

    from intrabench.io.checkpoints import CHECKPOINTS

    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(tmp_path))
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    sam = registry.models.get("sam")
    assert sam.availability() == f"checkpoint missing: sam_vit_h_4b8939.pth in {tmp_path}"
    (tmp_path / "sam_vit_b_01ec64.pth").write_bytes(b"x")
    assert sam.availability().endswith("(present: vit_b)")
    (tmp_path / "sam_vit_h_4b8939.pth").write_bytes(b"x")  # present, but not the pinned file
    assert sam.availability().startswith(
        "checkpoint wrong: sam_vit_h_4b8939.pth is not the pinned file"
    )
    monkeypatch.setitem(
        CHECKPOINTS,
        "sam-vit-h",
        dataclasses.replace(CHECKPOINTS["sam-vit-h"], sha256=hashlib.sha256(b"x").hexdigest()),
    )
    assert sam.availability() == "ready (also: vit_b)"
    assert (
        registry.models.get("sam-med2d")
        .availability()
        .startswith("checkpoint missing: sam-med2d_b.pth")
    )

    from intrabench.cli import main

    assert main(["models", "list"]) == 0
    listing = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "ready (also: vit_b)" in listing["sam"]
    assert "checkpoint missing: medsam_vit_b.pth" in listing["medsam"]
    assert "box2d,box3d " in listing["medsam"]
    assert "checkpoint missing: sam2.1_hiera_large.pt" in listing["sam2"]


# --------------------------------------------------------------------------------------
# A bad checkpoint costs its model, never the run; models verify loads and fits each file
# --------------------------------------------------------------------------------------


def test_a_corrupt_checkpoint_skips_its_model_and_the_run_goes_on(tmp_path, capsys):
    import json

    import pandas as pd

    from intrabench.cli import main

    bad = tmp_path / "bad.pth"
    bad.write_bytes(np.random.default_rng(0).bytes(4096))
    config = tmp_path / "c.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "bad-ckpt",
                "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
                "models": [
                    {"name": "sam", "tiny": True, "checkpoint": str(bad), "device": "cpu"},
                    "region-growing-3d",
                ],
                "prompters": ["box-3d"],
            }
        )
    )
    assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("skipped: cannot load checkpoint") == 1 and "Traceback" not in err
    rows = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert set(rows["model"]) == {"region-growing-3d"} and rows["case"].nunique() == 2


def test_models_verify_loads_and_fits_every_present_file(tmp_path, capsys):
    import pickle

    from intrabench.cli import main

    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "sam_vit_b_01ec64.pth").write_bytes(b"not the publisher's file")
    (directory / "sam2.1_hiera_tiny.pt").write_bytes(np.random.default_rng(0).bytes(2048))
    (directory / "sam-med2d_b.pth").write_bytes(np.random.default_rng(0).bytes(2048))
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (directory / "sam2.1_hiera_small.pt").write_bytes(pickle.dumps(Evil()))
    torch.save({"model": {"layer.weight": torch.zeros(2, 2)}}, directory / "SegVol_v1.pth")
    torch.save(
        registry.models.create(
            "sam-med2d", {"weights": "random", "tiny": True, "device": "cpu"}
        ).net.state_dict(),
        directory / "medsam_vit_b.pth",
    )  # a real state dict of another architecture
    assert main(["models", "verify", "--checkpoint-dir", str(directory)]) == 1
    out = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "MISMATCH" in out["sam-vit-b"] and "expected sha256 ec2df627" in out["sam-vit-b"]
    # SAM2's files are pinned now: another size or hash is a mismatch, never loaded
    assert (
        "MISMATCH" in out["sam2.1-hiera-tiny"]
        and "2048 bytes, expected 156008466" in out["sam2.1-hiera-tiny"]
    )
    assert (
        "MISMATCH" in out["sam2.1-hiera-small"]
        and "expected sha256 6d1aa6f3" in out["sam2.1-hiera-small"]
    )
    assert "UNUSABLE" in out["sam-med2d"] and "cannot load checkpoint" in out["sam-med2d"]
    assert not marker.exists()  # the pickle's code never ran
    assert "UNUSABLE" in out["segvol"] and "does not fit" in out["segvol"]
    assert "UNUSABLE" in out["medsam"] and "does not fit" in out["medsam"]
    assert out["sam-vit-h"].split()[2] == "missing"


def test_prepare_builds_the_network_that_the_first_forward_pass_would(lung) -> None:
    """The runner's ``prepare`` (beside the first case's read) builds the same network as a
    first encode: the same weights from the same seed, and the same mask."""
    prepared, lazy = tiny_model("sam", seed=3), tiny_model("sam", seed=3)
    assert prepared._net is None
    prepared.prepare()
    assert prepared._net is not None and lazy._net is None
    for model in (prepared, lazy):
        model.set_case(lung.image)
    np.testing.assert_array_equal(
        prepared.predict_slice(PROMPT).mask, lazy.predict_slice(PROMPT).mask
    )
    for (name, a), (_, b) in zip(
        prepared.net.state_dict().items(), lazy.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
