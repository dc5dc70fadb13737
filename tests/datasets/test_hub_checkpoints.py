"""``intrabench models download`` of the Hugging Face-hosted checkpoints against a loopback Hub
(``HF_ENDPOINT``): a good file, a wrong hash, a cut transfer resumed, another size announced,
another revision answered, nnInteractive's companion files, the Google Drive ones' steps, and a
plugin's own card and pinned checkpoint (#66 items 1 and 5)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from intrabench.cli import main
from intrabench.io.checkpoints import CHECKPOINTS, Companion, readiness

sys.path.insert(0, str(Path(__file__).parent))
from _hub_server import start_hub  # noqa: E402

PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "plugin_package"
BODY = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture
def hub(monkeypatch, tmp_path):
    hub, server = start_hub()
    monkeypatch.setenv("HF_ENDPOINT", hub.base)
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield hub
    server.shutdown()


def _pin(monkeypatch, key: str, body: bytes, **changes):
    """The card's checkpoint ``key`` (its repo, file and revision) with ``body``'s size and
    SHA-256 pinned instead of the real file's (which is hundreds of MB)."""
    info = dataclasses.replace(
        CHECKPOINTS[key], size=len(body), sha256=hashlib.sha256(body).hexdigest(), **changes
    )
    monkeypatch.setitem(CHECKPOINTS, key, info)
    return info, info.mirrors[0]


def test_medsam2_is_fetched_at_its_pinned_revision_and_checked(hub, monkeypatch, tmp_path, capsys):
    info, source = _pin(monkeypatch, "medsam2", BODY)
    assert source.repo == "wanglab/MedSAM2"
    assert source.revision == "e4a6f35edd7e091619cbc0750f462f1574e23955"
    hub.add(source.repo, source.path, BODY)
    assert main(["models", "download", "medsam2", "--checkpoint-dir", str(tmp_path), "-q"]) == 0
    assert "medsam2: downloaded" in capsys.readouterr().out
    assert (tmp_path / "MedSAM2_latest.pt").read_bytes() == BODY
    assert not (tmp_path / ".intrabench-partial").exists()  # the staging folder is gone
    heads = [path for method, path, _ in hub.requests if method == "HEAD"]
    assert f"/wanglab/MedSAM2/resolve/{source.revision}/MedSAM2_latest.pt" in heads
    # its digest is recorded: models list says ready without hashing it again
    monkeypatch.setattr("intrabench.io.checkpoints.LIST_HASH_LIMIT", 0)
    assert readiness("medsam2", tmp_path) == "ready"


def test_a_wrong_hash_leaves_nothing_behind(hub, monkeypatch, tmp_path, capsys):
    info, source = _pin(monkeypatch, "sam-med3d-turbo", BODY)
    assert source.repo == "blueyo0/SAM-Med3D"
    other = bytes(reversed(BODY))  # the same size, other bytes
    hub.add(source.repo, source.path, other)
    assert (
        main(["models", "download", "sam-med3d-turbo", "--checkpoint-dir", str(tmp_path), "-q"])
        == 1
    )
    out = capsys.readouterr().out
    assert "sam-med3d-turbo: FAILED" in out and "sha256 mismatch" in out
    assert hashlib.sha256(other).hexdigest() in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no file, no partial


def test_a_cut_transfer_is_resumed(hub, monkeypatch, tmp_path):
    big = BODY * 24  # 24 MiB: huggingface_hub writes what came in 10 MiB pieces
    info, source = _pin(monkeypatch, "sam-med3d", big)
    hub.add(source.repo, source.path, big, cut_after=12 * 2**20)
    from intrabench.io.checkpoint_download import download_checkpoint

    path, how = download_checkpoint("sam-med3d", tmp_path, progress=False, say=lambda _: None)
    assert path.read_bytes() == big and "blueyo0/SAM-Med3D" in how
    # the first GET was cut after 12 MiB; the next asked only for what had not been written
    first, second = hub.gets("sam_med3d.pth")
    assert first is None and second == f"bytes={10 * 2**20}-"


def test_another_announced_size_is_refused_before_any_transfer(hub, monkeypatch, tmp_path, capsys):
    info, source = _pin(monkeypatch, "medsam2", BODY)
    hub.add(source.repo, source.path, BODY, announced_size=400 * 2**20)
    assert main(["models", "download", "medsam2", "--checkpoint-dir", str(tmp_path), "-q"]) == 1
    out = capsys.readouterr().out
    assert f"announced as {400 * 2**20} bytes, expected {len(BODY)}; nothing downloaded" in out
    assert hub.gets("MedSAM2_latest.pt") == []


