"""``intrabench models list`` says "ready" only for a checkpoint whose hash is known to match:
an empty, foreign or wrongly sized file is "checkpoint wrong", a file it cannot vouch for is
"unverified" (#72 item 7, #65 item 10). Large files are not hashed while listing: their digest
is taken from the book that ``models verify``, ``models download`` and a run's load fill
(path, size, mtime, inode)."""

from __future__ import annotations

import dataclasses
import hashlib
import os

import pytest

from intrabench.cli import main
from intrabench.io import checkpoints
from intrabench.io.checkpoints import CHECKPOINTS, readiness
from intrabench.io.file_digests import known_sha256


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(tmp_path / "ckpt"))
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "ckpt").mkdir()
    return tmp_path / "ckpt"


def _listed(capsys, name: str) -> str:
    assert main(["models", "list"]) == 0
    return next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith(name + " ")
    )


def test_an_empty_or_foreign_mobilesam_checkpoint_is_not_ready(folder, capsys):
    weights = folder / "mobile_sam.pt"
    weights.write_bytes(b"")
    assert "checkpoint wrong: mobile_sam.pt is empty" in _listed(capsys, "mobilesam")
    weights.write_bytes(b"not a checkpoint")
    assert "checkpoint wrong: mobile_sam.pt is 16 bytes, expected 40728226" in _listed(
        capsys, "mobilesam"
    )
    with open(weights, "wb") as out:  # the pinned size, other bytes
        out.truncate(40_728_226)
    row = _listed(capsys, "mobilesam")
    assert "checkpoint wrong: mobile_sam.pt is not the pinned file" in row
    assert "expected 6dbb90523a35" in row and " ready " not in row


def test_a_checkpoint_without_a_pinned_hash_is_unverified(folder):
    (folder / "sam_med3d_turbo.pth").write_bytes(b"some bytes")
    assert readiness("sam-med3d-turbo") == (
        "unverified: no SHA-256 pinned for sam_med3d_turbo.pth (intrabench models verify "
        "sam-med3d-turbo prints its hash)"
    )


def test_a_large_file_is_unverified_until_hashed_then_ready_from_the_book(folder, monkeypatch):
    body = b"weights" * 1000
    monkeypatch.setitem(
        CHECKPOINTS,
        "mobilesam",
        dataclasses.replace(
            CHECKPOINTS["mobilesam"], size=len(body), sha256=hashlib.sha256(body).hexdigest()
        ),
    )
    monkeypatch.setattr(checkpoints, "LIST_HASH_LIMIT", 100)  # "too large" to hash in a listing
    weights = folder / "mobile_sam.pt"
    weights.write_bytes(body)
    assert readiness("mobilesam") == (
        "unverified: mobile_sam.pt not hashed yet (0.0 GiB; intrabench models verify mobilesam)"
    )
    assert known_sha256(weights) is None
    status, detail = checkpoints.verify("mobilesam")  # models verify: hashes, records
    assert (status, detail) == ("ok", f"sha256={hashlib.sha256(body).hexdigest()}")
    assert known_sha256(weights) == hashlib.sha256(body).hexdigest()
    assert readiness("mobilesam") == "ready"
    # the same bytes written again (a new modification time): the book no longer vouches
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert readiness("mobilesam").startswith("unverified")
    # small enough to hash: hashed while listing, and a wrong one found at once
    monkeypatch.setattr(checkpoints, "LIST_HASH_LIMIT", 2**20)
    assert readiness("mobilesam") == "ready"
    weights.write_bytes(b"W" + body[1:])
    assert readiness("mobilesam").startswith("checkpoint wrong: mobile_sam.pt is not the pinned")


def test_a_listing_hashes_nothing_large(folder, monkeypatch):
    """A file above the limit is never read by the listing: its state comes from size and the
    book only (a file of the pinned size full of zeros stays unverified, not hashed)."""
    monkeypatch.setattr(checkpoints, "LIST_HASH_LIMIT", 0)
    with open(folder / "mobile_sam.pt", "wb") as out:
        out.truncate(40_728_226)
    assert readiness("mobilesam").startswith("unverified: mobile_sam.pt not hashed yet")
    assert known_sha256(folder / "mobile_sam.pt") is None
