"""Conversions (SEG, RTSTRUCT, series, instances) and recipe-level download/prepare edge cases."""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from pydicom.uid import generate_uid

from intrabench.cli import main
from intrabench.datasets._convert import (
    instances_from_mask,
    read_dicom_series,
    read_rtstruct,
    read_seg,
)
from intrabench.datasets._recipe import FileInfo, Urls, ZenodoSource
from intrabench.errors import DataError
from intrabench.io import download as dl

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct, write_seg  # noqa: E402
from test_recipes import box, zip_bytes  # noqa: E402

SHAPE = (8, 16, 20)


@pytest.fixture
def ct(tmp_path):
    volume = np.arange(np.prod(SHAPE), dtype=np.int16).reshape(SHAPE) % 500
    sources = write_ct(
        tmp_path / "ct",
        volume,
        spacing=(0.8, 0.7, 2.5),
        origin=(-10, 20, 30),
        patient="P",
        study_uid=generate_uid(),
    )
    return sources, read_dicom_series(tmp_path / "ct"), volume


def test_series_geometry_and_values(ct):
    _, image, volume = ct
    assert image.GetSize() == (20, 16, 8)
    assert image.GetSpacing() == pytest.approx((0.8, 0.7, 2.5))
    assert image.GetOrigin() == pytest.approx((-10, 20, 30))
    assert image.GetDirection() == pytest.approx((1, 0, 0, 0, 1, 0, 0, 0, 1))
    np.testing.assert_array_equal(sitk.GetArrayFromImage(image), volume)


def test_seg_on_another_grid_is_resampled(tmp_path, ct):
    sources, image, _ = ct
    a, b = box(1, 3, 2, 5, 2, 6), box(6, 7, 9, 12, 10, 19)
    write_seg(tmp_path / "seg.dcm", sources, {"A": a, "B": b})
    same = read_seg(tmp_path / "seg.dcm", image)
    assert [name for name, _ in same.values()] == ["A", "B"]
    np.testing.assert_array_equal(same[1][1], a)
    np.testing.assert_array_equal(same[2][1], b)
    flipped = sitk.Flip(image, [True, False, True])  # same voxels in space, other direction
    assert flipped.GetDirection() != image.GetDirection()
    moved = read_seg(tmp_path / "seg.dcm", flipped)
    np.testing.assert_array_equal(moved[1][1], a[::-1, :, ::-1])
    coarse = sitk.Resample(
        image,
        [10, 8, 8],
        sitk.Transform(),
        sitk.sitkNearestNeighbor,
        image.GetOrigin(),
        (1.6, 1.4, 2.5),
        image.GetDirection(),
    )
    halved = read_seg(tmp_path / "seg.dcm", coarse)[2][1]
    np.testing.assert_array_equal(halved, b[:, ::2, ::2])


def test_seg_with_omitted_empty_frames_keeps_slice_positions(tmp_path, ct):
    sources, image, _ = ct
    gappy = (
        box(2, 3, 2, 5, 2, 6) | box(4, 5, 2, 5, 2, 6) | box(7, 8, 3, 4, 3, 4)
    )  # no frame at 3, 5, 6
    write_seg(tmp_path / "seg.dcm", sources, {"A": gappy})
    np.testing.assert_array_equal(read_seg(tmp_path / "seg.dcm", image)[1][1], gappy)


def test_corrupt_seg_is_a_data_error(tmp_path, ct):
    sources, image, _ = ct
    write_seg(tmp_path / "seg.dcm", sources, {"A": box(1, 3, 2, 5, 2, 6)})
    data = (tmp_path / "seg.dcm").read_bytes()
    (tmp_path / "seg.dcm").write_bytes(data[: len(data) - 40])
    with pytest.raises(DataError, match="seg.dcm"):
        read_seg(tmp_path / "seg.dcm", image)


def test_rtstruct_fills_polygons_with_holes(tmp_path, ct):
    sources, image, _ = ct
    write_rtstruct(
        tmp_path / "rt.dcm",
        sources,
        {"ring": [(3, 2, 10, 2, 12), (3, 4, 8, 4, 10)], "slab": [(5, 0, 1, 0, 19)]},
    )
    masks = read_rtstruct(tmp_path / "rt.dcm", image)
    expected = box(3, 4, 2, 11, 2, 13) & ~box(3, 4, 4, 9, 4, 11)
    np.testing.assert_array_equal(masks["ring"], expected)
    assert masks["slab"].sum() == 2 * 20


def test_missing_slice_is_detected(tmp_path, ct):
    folder = tmp_path / "ct"
    sorted(folder.iterdir())[3].unlink()
    with pytest.raises(DataError, match="not equally spaced"):
        read_dicom_series(folder)


def test_instances_connectivity_size_and_grouping():
    mask = np.zeros((5, 5, 5), bool)
    mask[1, 1, 1] = mask[2, 2, 2] = True  # corner neighbours: one under 26, two under 18
    assert instances_from_mask(mask, 26).max() == 1
    assert instances_from_mask(mask, 18).max() == 2
    big = np.zeros((6, 12, 12), bool)
    big[1:4, 1:5, 1:5] = True
    big[1:4, 1:5, 6:10] = True  # one voxel gap
    big[5, 11, 11] = True  # speck
    assert instances_from_mask(big, 26).max() == 3
    grouped = instances_from_mask(big, 26, min_voxels=30, dilation=1)
    assert grouped.max() == 1 and (grouped == 1).sum() == 96


