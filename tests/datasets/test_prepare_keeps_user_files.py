"""`datasets prepare` writes and deletes only what it wrote (issue #65 item 2): the battery's
reproductions on ms-lesions (user files in imagesTr/labelsTr removed, an imagesTr linked to a
user's folder emptied, `--force` removing a user's label) and on a Zenodo recipe (a user's
file of an archive's name replaced by the download). Each is now one line naming the file,
with every user file kept byte for byte."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from intrabench.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_recipes import build_ms, build_pengwin  # noqa: E402

MARKER = ".intrabench-prepared.json"


def _prepare(root: Path, *more: str) -> int:
    return main(["datasets", "prepare", "ms-lesions", "--root", str(root), "-q", *more])


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links not followed) with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    return line


@pytest.fixture
def root(http_server, tmp_path) -> Path:
    root = tmp_path / "data"
    build_ms(http_server, tmp_path, root)
    return root


def _user_folder(folder: Path) -> dict[str, bytes]:
    """A user's own nnU-Net folder where the recipe's output goes."""
    (folder / "imagesTr").mkdir(parents=True)
    (folder / "labelsTr").mkdir()
    (folder / "imagesTr" / "brain_0000.nii.gz").write_bytes(b"my image")
    (folder / "labelsTr" / "brain.nii.gz").write_bytes(b"my label, drawn for a week")
    return _files(folder)


def test_user_files_in_the_output_folder_are_kept_and_named(root, capsys):
    folder = root / "ms-lesions"
    before = _user_folder(folder)
    assert _prepare(root) == 2
    line = _one_error_line(capsys)
    assert str(folder / "imagesTr") in line and "was not written by intrabench" in line
    assert f"the folder has no {MARKER}" in line and "move it out" in line
    assert _files(folder) == before
    assert not (folder / MARKER).exists()


def test_an_images_folder_linked_to_a_users_folder_is_not_emptied(root, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis_0000.nii.gz").write_bytes(b"years of work")
    (victim / "notes.txt").write_text("keep me")
    folder = root / "ms-lesions"
    folder.mkdir()
    (folder / "imagesTr").symlink_to(victim)
    assert _prepare(root) == 2
    line = _one_error_line(capsys)
    assert str(folder / "imagesTr") in line
    assert _files(victim) == {"thesis_0000.nii.gz": b"years of work", "notes.txt": b"keep me"}


def test_a_prepared_folder_whose_images_folder_became_a_link_is_refused(root, tmp_path, capsys):
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    victim = tmp_path / "victim"
    (folder / "imagesTr").rename(victim)  # the user moved it and left a link
    (folder / "imagesTr").symlink_to(victim)
    (victim / "mine_0000.nii.gz").write_bytes(b"my image")
    before = _files(victim)
    capsys.readouterr()
    assert _prepare(root, "--force") == 2
    line = _one_error_line(capsys)
    assert f"{folder / 'imagesTr'} is a link (to {victim})" in line
    assert _files(victim) == before


def test_force_keeps_a_users_label_in_a_prepared_folder(root, capsys):
    """`prepare --force` removed labelsTr/mine.nii.gz; now it names it and writes nothing."""
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    (folder / "labelsTr" / "mine.nii.gz").write_bytes(b"my label")
    before = _files(folder)
    capsys.readouterr()
    assert _prepare(root, "--force") == 2
    line = _one_error_line(capsys)
    assert f"{folder / 'labelsTr' / 'mine.nii.gz'} was not written by prepare" in line
    assert _files(folder) == before
    (folder / "labelsTr" / "mine.nii.gz").unlink()  # moved out: prepare works again
    assert _prepare(root, "--force") == 0
    assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == ["ms_1.nii.gz", "ms_2.nii.gz"]


def test_a_link_named_like_a_case_is_not_written_through(root, tmp_path, capsys):
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    mine = tmp_path / "mine.nii.gz"
    mine.write_bytes(b"my label")
    (folder / "labelsTr" / "ms_1.nii.gz").unlink()
    (folder / "labelsTr" / "ms_1.nii.gz").symlink_to(mine)
    capsys.readouterr()
    assert _prepare(root, "--force") == 2
    line = _one_error_line(capsys)
    assert "ms_1.nii.gz is not a file that prepare wrote (a link or a folder)" in line
    assert mine.read_bytes() == b"my label"


def test_the_marker_lists_what_prepare_wrote(root):
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    state = json.loads((folder / MARKER).read_text())
    assert state["complete"] is True and state["recipe"] == "ms-lesions"
    assert state["cases"] == ["ms_1", "ms_2"]
    assert sorted(state["files"]) == [
        "dataset.json",
        "imagesTr/ms_1_0000.nii.gz",
        "imagesTr/ms_2_0000.nii.gz",
        "labelsTr/ms_1.nii.gz",
        "labelsTr/ms_2.nii.gz",
    ]
    assert sorted(os.listdir(folder)) == sorted([MARKER, "dataset.json", "imagesTr", "labelsTr"])


def test_a_case_gone_from_the_download_loses_only_its_own_files(root):
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    (folder / "notes.txt").write_text("mine, beside the folders")
    extracted = root / "raw" / "ms-lesions" / "extracted" / "Patient-2"
    for path in extracted.iterdir():
        path.unlink()
    assert _prepare(root, "--force") == 0
    assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == ["ms_1.nii.gz"]
    assert sorted(p.name for p in (folder / "imagesTr").iterdir()) == ["ms_1_0000.nii.gz"]
    assert (folder / "notes.txt").read_text() == "mine, beside the folders"
    assert json.loads((folder / MARKER).read_text())["files"] == [
        "dataset.json",
        "imagesTr/ms_1_0000.nii.gz",
        "labelsTr/ms_1.nii.gz",
    ]


def test_empty_case_folders_are_adopted(root):
    folder = root / "ms-lesions"
    (folder / "imagesTr").mkdir(parents=True)
    (folder / "labelsTr").mkdir()
    assert _prepare(root) == 0
    assert sorted(p.name for p in (folder / "labelsTr").iterdir()) == ["ms_1.nii.gz", "ms_2.nii.gz"]


def test_a_folder_prepared_by_an_earlier_version_stays_up_to_date(root, capsys):
    """The first marker format (written at the end, no file list) still counts as complete,
    and its cases as the recipe's own files."""
    assert _prepare(root) == 0
    folder = root / "ms-lesions"
    (folder / MARKER).write_text(
        json.dumps({"format": 1, "cases": ["ms_1", "ms_2"], "skipped": {}})
    )
    capsys.readouterr()
    assert _prepare(root) == 0
    assert "up to date" in capsys.readouterr().out
    assert _prepare(root, "--force") == 0
    assert json.loads((folder / MARKER).read_text())["format"] == 2


