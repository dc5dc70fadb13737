"""The download layer against a loopback server: resume, checksums, Zenodo/TCIA, archives."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import zipfile

import pytest

from intrabench.io import download as dl


def _payload(n: int = 300_000) -> bytes:
    return bytes((i * 7919) % 251 for i in range(n))


def test_download_verifies_and_renames(http_server, tmp_path):
    data = _payload()
    http_server.routes["/f.bin"] = data
    out = dl.download(
        http_server.url("/f.bin"),
        tmp_path / "f.bin",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        progress=False,
    )
    assert out.read_bytes() == data
    assert not (tmp_path / "f.bin.partial").exists()
    # present and valid: no second request
    dl.download(
        http_server.url("/f.bin"),
        tmp_path / "f.bin",
        sha256=hashlib.sha256(data).hexdigest(),
        progress=False,
    )
    assert len(http_server.requests) == 1


def test_resume_uses_range_and_gives_identical_file(http_server, tmp_path):
    data = _payload()
    http_server.routes["/big.bin"] = data
    target = tmp_path / "big.bin"
    with pytest.raises(dl.DownloadError, match="interrupted after 100000 bytes"):
        dl.download(http_server.url("/big.bin"), target, progress=False, max_bytes=100_000)
    assert (tmp_path / "big.bin.partial").stat().st_size == 100_000
    assert not target.exists()  # a partial file is never the result
    dl.download(
        http_server.url("/big.bin"), target, md5=hashlib.md5(data).hexdigest(), progress=False
    )
    assert target.read_bytes() == data
    assert http_server.requests[-1] == ("/big.bin", "bytes=100000-")


def test_connection_cut_keeps_partial_then_resumes(http_server, tmp_path):
    data = _payload(200_000)
    http_server.routes["/cut.bin"] = data
    http_server.truncate["/cut.bin"] = 50_000
    with pytest.raises(dl.DownloadError):
        dl.download(http_server.url("/cut.bin"), tmp_path / "cut.bin", progress=False)
    assert (tmp_path / "cut.bin.partial").stat().st_size == 50_000
    dl.download(
        http_server.url("/cut.bin"),
        tmp_path / "cut.bin",
        sha256=hashlib.sha256(data).hexdigest(),
        progress=False,
    )
    assert (tmp_path / "cut.bin").read_bytes() == data
    assert http_server.requests[-1][1] == "bytes=50000-"


def test_server_without_range_restarts_from_zero(http_server, tmp_path):
    data = _payload(120_000)
    http_server.routes["/x.bin"] = data
    http_server.honour_range = False
    (tmp_path / "x.bin.partial").write_bytes(b"garbage" * 1000)
    dl.download(
        http_server.url("/x.bin"),
        tmp_path / "x.bin",
        sha256=hashlib.sha256(data).hexdigest(),
        progress=False,
    )
    assert (tmp_path / "x.bin").read_bytes() == data


def test_checksum_mismatch_names_both_hashes_and_discards(http_server, tmp_path):
    data = _payload(10_000)
    http_server.routes["/f.bin"] = data
    wrong = "0" * 64
    actual = hashlib.sha256(data).hexdigest()
    with pytest.raises(dl.ChecksumError) as error:
        dl.download(http_server.url("/f.bin"), tmp_path / "f.bin", sha256=wrong, progress=False)
    assert wrong in str(error.value) and actual in str(error.value)
    assert not (tmp_path / "f.bin").exists()
    assert not (tmp_path / "f.bin.partial").exists()


def test_http_error_is_a_user_error(http_server, tmp_path):
    with pytest.raises(dl.DownloadError, match="HTTP 404"):
        dl.download(http_server.url("/missing"), tmp_path / "m", progress=False)


def test_zenodo_record_files(http_server):
    http_server.routes["/api/records/42"] = json.dumps(
        {
            "files": [
                {
                    "key": "a.zip",
                    "size": 3,
                    "checksum": "md5:900150983cd24fb0d6963f7d28e17f72",
                    "links": {"self": http_server.url("/files/a.zip")},
                }
            ]
        }
    ).encode()
    files = dl.zenodo_record_files(42, http_server.base)
    assert files == [
        dl.RemoteFile(
            "a.zip", http_server.url("/files/a.zip"), 3, {"md5": "900150983cd24fb0d6963f7d28e17f72"}
        )
    ]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([{"key": "a.zip"}], "the answer is a list, not a record"),
        ({"files": ["a.zip"]}, "file entry 0 is a str, not a file description"),
        (
            {"files": [{"key": "a.zip", "size": "three", "links": {"self": "http://x/a.zip"}}]},
            "the size of file 'a.zip' is 'three', not a whole number",
        ),
        (
            {"files": [{"key": "a.zip", "size": -5, "links": {"self": "http://x/a.zip"}}]},
            "the size of file 'a.zip' is -5, a negative number",
        ),
        ({"files": {"entries": ["a.zip"]}}, "file entry 0 is a str"),
        ({"files": 7}, "no file list in the answer"),
    ],
)
def test_a_malformed_zenodo_answer_is_one_line(http_server, answer, message):
    http_server.routes["/api/records/43"] = json.dumps(answer).encode()
    with pytest.raises(dl.DownloadError, match=message) as error:
        dl.zenodo_record_files(43, http_server.base)
    assert "\n" not in str(error.value)


def _zip(members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, data in members.items():
            bundle.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            bundle.writestr(info, target)
    return buffer.getvalue()


def _tar(members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            bundle.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize("make", [_zip, _tar])
def test_safe_extract_writes_members(tmp_path, make):
    archive = tmp_path / "a.bin"
    archive.write_bytes(make({"d/x.txt": b"hello", "y.txt": b"yo"}, {"d/link": "x.txt"}))
    files = dl.safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "d" / "x.txt").read_bytes() == b"hello"
    assert os.readlink(tmp_path / "out" / "d" / "link") == "x.txt"
    assert len(files) == 2


@pytest.mark.parametrize("make", [_zip, _tar])
@pytest.mark.parametrize(
    "members,links,message",
    [
        ({"../evil.txt": b"x"}, None, r"leaves the destination"),
        ({"ok/../../evil.txt": b"x"}, None, r"leaves the destination"),
        ({"/tmp/evil.txt": b"x"}, None, r"absolute path"),
        ({"a.txt": b"x"}, {"d/link": "../../etc/passwd"}, r"escapes the destination"),
        ({"a.txt": b"x"}, {"link": "/etc/passwd"}, r"absolute path"),
    ],
)
def test_safe_extract_rejects_unsafe_members(tmp_path, make, members, links, message):
    archive = tmp_path / "evil.bin"
    archive.write_bytes(make(members, links))
    with pytest.raises(dl.UnsafeArchiveError, match=message):
        dl.safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written
    assert not (tmp_path / "evil.txt").exists()


def test_encrypted_zip_without_password_is_a_clear_error(tmp_path):
    # a zip whose entry claims ZipCrypto encryption (flag bit 0)
    archive = tmp_path / "enc.zip"
    archive.write_bytes(_zip({"a.txt": b"secret"}))
    raw = bytearray(archive.read_bytes())
    # set the encryption flag in the local header and the central directory entry
    raw[6] |= 1
    central = raw.rfind(b"PK\x01\x02")
    raw[central + 8] |= 1
    archive.write_bytes(bytes(raw))
    with pytest.raises(dl.UserError, match="password"):
        dl.safe_extract(archive, tmp_path / "out")


# --------------------------------------------------------------------------------------
# Chains of links and hard links (each name alone looks harmless)
# --------------------------------------------------------------------------------------


def _ordered_tar(entries: list[tuple[str, str, str | bytes]]) -> bytes:
    """A tar of (kind, name, payload) in this order: kind 'file' (bytes), 'sym' or 'hard'
    (payload = link target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as bundle:
        for kind, name, payload in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                bundle.addfile(info, io.BytesIO(payload))
            else:
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = payload
                bundle.addfile(info)
    return buffer.getvalue()


def _ordered_zip(entries: list[tuple[str, str, str | bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for kind, name, payload in entries:
            if kind == "file":
                bundle.writestr(name, payload)
            else:
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o120777 << 16
                bundle.writestr(info, payload)
    return buffer.getvalue()


CHAIN = [("sym", "d/l1", "."), ("sym", "e", "d/l1/l1/../.."), ("file", "e/x", b"escaped")]


@pytest.mark.parametrize("make", [_ordered_zip, _ordered_tar])
def test_a_chain_of_links_cannot_lead_outside(tmp_path, make):
    # d/l1 -> . is harmless; e -> d/l1/l1/../.. counts as depth 1 by name, but through the
    # links it is dest/.. ; e/x would be written next to the destination.
    archive = tmp_path / "chain.bin"
    archive.write_bytes(make(CHAIN))
    outside = tmp_path / "x"
    with pytest.raises(dl.UnsafeArchiveError, match="'e'.*outside the destination"):
        dl.safe_extract(archive, tmp_path / "out")
    assert not outside.exists()
    assert not (tmp_path / "out").exists()  # what was made is removed


def test_a_hard_link_cannot_copy_a_file_from_outside(tmp_path):
    (tmp_path / "SECRET.txt").write_text("secret")
    inner = [
        ("sym", "d/l1", "."),
        ("sym", "e", "d/l1/l1/../.."),
        ("hard", "leak.txt", "e/SECRET.txt"),
    ]
    archive = tmp_path / "leak.tar"
    archive.write_bytes(_ordered_tar(inner))
    with pytest.raises(dl.UnsafeArchiveError):
        dl.safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out" / "leak.txt").exists()
    # a hard link to a link, or to a file not extracted before it, is refused too
    for entries in (
        [("file", "a.txt", b"a"), ("sym", "s", "a.txt"), ("hard", "h", "s")],
        [("hard", "h", "later.txt"), ("file", "later.txt", b"x")],
    ):
        archive.write_bytes(_ordered_tar(entries))
        with pytest.raises(dl.UnsafeArchiveError, match="hard link"):
            dl.safe_extract(archive, tmp_path / "out2")
        assert not (tmp_path / "out2").exists()


def test_a_hard_link_to_an_extracted_file_is_a_copy(tmp_path):
    archive = tmp_path / "ok.tar"
    archive.write_bytes(_ordered_tar([("file", "d/a.txt", b"data"), ("hard", "b.txt", "d/a.txt")]))
    files = dl.safe_extract(archive, tmp_path / "out")
    assert (tmp_path / "out" / "b.txt").read_bytes() == b"data"
    assert sorted(p.name for p in files) == ["a.txt", "b.txt"]


@pytest.mark.parametrize("make", [_ordered_zip, _ordered_tar])
def test_a_refused_archive_keeps_what_was_in_the_folder(tmp_path, make):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep")
    archive = tmp_path / "chain.bin"
    archive.write_bytes(make([("file", "first.txt", b"1")] + CHAIN))
    with pytest.raises(dl.UnsafeArchiveError):
        dl.safe_extract(archive, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["mine.txt"]


@pytest.mark.parametrize("make", [_ordered_zip, _ordered_tar])
def test_a_refused_archive_leaves_a_same_named_file_that_was_there(tmp_path, make):
    """The archive writes 'mine.txt' (and a link over 'link'), then is refused: the files that
    were there before come back as they were; a successful extraction replaces them."""
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep")
    (dest / "other.txt").write_text("other")
    (dest / "link").symlink_to("other.txt")
    archive = tmp_path / "chain.bin"
    archive.write_bytes(
        make(
            [("file", "mine.txt", b"from the archive"), ("file", "link", b"a file over the link")]
            + CHAIN
        )
    )
    with pytest.raises(dl.UnsafeArchiveError):
        dl.safe_extract(archive, dest)
    assert (dest / "mine.txt").read_text() == "keep"
    assert (dest / "link").is_symlink() and os.readlink(dest / "link") == "other.txt"
    assert sorted(p.name for p in dest.iterdir()) == ["link", "mine.txt", "other.txt"]
    archive.write_bytes(make([("file", "mine.txt", b"from the archive")]))
    dl.safe_extract(archive, dest)
    assert (dest / "mine.txt").read_bytes() == b"from the archive"
    assert sorted(p.name for p in dest.iterdir()) == ["link", "mine.txt", "other.txt"]


@pytest.mark.parametrize("make", [_ordered_zip, _ordered_tar])
@pytest.mark.parametrize(
    "entries",
    [
        [("file", "a", b"x"), ("file", "a/b", b"y")],  # a file, then a folder of the same name
        [("file", "a/b", b"y"), ("file", "a", b"x")],  # a folder, then a file of the same name
    ],
)
def test_a_file_and_a_folder_of_one_name_are_one_line(tmp_path, make, entries):
    archive = tmp_path / "both.bin"
    archive.write_bytes(make(entries))
    with pytest.raises(dl.UnsafeArchiveError, match="refusing to extract") as error:
        dl.safe_extract(archive, tmp_path / "out")
    assert "'a'" in str(error.value) or "'a/b'" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_a_zenodo_file_without_any_checksum_is_refused(http_server, tmp_path):
    """A listing without md5, for a recipe without sha256: the download cannot be verified
    (an HTML page was saved as the archive and called 'verified against the record's md5')."""
    import json

    from intrabench.datasets._recipe import FileInfo, Urls, ZenodoSource

    page = b"<html>please log in</html>"
    http_server.routes["/api/records/42"] = json.dumps(
        {
            "id": "42",
            "files": [
                {
                    "key": "data.zip",
                    "size": len(page),
                    "links": {"self": http_server.url("/records/42/files/data.zip/content")},
                }
            ],
        }
    ).encode()
    http_server.routes["/records/42/files/data.zip/content"] = page
    source = ZenodoSource("42", {"data.zip": FileInfo()})
    with pytest.raises(dl.ChecksumError, match="cannot be verified"):
        source.download(tmp_path, Urls(zenodo=http_server.url("")), progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("base", ["zenodo.org", "ftp://example.org", "http://", "file:///etc"])
def test_a_malformed_service_address_is_one_line(base):
    with pytest.raises(dl.DownloadError, match="is not an http.s. address"):
        dl.zenodo_record_files("1", base)
