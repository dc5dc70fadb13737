"""Header bombs and truncation in every format a run reads (#50 items 3 and 4): NRRD, Analyze
.hdr/.img, NIfTI with vox_offset 0, complex64 and RGB24 NIfTI, each refused in one line before
anything allocates; a truncated .hdr/.img label is an error, not half a lesion."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from intrabench.cli import main
from intrabench.errors import DataError
from intrabench.io.volume import read_image


def _nrrd(folder: Path) -> Path:
    path = folder / "bomb.nrrd"  # 273 bytes or so declaring 4 GB of float
    path.write_bytes(
        b"NRRD0004\ntype: float\ndimension: 3\nsizes: 1000 1000 1000\n"
        b"encoding: raw\nendian: little\nspace: left-posterior-superior\n"
        b"space directions: (1,0,0) (0,1,0) (0,0,1)\n"
        b"\n" + b"\0" * 64
    )
    return path


def _nifti(folder: Path, name: str, dtype, shape, vox_offset: float | None = None) -> Path:
    import nibabel as nib

    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    if vox_offset is not None:
        header["vox_offset"] = vox_offset
    path = folder / name
    path.write_bytes(header.binaryblock + b"\0" * 4 + b"\1" * 256)
    return path


def _analyze(folder: Path, shape=(1000, 1000, 1000), data: bytes = b"\0" * 256) -> Path:
    import nibabel as nib

    header = nib.AnalyzeHeader()
    header.set_data_shape(shape)
    header.set_data_dtype(np.int16)
    (folder / "bomb.hdr").write_bytes(header.binaryblock)
    (folder / "bomb.img").write_bytes(data)
    return folder / "bomb.hdr"


def _mha(folder: Path) -> Path:
    """A MetaImage declaring 4 GB (it said "No such file or directory" with two ITK lines)."""
    path = folder / "bomb.mha"
    path.write_bytes(
        b"ObjectType = Image\nNDims = 3\nDimSize = 1000 1000 1000\n"
        b"ElementType = MET_FLOAT\nElementDataFile = LOCAL\n" + b"\0" * 64
    )
    return path


BOMBS = {
    "mha": lambda folder: _mha(folder),
    "nrrd": lambda folder: _nrrd(folder),
    "analyze": lambda folder: _analyze(folder),
    "vox-offset-0": lambda folder: _nifti(folder, "zero.nii", np.int32, (1000, 1000, 1000), 0),
    "complex64": lambda folder: _nifti(folder, "complex.nii", np.complex64, (1000, 1000, 1000)),
    "rgb24": lambda folder: _nifti(
        folder, "rgb.nii", np.dtype([("R", "u1"), ("G", "u1"), ("B", "u1")]), (800, 800, 800)
    ),
}


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_header_bomb_of_any_format_is_one_line_fast_and_small(tmp_path, kind):
    path = BOMBS[kind](tmp_path)
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(DataError, match="truncated|more than the limit"):
        read_image(path)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seconds < 5 and peak < 50 * 2**20, (seconds, peak)


@pytest.mark.parametrize("kind", ["nrrd", "vox-offset-0"])
def test_verify_names_a_bomb_in_one_line(tmp_path, capsys, kind):
    """The issue's proof: `datasets verify` on a vox_offset-0 bomb and an NRRD bomb."""
    import SimpleITK as sitk

    image = BOMBS[kind](tmp_path / "images" if (tmp_path / "images").mkdir() is None else tmp_path)
    suffix = ".nrrd" if kind == "nrrd" else ".nii"
    target = tmp_path / "images" / f"c1{suffix}"
    image.rename(target)
    (tmp_path / "labels").mkdir()
    sitk.WriteImage(
        sitk.GetImageFromArray(np.zeros((4, 4, 4), np.uint8)),
        str(tmp_path / "labels" / "c1.nii.gz"),
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"images: images/{{case}}{suffix}\nlabels: labels/{{case}}.nii.gz\nclasses: {{lesion: 1}}\n"
    )
    started = time.perf_counter()
    assert main(["datasets", "verify", str(spec)]) == 1
    assert time.perf_counter() - started < 5
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "/c1: FAIL" in line)
    assert "truncated" in line and "Traceback" not in out


def test_a_truncated_analyze_label_is_an_error(tmp_path):
    """Half an .img: before, it read as zeros (Dice 0.989 on half a lesion)."""
    import nibabel as nib

    data = np.zeros((20, 20, 20), np.int16)
    data[5:15, 5:15, 5:15] = 1
    nib.save(nib.AnalyzeImage(data, np.eye(4)), str(tmp_path / "label.hdr"))
    whole = (tmp_path / "label.img").read_bytes()
    assert read_image(tmp_path / "label.hdr").array.sum() == 1000
    (tmp_path / "label.img").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(
        DataError,
        match="truncated: label.img holds 8000 bytes of data where the header announces 16000",
    ):
        read_image(tmp_path / "label.hdr")


def test_the_default_voxel_limit_follows_the_machines_memory(monkeypatch):
    from intrabench.io import declared_size

    monkeypatch.delenv(declared_size.LIMIT_VARIABLE, raising=False)
    monkeypatch.setattr(declared_size, "machine_memory", lambda: 8 * 2**30)  # an 8 GB laptop
    assert declared_size.max_voxels() == 8 * 2**30 // 12  # 715,827,882: a 512 x 512 x 2730 CT
    monkeypatch.setattr(declared_size, "machine_memory", lambda: 512 * 2**30)
    assert declared_size.max_voxels() == declared_size.DEFAULT_MAX_VOXELS
