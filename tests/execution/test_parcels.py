"""Parcels: pickles whose large arrays travel through one mapped spool file, never copied."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from intrabench.engine import parcels
from intrabench.execution.parcels import pack, remove_orphans, spool_directory, unpack
from intrabench.execution.subprocess_worker import SubprocessExecutor


def _values() -> dict:
    rng = np.random.default_rng(0)
    volume = rng.normal(size=(20, 64, 64)).astype(np.float32)  # 320 KiB: out of band
    return {
        "volume": volume,
        "fortran": np.asfortranarray(rng.integers(0, 9, size=(300, 400), dtype=np.uint16)),
        "strided": volume[:, ::2],  # not contiguous: pickled inline
        "small": np.arange(5),
        "text": "kept",
    }


def test_round_trip_keeps_every_array_and_removes_the_file(tmp_path):
    value = _values()
    parcel = pack(value, str(tmp_path), "one", inline_limit=16 * 1024)
    assert parcel.path == str(tmp_path / "one")
    # the two contiguous large arrays left the stream, page-aligned after it
    assert [size for _, size in parcel.buffers] == [20 * 64 * 64 * 4, 300 * 400 * 2]
    assert all(start % mmap.ALLOCATIONGRANULARITY == 0 for start, _ in parcel.buffers)
    assert parcel.stream_bytes < 20 * 32 * 64 * 4 + 4096  # the strided copy only, inline
    back = unpack(parcel)
    assert not os.listdir(tmp_path)
    for key in ("volume", "fortran", "strided", "small"):
        np.testing.assert_array_equal(back[key], value[key])
        assert back[key].dtype == value[key].dtype
    assert back["fortran"].flags.f_contiguous
    assert back["text"] == "kept"


def test_received_arrays_point_into_the_mapping_and_are_private_and_writable(tmp_path):
    value = _values()
    back = unpack(pack(value, str(tmp_path), "one", inline_limit=16 * 1024))
    volume = back["volume"]
    assert not volume.flags.owndata  # a view of the mapped file, not a copy
    base = volume
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
    volume[0, 0, 0] = 123.0  # copy-on-write: the sender's array is untouched
    assert value["volume"][0, 0, 0] != 123.0


def test_small_values_travel_inline(tmp_path):
    parcel = pack({"a": np.arange(10)}, str(tmp_path), "x", inline_limit=16 * 1024)
    assert parcel.path is None and parcel.inline
    np.testing.assert_array_equal(unpack(parcel)["a"], np.arange(10))
    big_stream = pack(list(range(10_000)), str(tmp_path), "y", inline_limit=1024)
    assert big_stream.path is not None and not big_stream.buffers
    assert unpack(big_stream) == list(range(10_000))
    assert not os.listdir(tmp_path)


def _ended_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_orphaned_spools_of_ended_processes_are_removed_when_old(tmp_path):
    dead, alive = _ended_pid(), os.getpid()
    names = {
        "dead_old": f"{parcels.SPOOL_PREFIX}{dead}-a",
        "dead_new": f"{parcels.SPOOL_PREFIX}{dead}-b",
        "alive_old": f"{parcels.SPOOL_PREFIX}{alive}-c",
        "other": "not-a-spool-1",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
        (tmp_path / name / "answer-1").write_bytes(b"x")
    old = time.time() - 7200
    for key in ("dead_old", "alive_old", "other"):
        os.utime(tmp_path / names[key], (old, old))
    removed = remove_orphans(str(tmp_path))
    assert removed == [str(tmp_path / names["dead_old"])]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        names[k] for k in ("dead_new", "alive_old", "other")
    )


def test_a_killed_runs_spool_is_freed_at_the_next_start(tmp_path):
    """#50 item 10: a kill -9'd run left its spool in /dev/shm for an hour. A spool named with
    its owner's PID namespace and start time goes at once when that process has ended or its
    PID belongs to another process now; one of another namespace (a container sharing
    /dev/shm: its processes look ended from here) waits for the hour."""
    own = parcels._identity(os.getpid())
    if own is None:
        pytest.skip("no /proc to read process identities from")
    namespace, started = own
    dead = _ended_pid()
    names = {
        "dead": f"{parcels.SPOOL_PREFIX}{dead}-n{namespace}-s{started}-a",
        "reused": f"{parcels.SPOOL_PREFIX}{os.getpid()}-n{namespace}-s{int(started) - 1}-b",
        "alive": f"{parcels.SPOOL_PREFIX}{os.getpid()}-n{namespace}-s{started}-c",
        "elsewhere": f"{parcels.SPOOL_PREFIX}{dead}-n1{namespace}-s{started}-d",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
    removed = remove_orphans(str(tmp_path))  # all fresh: written just now
    assert sorted(removed) == sorted(str(tmp_path / names[k]) for k in ("dead", "reused"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        names[k] for k in ("alive", "elsewhere")
    )
    directory = spool_directory()
    try:
        assert os.path.basename(directory).startswith(
            f"{parcels.SPOOL_PREFIX}{os.getpid()}-n{namespace}-s{started}-"
        )
    finally:
        parcels.remove_directory(directory)


def test_a_spool_directory_is_named_after_its_process():
    directory = spool_directory()
    try:
        name = os.path.basename(directory)
        assert name.startswith(f"{parcels.SPOOL_PREFIX}{os.getpid()}-")
    finally:
        parcels.remove_directory(directory)
    assert not os.path.exists(directory)


def _shape_and_sum(array: np.ndarray) -> tuple:
    return array.shape, float(array.sum())


def _make(shape: tuple) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


def test_the_executor_sends_and_receives_large_arrays_and_leaves_no_spool():
    executor = SubprocessExecutor()
    try:
        array = _make((32, 128, 128))
        assert executor.submit(_shape_and_sum, array).result(timeout=60) == (
            array.shape,
            float(array.sum()),
        )
        back = executor.submit(_make, (32, 128, 128)).result(timeout=60)
        np.testing.assert_array_equal(back, array)
        spool = executor._spool
        assert spool is not None and os.path.isdir(spool) and not os.listdir(spool)
    finally:
        executor.shutdown()
    assert not os.path.exists(spool)


def _make_after_the_spool_is_removed(shape: tuple) -> np.ndarray:
    """What a worker's job sees when the parent stopped reading answers while it ran (the
    parent's exit after Ctrl-C or ``timeout``'s SIGTERM removes the spool)."""
    import shutil

    shutil.rmtree(os.environ["INTRABENCH_SPOOL_DIR"])
    return _make(shape)


def test_a_worker_whose_spool_was_removed_leaves_quietly(capfd):
    """A large answer with no spool to write it to: the worker exits without a traceback
    (once a run stopped reading, a Ctrl-C or ``timeout`` printed a FileNotFoundError's)."""
    executor = SubprocessExecutor()
    try:
        future = executor.submit(_make_after_the_spool_is_removed, (32, 128, 128))
        with pytest.raises(RuntimeError, match="exited with code 0 before finishing its jobs"):
            future.result(timeout=60)
    finally:
        executor.shutdown()
    assert "Traceback" not in capfd.readouterr().err


def _make_with_its_answer_path_taken(shape: tuple) -> np.ndarray:
    """A job whose answer file cannot be written: a folder holds its name (the first job's)."""
    os.mkdir(os.path.join(os.environ["INTRABENCH_SPOOL_DIR"], "answer-0"))
    return _make(shape)


def test_a_worker_that_cannot_write_an_answer_says_so_and_goes_on():
    """Any other failure to write an answer is the job's error, in one line, and the worker
    serves the next job."""
    executor = SubprocessExecutor()
    try:
        with pytest.raises(RuntimeError, match="cannot write the answer: .*Is a directory"):
            executor.submit(_make_with_its_answer_path_taken, (32, 128, 128)).result(timeout=60)
        assert executor.submit(_shape_and_sum, np.ones(3)).result(timeout=60) == ((3,), 3.0)
    finally:
        executor.shutdown()


@pytest.mark.parametrize("size", [0, 1])
def test_empty_and_tiny_arrays(tmp_path, size):
    value = np.zeros((size, 3), dtype=np.int16)
    np.testing.assert_array_equal(unpack(pack(value, str(tmp_path), "e", 16)), value)


def test_a_full_spool_file_system_overflows_to_the_temporary_directory(tmp_path, monkeypatch):
    import errno
    import tempfile

    primary = tmp_path / "shm" / f"{parcels.SPOOL_PREFIX}1-x"
    primary.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    write = parcels._write

    def full(stream, large, path):
        if path.startswith(str(primary)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(stream, large, path)

    monkeypatch.setattr(parcels, "_write", full)
    value = _values()
    parcel = pack(value, str(primary), "big", inline_limit=16 * 1024)
    assert parcel.path == str(tmp_path / "tmp" / primary.name / "big")
    np.testing.assert_array_equal(unpack(parcel)["volume"], value["volume"])
    parcels.remove_directory(str(primary))
    assert not primary.exists() and not (tmp_path / "tmp" / primary.name).exists()

    def other_error(stream, large, path):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(parcels, "_write", other_error)
    with pytest.raises(PermissionError):
        pack(value, str(primary), "big", inline_limit=16 * 1024)
