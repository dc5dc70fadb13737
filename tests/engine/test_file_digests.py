"""A pinned checkpoint is hashed once while it stays the same file on disk, and hashed again
(and refused when it no longer matches) once anything about it changed."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from intrabench.io import file_digests
from intrabench.io.checkpoints import CHECKPOINTS, CheckpointError, CheckpointInfo, check_pinned


@pytest.fixture
def book(tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(file_digests.DISABLE_VARIABLE, raising=False)
    return tmp_path / "cache" / file_digests.BOOK_NAME


@pytest.fixture
def hashed(monkeypatch):
    """The paths sha256_file read, in order."""
    calls = []
    original = file_digests.sha256_file

    def counting(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(file_digests, "sha256_file", counting)
    return calls


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_file_is_hashed_once_while_it_stays_the_same_file(tmp_path, book, hashed):
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"weights" * 1000)
    assert file_digests.remembered_sha256(weights) == _sha(b"weights" * 1000)
    assert file_digests.remembered_sha256(tmp_path / "." / "net.pt") == _sha(b"weights" * 1000)
    assert hashed == [str(weights.resolve())]
    entry = json.loads(book.read_text())[str(weights.resolve())]
    assert entry["size"] == 7000 and entry["sha256"] == _sha(b"weights" * 1000)


@pytest.mark.parametrize("change", ["rewritten", "replaced", "appended", "same-size"])
def test_a_changed_file_is_hashed_again(tmp_path, book, hashed, change):
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"A" * 4096)
    first = file_digests.remembered_sha256(weights)
    stat = weights.stat()
    if change == "rewritten":
        weights.write_bytes(b"B" * 10)
    elif change == "replaced":  # another file moved over it (a new inode)
        other = tmp_path / "other.pt"
        other.write_bytes(b"C" * 4096)
        os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(other, weights)
    elif change == "appended":
        with open(weights, "ab") as handle:
            handle.write(b"!")
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    else:  # same size, same inode, a later modification time
        weights.write_bytes(b"D" * 4096)
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = file_digests.remembered_sha256(weights)
    assert again == _sha(weights.read_bytes()) != first
    assert len(hashed) == 2


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"%s": "x"}',
        '{"%s": {"sha256": "zz"}}',
        '{"%s": {"sha256": null, "size": 3}}',
    ],
)
def test_a_bad_book_is_ignored_and_rewritten(tmp_path, book, hashed, text):
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"abc")
    book.parent.mkdir(parents=True)
    book.write_text(text.replace("%s", str(weights.resolve())))
    assert file_digests.remembered_sha256(weights) == _sha(b"abc")
    assert file_digests.remembered_sha256(weights) == _sha(b"abc")
    assert len(hashed) == 1  # the second answer came from the rewritten book


def test_an_entry_whose_identity_does_not_match_is_not_trusted(tmp_path, book, hashed):
    """An entry naming the file with another modification time (or a forged hash for another
    file) is not used."""
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"abc")
    stat = weights.stat()
    book.parent.mkdir(parents=True)
    book.write_text(
        json.dumps(
            {
                str(weights.resolve()): {
                    "size": 3,
                    "mtime_ns": stat.st_mtime_ns - 1,
                    "inode": stat.st_ino,
                    "device": stat.st_dev,
                    "sha256": "0" * 64,
                }
            }
        )
    )
    assert file_digests.remembered_sha256(weights) == _sha(b"abc")
    assert hashed == [str(weights.resolve())]


def test_an_unwritable_book_and_the_switch_leave_hashing_as_it_was(tmp_path, monkeypatch, hashed):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv("INTRABENCH_CACHE", str(blocked))
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"abc")
    assert file_digests.remembered_sha256(weights) == _sha(b"abc")
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "fresh"))
    monkeypatch.setenv(file_digests.DISABLE_VARIABLE, "1")
    file_digests.remembered_sha256(weights)
    file_digests.remembered_sha256(weights)
    assert len(hashed) == 3 and not (tmp_path / "fresh").exists()


def test_a_pinned_file_swapped_after_its_first_check_is_refused(tmp_path, book, monkeypatch):
    weights = tmp_path / "fake_net.pt"
    weights.write_bytes(b"the published weights")
    monkeypatch.setitem(
        CHECKPOINTS,
        "fake-net",
        CheckpointInfo(
            "fake-net",
            "fake_net.pt",
            "https://example.org/fake_net.pt",
            sha256=_sha(b"the published weights"),
        ),
    )
    check_pinned("fake-net", weights)
    check_pinned("fake-net", weights)  # the book's answer
    swapped = tmp_path / "swapped.pt"
    swapped.write_bytes(b"other weights, same siz")
    os.replace(swapped, weights)
    with pytest.raises(
        CheckpointError,
        match=r"fake_net\.pt: sha256 [0-9a-f]{64}, expected "
        f"{_sha(b'the published weights')} for fake-net",
    ):
        check_pinned("fake-net", weights)


@pytest.mark.parametrize(
    "book_text",
    [
        "x" * 3_000_000,  # huge garbage
        '{"%s": {"sha256": "%s", "size": NaN, "mtime_ns": NaN, "inode": NaN, "device": NaN}}',
        '{"%s": {"sha256": "%s", "size": -1, "mtime_ns": -1, "inode": -1, "device": -1}}',
        '{"%s": {"sha256": {"nested": ["%s"]}}}',
        '{"%s": [[[[[[["%s"]]]]]]]}',
        "[" * 100_000 + "]" * 100_000,  # nesting too deep for the JSON parser
        '{"%s": {"sha256": "%s", "size": 1e400}}',
    ],
)
def test_a_hostile_book_is_never_trusted_nor_a_traceback(tmp_path, book, hashed, book_text):
    weights = tmp_path / "net.pt"
    weights.write_bytes(b"abc")
    book.parent.mkdir(parents=True)
    forged = "0" * 64
    book.write_text(book_text.replace("%s", str(weights.resolve()), 1).replace("%s", forged))
    assert file_digests.remembered_sha256(weights) == _sha(b"abc")
    assert hashed == [str(weights.resolve())]
