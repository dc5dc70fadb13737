"""Damaged and hostile archives: one line each, nothing left behind (#50 item 7)."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from intrabench.io.download import DamagedArchiveError, safe_extract


def _zip(path: Path, members: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
    return path


def _flip_in_data(path: Path, marker: bytes) -> None:
    """Change one byte of the first occurrence of ``marker`` (in a member's stored data)."""
    content = bytearray(path.read_bytes())
    at = content.index(marker)
    content[at] ^= 0x01
    path.write_bytes(bytes(content))


def test_a_bad_crc_is_one_line_and_leaves_nothing(tmp_path):
    archive = _zip(tmp_path / "a.zip", {"x.txt": b"HELLO WORLD " * 10}, zipfile.ZIP_STORED)
    _flip_in_data(archive, b"HELLO")
    with pytest.raises(DamagedArchiveError, match=r"a\.zip is damaged .*re-download it"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_corrupt_deflate_stream_is_one_line(tmp_path):
    data = bytes(range(256)) * 64
    archive = _zip(tmp_path / "b.zip", {"x.bin": data})
    content = bytearray(archive.read_bytes())
    start = content.index(b"x.bin") + len(b"x.bin")  # the local header's name, then the data
    for at in range(start + 10, start + 40):
        content[at] = 0xFF
    archive.write_bytes(bytes(content))
    with pytest.raises(DamagedArchiveError, match="is damaged"):
        safe_extract(archive, tmp_path / "out")


def test_overlapping_entries_are_refused(tmp_path):
    """Two central-directory entries that point at the same local data (a zip bomb's trick)."""
    archive = _zip(tmp_path / "c.zip", {"a.txt": b"A" * 1000, "b.txt": b"B" * 1000})
    content = bytearray(archive.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(content))) as bundle:
        first, second = bundle.infolist()
    central = content.index(b"PK\x01\x02", content.index(b"PK\x01\x02") + 4)  # b.txt's entry
    content[central + 42 : central + 46] = first.header_offset.to_bytes(4, "little")
    archive.write_bytes(bytes(content))
    with pytest.raises(DamagedArchiveError, match="is damaged"):
        safe_extract(archive, tmp_path / "out")


def test_a_truncated_tar_gz_is_one_line(tmp_path):
    archive = tmp_path / "d.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        data = bytes(range(256)) * 4000
        info = tarfile.TarInfo("big.bin")
        info.size = len(data)
        bundle.addfile(info, io.BytesIO(data))
    archive.write_bytes(archive.read_bytes()[:-2000])
    with pytest.raises(DamagedArchiveError, match=r"d\.tar\.gz is damaged"):
        safe_extract(archive, tmp_path / "out")


def test_size_and_ratio_are_bounded(tmp_path, monkeypatch):
    """A 1 MB zip that wrote 1 GiB: refused from the declared sizes, before writing."""
    archive = _zip(tmp_path / "e.zip", {"zeros.bin": b"\0" * 5_000_000})  # ~5 kB compressed
    with pytest.raises(DamagedArchiveError, match="times the archive's .*zip bomb"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("INTRABENCH_MAX_EXTRACT_RATIO", "100000")
    monkeypatch.setenv("INTRABENCH_MAX_EXTRACT_GB", "0.001")
    with pytest.raises(DamagedArchiveError, match="more than 0.001 GB"):
        safe_extract(archive, tmp_path / "out")
    monkeypatch.setenv("INTRABENCH_MAX_EXTRACT_GB", "1")
    assert [p.name for p in safe_extract(archive, tmp_path / "out")] == ["zeros.bin"]


def test_an_unsupported_compression_method_says_so(tmp_path):
    archive = _zip(tmp_path / "f.zip", {"x.txt": b"hello"}, zipfile.ZIP_STORED)
    content = bytearray(archive.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = content.index(signature)
        content[at + offset : at + offset + 2] = (99).to_bytes(2, "little")  # AES / unknown
    archive.write_bytes(bytes(content))
    with pytest.raises(DamagedArchiveError, match="compression method") as caught:
        safe_extract(archive, tmp_path / "out")
    assert "password" not in str(caught.value)


def test_a_member_named_like_a_marker_does_not_stop_extraction(tmp_path):
    """A member '.b.zip.extracted' in a.zip once made b.zip count as extracted."""
    from intrabench.datasets._recipe import Recipe

    raw = tmp_path / "raw"
    raw.mkdir()
    _zip(raw / "a.zip", {".b.zip.extracted": b"ok\n", "a.txt": b"a"})
    _zip(raw / "b.zip", {"b.txt": b"b"})

    class Bare(Recipe):
        key = "bare"

    target = Bare.unpack(Bare.__new__(Bare), raw)
    assert (target / "b.txt").read_bytes() == b"b" and (target / "a.txt").exists()
