"""Header bombs: a tiny file whose header declares 1000^3 voxels is refused in one line, fast,
without a large allocation, by every reading path (the one-pass reader, SimpleITK,
``datasets verify``); the voxel limit covers every format."""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.cli import main
from intrabench.errors import DataError
from intrabench.io.declared_size import DEFLATE_MAX_RATIO, check_declared_size
from intrabench.io.volume import read_image, read_sitk


def _bomb(folder: Path, name: str) -> Path:
    """A NIfTI-1 header declaring 1000 x 1000 x 1000 int16 voxels, followed by 256 bytes."""
    import nibabel as nib

    header = nib.Nifti1Header()
    header.set_data_shape((1000, 1000, 1000))
    header.set_data_dtype(np.int16)
    header["vox_offset"] = 352
    content = header.binaryblock + b"\0" * 4 + b"\1" * 256
    path = folder / name
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    return path


@pytest.mark.parametrize("name", ["bomb.nii", "bomb.nii.gz"])
@pytest.mark.parametrize("reader", [read_image, read_sitk])
def test_a_header_bomb_is_one_line_fast_and_small(tmp_path, name, reader):
    path = _bomb(tmp_path, name)
    assert path.stat().st_size < 700
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(
        DataError, match="truncated: .* where the header announces 2000000352"
    ) as error:
        reader(path)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "\n" not in str(error.value)
    assert seconds < 1.0 and peak < 200 * 2**20


def test_datasets_verify_names_the_bomb_in_one_line(tmp_path, capsys):
    root = tmp_path / "data"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    _bomb(root / "imagesTr", "case_0000.nii.gz")
    label = np.zeros((4, 5, 6), np.uint8)
    label[1, 2, 3] = 1
    sitk.WriteImage(sitk.GetImageFromArray(label), str(root / "labelsTr" / "case.nii.gz"))
    (root / "dataset.json").write_text(json.dumps({"labels": {"background": 0, "lesion": 1}}))
    config = tmp_path / "c.yaml"
    config.write_text(
        f"datasets: [{{name: nnunet-folder, path: {root}}}]\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\n"
    )
    started = time.perf_counter()
    status = main(["datasets", "verify", str(config)])
    printed = capsys.readouterr()
    assert status != 0 and time.perf_counter() - started < 10
    assert "case_0000.nii.gz: truncated: " in printed.out + printed.err
    assert "Traceback" not in printed.out + printed.err


def test_plausible_files_pass_and_the_voxel_limit_covers_other_formats(tmp_path, monkeypatch):
    image = sitk.GetImageFromArray(np.zeros((4, 5, 6), np.int16))
    for name in ("ok.nii", "ok.nii.gz", "ok.nrrd"):
        sitk.WriteImage(image, str(tmp_path / name))
        check_declared_size(tmp_path / name)
        assert read_image(tmp_path / name).array.shape == (4, 5, 6)
    monkeypatch.setenv("INTRABENCH_MAX_VOXELS", "100")
    for name in ("ok.nii.gz", "ok.nrrd"):
        with pytest.raises(DataError, match=r"6 x 5 x 4 = 120 voxels, more than the limit of 100"):
            read_image(tmp_path / name)
    monkeypatch.setenv("INTRABENCH_MAX_VOXELS", "lots")
    with pytest.raises(DataError, match="is not a number of voxels"):
        read_image(tmp_path / "ok.nrrd")


def test_an_all_zero_gzip_at_the_deflate_limit_is_not_refused(tmp_path):
    """Zeros compress best (about 1030:1): a real file of zeros stays under the bound."""
    path = tmp_path / "zeros.nii.gz"
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((64, 128, 128), np.int16)), str(path))
    from intrabench.io.nifti_header import data_layout

    assert data_layout(path).end <= path.stat().st_size * DEFLATE_MAX_RATIO
    check_declared_size(path)