def test_tcia_series_count_mismatch_is_rejected(http_server, tmp_path):
    http_server.routes["/tcia/getImage?" + urllib.parse.urlencode({"SeriesInstanceUID": "1.2"})] = (
        zip_bytes({"a.dcm": b"x", "b.dcm": b"y"})
    )
    with pytest.raises(dl.ChecksumError, match="expected 3 DICOM files, got 2"):
        dl.tcia_download_series("1.2", tmp_path / "s", http_server.url("/tcia"), 3, progress=False)
    assert not (tmp_path / "s").exists()
    dl.tcia_download_series("1.2", tmp_path / "s", http_server.url("/tcia"), 2, progress=False)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [".complete", "a.dcm", "b.dcm"]


def _record(server, data: bytes) -> None:
    server.routes["/api/records/9"] = json.dumps(
        {
            "files": [
                {
                    "key": "a.zip",
                    "size": len(data),
                    "checksum": "md5:" + hashlib.md5(data).hexdigest(),
                    "links": {"self": server.url("/files/a.zip")},
                }
            ]
        }
    ).encode()
    server.routes["/files/a.zip"] = data


def test_zenodo_source_checks_the_recipe_sha256(http_server, tmp_path):
    data = b"archive bytes" * 100
    _record(http_server, data)
    wrong = "ab" * 32
    source = ZenodoSource("9", {"a.zip": FileInfo(sha256=wrong)})
    with pytest.raises(dl.ChecksumError) as error:
        source.download(tmp_path, Urls(zenodo=http_server.base), progress=False)
    assert wrong in str(error.value) and hashlib.sha256(data).hexdigest() in str(error.value)
    assert not (tmp_path / "a.zip").exists()
    unknown = ZenodoSource("9", {"a.zip": FileInfo()})
    unknown.download(tmp_path, Urls(zenodo=http_server.base), progress=False)
    assert (tmp_path / "a.zip.sha256").read_text().split()[0] == hashlib.sha256(data).hexdigest()
    missing = ZenodoSource("9", {"b.zip": FileInfo()})
    with pytest.raises(dl.DownloadError, match="has no file 'b.zip'.*a.zip"):
        missing.download(tmp_path, Urls(zenodo=http_server.base), progress=False)


def test_encrypted_segrap_zip_asks_for_the_password(tmp_path, capsys):
    raw = tmp_path / "raw" / "segrap"
    raw.mkdir(parents=True)
    data = bytearray(zip_bytes({"x/image.nii.gz": b"0"}))
    data[6] |= 1
    data[data.rfind(b"PK\x01\x02") + 8] |= 1
    (raw / "segrap.zip").write_bytes(bytes(data))
    assert main(["datasets", "prepare", "segrap", "--root", str(tmp_path), "-q"]) == 2
    assert "INTRABENCH_SEGRAP_PASSWORD" in capsys.readouterr().err


def test_interrupted_prepare_converts_only_missing_cases(http_server, tmp_path, capsys):
    from test_recipes import build_pengwin

    root = tmp_path / "data"
    build_pengwin(http_server, tmp_path, root)
    common = ["--root", str(root), "-q"]
    assert main(["datasets", "download", "pengwin", "--zenodo-url", http_server.base, *common]) == 0
    assert main(["datasets", "prepare", "pengwin", *common]) == 0
    folder = root / "pengwin"
    marker = folder / ".intrabench-prepared.json"  # as if interrupted before the end:
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "complete": False}))
    (folder / "labelsTr" / "002.nii.gz").unlink()
    (folder / "labelsTr" / ".002.nii.gz.partial.nii.gz").write_bytes(b"junk")  # a cut write
    kept = (folder / "imagesTr" / "001_0000.nii.gz").stat().st_mtime_ns
    assert main(["datasets", "prepare", "pengwin", *common]) == 0
    assert (folder / "imagesTr" / "001_0000.nii.gz").stat().st_mtime_ns == kept
    assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == ["001.nii.gz", "002.nii.gz"]
    assert main(["datasets", "verify", "pengwin", *common]) == 0


def test_cli_download_checksum_mismatch_names_both_hashes(http_server, tmp_path, capsys):
    from test_recipes import build_pengwin

    build_pengwin(http_server, tmp_path, tmp_path / "data")
    record = json.loads(http_server.routes["/api/records/10927452"])
    good = record["files"][0]["checksum"].split(":")[1]
    record["files"][0]["checksum"] = "md5:" + "0" * 32
    http_server.routes["/api/records/10927452"] = json.dumps(record).encode()
    code = main(
        [
            "datasets",
            "download",
            "pengwin",
            "--zenodo-url",
            http_server.base,
            "--root",
            str(tmp_path / "data"),
            "-q",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert f"md5 mismatch: expected {'0' * 32}, got {good}" in err
    raw = tmp_path / "data" / "raw" / "pengwin"
    assert not (raw / record["files"][0]["key"]).exists()
    assert not (raw / (record["files"][0]["key"] + ".partial")).exists()
