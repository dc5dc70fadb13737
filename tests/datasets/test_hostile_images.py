"""Hostile NRRD and MetaImage headers (#72 items 1 and 4, #65 item 8): headers that crashed
SimpleITK (SIGSEGV: the process that read them died, a run with it) or hung it, text-header
bombs that took seconds, and cut zlib streams that read as whatever memory held. Each is
refused in one line before SimpleITK sees the file; real headers still read."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.errors import DataError
from intrabench.io.volume import read_image


def _nrrd(
    path: Path, fields: str, data: bytes = b"\0", *, dimension: int = 3, sizes: str = "1 1 1"
) -> Path:
    """A NRRD file of uint8 voxels whose header holds ``fields`` (lines) besides the usual."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = fields if not fields or fields.endswith("\n") else fields + "\n"
    path.write_bytes(
        f"NRRD0004\ntype: uint8\ndimension: {dimension}\nsizes: {sizes}\n"
        f"encoding: raw\n{fields}\n".encode()
        + data
    )
    return path


def _mha(path: Path, fields: str, data: bytes = b"\0") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        f"ObjectType = Image\n{fields}ElementType = MET_UCHAR\nElementDataFile = LOCAL\n".encode()
        + data
    )
    return path


#: headers that killed the reading process (exit 139) or hung it, and the words of their line
CRASHERS = {
    "dimension-12": (
        lambda p: _nrrd(p, "", dimension=12, sizes=" ".join(["1"] * 12)),
        "declares dimension '12'",
    ),
    "dimension-16": (
        lambda p: _nrrd(p, "", dimension=16, sizes=" ".join(["1"] * 16)),
        "declares dimension '16'",
    ),
    "labels-1000": (
        lambda p: _nrrd(p, "labels: " + '"a" ' * 1000),
        "'labels' has 1000 entries for 3 dimensions",
    ),
    "spacings-100000": (
        lambda p: _nrrd(p, "spacings: " + "1 " * 100_000),
        "'spacings' has 100000 entries for 3 dimensions",
    ),
    "space-origin-100001": (
        lambda p: _nrrd(
            p, "space: left-posterior-superior\nspace origin: (" + "0," * 100_000 + "0)"
        ),
        "'space origin' holds 1 vectors of up to 100001 values",
    ),
    "measurement-frame-100000": (
        lambda p: _nrrd(
            p, "space: left-posterior-superior\nmeasurement frame: " + "(1,0,0) " * 100_000
        ),
        "'measurement frame' holds 100000 vectors",
    ),
    "mha-ndims-minus-1": (
        lambda p: _mha(p.with_suffix(".mha"), "NDims = -1\nDimSize = 1 1 1\n"),
        "declares NDims '-1'",
    ),
    "mha-ndims-huge": (
        lambda p: _mha(p.with_suffix(".mha"), "NDims = 99999999999\nDimSize = 1 1 1\n"),
        "declares NDims '99999999999'",
    ),
}

_READ_EACH = """
import json, sys
from intrabench.io.volume import read_image
out = {}
for path in sys.argv[1:]:
    try:
        read_image(path)
        out[path] = "read"
    except Exception as error:
        out[path] = f"{type(error).__name__}: {error}"
print(json.dumps(out))
"""