def test_an_answer_for_another_revision_is_refused(hub, monkeypatch, tmp_path, capsys):
    info, source = _pin(monkeypatch, "medsam2", BODY)
    hub.add(source.repo, source.path, BODY)
    hub.commit = "f" * 40
    assert main(["models", "download", "medsam2", "--checkpoint-dir", str(tmp_path), "-q"]) == 1
    out = capsys.readouterr().out
    assert f"answers for revision {'f' * 40}, not the pinned {source.revision}" in out
    assert not (tmp_path / "MedSAM2_latest.pt").exists()


def test_nninteractive_comes_with_its_companion_files(hub, monkeypatch, tmp_path):
    plans = b'{"plans": 1}\n'
    info, source = _pin(
        monkeypatch,
        "nninteractive",
        BODY,
        companions=(
            Companion(
                "nnInteractive_v1.0/plans.json", len(plans), hashlib.sha256(plans).hexdigest()
            ),
        ),
    )
    assert source.repo == "MIC-DKFZ/nnInteractive"
    hub.add(source.repo, source.path, BODY)
    hub.add(source.repo, "nnInteractive_v1.0/plans.json", plans)
    from intrabench.io.checkpoint_download import download_checkpoint

    download_checkpoint("nninteractive", tmp_path, progress=False, say=lambda _: None)
    assert (tmp_path / "nnInteractive_v1.0/fold_0/checkpoint_final.pth").read_bytes() == BODY
    assert (tmp_path / "nnInteractive_v1.0/plans.json").read_bytes() == plans


def test_the_real_cards_pin_what_the_hub_serves():
    """The Hugging Face checkpoints' cards name a 40-hex revision; MedSAM2's and
    nnInteractive's size and SHA-256 are pinned, SAM-Med3D's say why not."""
    for key in ("sam-med3d", "sam-med3d-turbo", "medsam2", "nninteractive"):
        source = CHECKPOINTS[key].mirrors[0]
        assert len(source.revision) == 40, key
    assert CHECKPOINTS["medsam2"].size == 156_040_129
    assert CHECKPOINTS["nninteractive"].sha256.startswith("b3ac4421f854")
    assert "no SHA-256" in CHECKPOINTS["sam-med3d-turbo"].unpinned
    assert all(CHECKPOINTS[key].sha256 for key in CHECKPOINTS if key.startswith("sam2"))


@pytest.mark.parametrize(
    ("key", "steps"),
    [
        (
            "medsam",
            [
                "medsam_vit_b.pth is published on Google Drive only",
                "https://drive.google.com/drive/folders/1ETWmi4AiniJeWOt6HAsYgTjYv_fkgzoN",
                "gdown --folder",
                "intrabench models verify medsam",
            ],
        ),
        (
            "segvol",
            [
                "SegVol_v1.pth is published on Google Drive only",
                "drive.google.com/drive/folders/1TEJtgctH534Ko5r4i79usJvqmXVuLf54",
            ],
        ),
        (
            "sam-med2d",
            [
                "sam-med2d_b.pth is published on Google Drive only",
                "github.com/OpenGVLab/SAM-Med2D",
                "(in a browser)",
            ],
        ),
    ],
)
def test_google_drive_checkpoints_say_what_to_do(key, steps, tmp_path, capsys):
    assert main(["models", "download", key, "--checkpoint-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    for step in steps:
        assert step in out, step
    assert f"put it at {tmp_path / CHECKPOINTS[key].filename}" in out


def _intrabench(site: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "intrabench.cli", *args],
        env={**os.environ, **env, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_plugin_ships_its_card_and_pinned_checkpoint(hub, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(PLUGIN_SOURCE),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    body = b'{"offset": 0.0}\n'
    hub.add("intrabench-example/box-threshold-3d", "box_threshold_offset.json", body)
    env = {
        "HF_ENDPOINT": hub.base,
        "INTRABENCH_CHECKPOINTS": str(tmp_path / "ckpt"),
        "INTRABENCH_CACHE": str(tmp_path / "cache"),
    }

    def status() -> str:
        listing = _intrabench(site, env, "models", "list")
        assert listing.returncode == 0, listing.stderr
        row = next(
            line for line in listing.stdout.splitlines() if line.startswith("box-threshold-3d ")
        )
        assert "3D" in row and "box3d" in row and "Apache-2.0" in row  # from its card
        return row

    assert "checkpoint missing: box_threshold_offset.json" in status()
    fetched = _intrabench(site, env, "models", "download", "box-threshold-3d", "-q")
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert "box-threshold-3d-offset: downloaded" in fetched.stdout
    assert "sha256 checked" in fetched.stdout
    assert "  ready  " in status()
    (tmp_path / "ckpt" / "box_threshold_offset.json").write_bytes(b'{"offset": 9.0}\n')
    assert "checkpoint wrong: box_threshold_offset.json is not the pinned file" in status()
    verify = _intrabench(site, env, "models", "verify", "box-threshold-3d-offset")
    assert verify.returncode == 1 and "MISMATCH" in verify.stdout