@pytest.mark.parametrize(
    "marker",
    [
        "{not json",
        "[]",
        '{"cases": "ms_1"}',
        '{"format": 2, "recipe": "pengwin", "cases": [], "files": []}',
    ],
)
def test_a_marker_that_is_not_this_recipes_record_is_refused(marker, root, capsys):
    folder = root / "ms-lesions"
    before = _user_folder(folder)
    (folder / MARKER).write_text(marker)
    assert _prepare(root) == 2
    assert "cannot be read as this recipe's record of what it wrote" in _one_error_line(capsys)
    assert {k: v for k, v in _files(folder).items() if k != MARKER} == before


def test_a_users_file_of_an_archives_name_is_not_replaced_by_the_download(
    http_server, tmp_path, capsys
):
    root = tmp_path / "data"
    build_pengwin(http_server, tmp_path, root)
    mine = root / "raw" / "pengwin" / "PENGWIN_CT_train_labels.zip"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"my own labels archive")
    code = main(
        [
            "datasets",
            "download",
            "pengwin",
            "--zenodo-url",
            http_server.base,
            "--root",
            str(root),
            "-q",
        ]
    )
    assert code == 2
    line = _one_error_line(capsys)
    assert f"{mine} is already there and is not the expected file" in line
    assert mine.read_bytes() == b"my own labels archive"


def test_an_archive_does_not_replace_a_users_file_where_it_is_extracted(root, capsys):
    """The user unpacked the zip into raw/<recipe>/extracted and corrected a mask there;
    extracting the zip replaced it. Now the extraction is refused, naming the file."""
    mine = root / "raw" / "ms-lesions" / "extracted" / "Patient-1" / "1-LesionSeg-Flair.nii"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"my corrected mask")
    assert _prepare(root) == 2
    line = _one_error_line(capsys)
    assert "member 'Patient-1/1-LesionSeg-Flair.nii' would replace" in line
    assert str(mine) in line and "no extraction wrote" in line
    assert mine.read_bytes() == b"my corrected mask"
    assert sorted(p.name for p in mine.parent.iterdir()) == ["1-LesionSeg-Flair.nii"]


def test_archives_that_share_a_file_both_extract(root):
    """What an earlier archive wrote may be replaced by a later one (a readme in each)."""
    from test_recipes import zip_bytes

    raw = root / "raw" / "ms-lesions"
    (raw / "a-readme.zip").write_bytes(zip_bytes({"README.txt": b"first"}))
    (raw / "z-readme.zip").write_bytes(zip_bytes({"README.txt": b"second"}))
    assert _prepare(root) == 0
    assert (raw / "extracted" / "README.txt").read_bytes() == b"second"
    listed = json.loads((raw / ".extracted-archives" / "z-readme.zip").read_text())
    assert listed == ["README.txt"]