def test_headers_that_crashed_simpleitk_are_refused_in_one_line(tmp_path):
    """Read in a child process: before the fix it died of SIGSEGV (or hung) on the first."""
    paths = {kind: make(tmp_path / f"{kind}.nrrd") for kind, (make, _) in CRASHERS.items()}
    done = subprocess.run(
        [sys.executable, "-c", _READ_EACH, *map(str, paths.values())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    messages = json.loads(done.stdout)
    for kind, path in paths.items():
        message = messages[str(path)]
        assert message.startswith("DataError: ") and CRASHERS[kind][1] in message, message
        assert "hostile header" in message and "\n" not in message


def test_per_axis_fields_of_the_right_length_still_read(tmp_path):
    path = _nrrd(
        tmp_path / "fine.nrrd",
        'spacings: 0.5 0.7 2\nlabels: "x" "y" "z"\nkinds: domain domain domain',
        bytes(range(6)),
        sizes="1 2 3",
    )
    raw = read_image(path)
    assert raw.array.shape == (3, 2, 1)
    assert raw.array.ravel().tolist() == [0, 1, 2, 3, 4, 5]
    assert raw.geometry.spacing == pytest.approx((0.5, 0.7, 2.0))


def _ascii(path: Path, fields: str, data: bytes, *, sizes: str) -> Path:
    """A NRRD file whose voxels are numbers written as text."""
    _nrrd(path, fields, data, sizes=sizes)
    path.write_bytes(path.read_bytes().replace(b"encoding: raw", b"encoding: ascii", 1))
    return path


BOMBS = {  # took 4-60 s in SimpleITK; their line's words
    "comments-1.1MB": (
        lambda p: _nrrd(p, ("# " + "x" * 60 + "\n") * 18_000),
        "header goes on past 1,048,576 bytes",
    ),
    "line-2MB": (
        lambda p: _nrrd(p, "content: " + "x" * 2_000_000),
        "header goes on past 1,048,576 bytes",
    ),
    "key-values-8192": (
        lambda p: _nrrd(p, "".join(f"key{i}:=value\n" for i in range(8192))),
        "8,192 key:=value lines, more than 4,096",
    ),
    "ascii-1000^3": (
        lambda p: _ascii(p, "", b"0 1 2\n", sizes="1000 1000 1000"),
        "6 bytes of text data cannot hold the 1,000,000,000 numbers",
    ),
    "pattern-10^9-files": (
        lambda p: _nrrd(p.with_suffix(".nhdr"), "data file: x%09d.raw 0 999999999 1", b""),
        "names 1,000,000,000 data files for 1 voxels",
    ),
}


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_text_header_bombs_are_refused_at_once(tmp_path, kind):
    make, words = BOMBS[kind]
    path = make(tmp_path / "bomb.nrrd")
    started = time.perf_counter()
    with pytest.raises(DataError, match="bomb") as error:
        read_image(path)
    assert words in str(error.value) and "\n" not in str(error.value)
    assert time.perf_counter() - started < 1.0


def test_ascii_and_key_value_headers_within_the_bounds_still_read(tmp_path):
    keys = "".join(f"key{i}:=value {i}\n" for i in range(4096))
    path = _ascii(
        tmp_path / "text.nrrd", keys.rstrip("\n"), b"7 8\n9 10\n11 12 13 14\n", sizes="2 2 2"
    )
    assert read_image(path).array.ravel().tolist() == [7, 8, 9, 10, 11, 12, 13, 14]


def _compressed_mha(
    path: Path,
    values: np.ndarray,
    stream: bytes,
    *,
    detached: bool = False,
    size: int | None = None,
) -> Path:
    """A MetaImage of uint8 ``values`` (z, y, x) whose data is ``stream``, with a
    CompressedDataSize of ``size`` (the stream's length when None; none when 0)."""
    z, y, x = values.shape
    element = path.with_suffix(".zraw").name if detached else "LOCAL"
    size = len(stream) if size is None else size
    given = f"CompressedDataSize = {size}\n" if size else ""
    header = (
        f"ObjectType = Image\nNDims = 3\nDimSize = {x} {y} {z}\n"
        f"ElementType = MET_UCHAR\nCompressedData = True\n{given}"
        f"ElementDataFile = {element}\n"
    )
    if detached:
        path.write_bytes(header.encode())
        path.with_suffix(".zraw").write_bytes(stream)
    else:
        path.write_bytes(header.encode() + stream)
    return path


VALUES = (np.arange(40 * 40 * 40) % 251).astype(np.uint8).reshape(40, 40, 40)


@pytest.mark.parametrize(
    "name, detached, framing",
    [("cut.mha", False, "zlib"), ("cut.mhd", True, "zlib"), ("cut-gzip.mha", False, "gzip")],
)
def test_a_cut_zlib_stream_in_a_metaimage_is_refused(tmp_path, name, detached, framing):
    """Before: read as a volume whose 63,745 missing voxels held whatever memory held."""
    import gzip

    stream = (
        zlib.compress(VALUES.tobytes()) if framing == "zlib" else gzip.compress(VALUES.tobytes())
    )
    path = _compressed_mha(tmp_path / name, VALUES, stream[: len(stream) // 2], detached=detached)
    with pytest.raises(DataError, match="truncated: the compressed data is cut after") as error:
        read_image(path)
    assert "where the header announces 64000" in str(error.value)


def test_a_corrupt_zlib_stream_is_refused_and_a_whole_one_reads(tmp_path):
    stream = zlib.compress(VALUES.tobytes())
    for whole in (
        _compressed_mha(tmp_path / "whole.mha", VALUES, stream),
        _compressed_mha(tmp_path / "whole.mhd", VALUES, stream, detached=True, size=0),
    ):
        assert read_image(whole).array.tobytes() == VALUES.tobytes()
    corrupt = _compressed_mha(
        tmp_path / "corrupt.mha",
        VALUES,
        stream[:2] + bytes(b ^ 0x5A for b in stream[2:40]) + stream[40:],
    )
    with pytest.raises(DataError, match="compressed data is corrupt|truncated"):
        read_image(corrupt)


@pytest.mark.parametrize(
    "size, words",
    [
        (0, "compressed data without a CompressedDataSize"),  # read as 63,745 wrong voxels
        (287, "compressed data is cut after"),  # half the stream: ITK read 63,523 wrong voxels
        (10**9, "of compressed data where the header announces a CompressedDataSize of 1000000000"),
        (-5, "compressed data without a CompressedDataSize"),
    ],
)
def test_a_compressed_data_size_that_lies_is_refused(tmp_path, size, words):
    stream = zlib.compress(VALUES.tobytes())
    assert len(stream) == 574
    path = _compressed_mha(tmp_path / "lies.mha", VALUES, stream, size=size)
    with pytest.raises(DataError, match=words):
        read_image(path)


def test_a_stream_shorter_than_declared_but_complete_is_refused(tmp_path):
    """A whole stream of 40^3 - 100 bytes where 40^3 are declared: 'ends', not 'is cut'."""
    stream = zlib.compress(VALUES.tobytes()[:-100])
    path = _compressed_mha(tmp_path / "short.mha", VALUES, stream)
    with pytest.raises(DataError, match="compressed data ends after 63900 bytes"):
        read_image(path)


def _nrrd_case(folder: Path, case: str, image: Path | None = None) -> None:
    label = np.zeros((4, 5, 6), np.uint8)
    label[1:3, 1:3, 1:3] = 1
    for sub, name in (("imagesTr", f"{case}_0000.nrrd"), ("labelsTr", f"{case}.nrrd")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        target = folder / sub / name
        if sub == "imagesTr" and image is not None:
            image.rename(target)
        else:
            sitk.WriteImage(sitk.GetImageFromArray(label), str(target))


def test_verify_names_the_12_dimension_nrrd_in_one_line_beside_a_good_case(tmp_path):
    """#72's proof: one line for the bad case, the good case ok, exit 1, in under 5 s (in a
    child process: before, it died with exit 139 and no line)."""
    folder = tmp_path / "study"
    _nrrd_case(
        folder, "bad", _nrrd(tmp_path / "d12.nrrd", "", dimension=12, sizes=" ".join(["1"] * 12))
    )
    _nrrd_case(folder, "good")
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "labels": {"background": 0, "lesion": 1},
                "numTraining": 2,
                "channel_names": {"0": "CT"},
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "intrabench",
            "datasets",
            "verify",
            str(folder),
            "--trust-modality",
        ],  # its "CT" has no air
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    bad = [line for line in lines if line.startswith(f"{folder}/bad:")]
    assert len(bad) == 1 and "FAIL" in bad[0] and "declares dimension '12'" in bad[0], lines
    assert any(line.startswith(f"{folder}/good: ok, 1 target (lesion 1)") for line in lines)
    assert "Traceback" not in done.stdout + done.stderr
