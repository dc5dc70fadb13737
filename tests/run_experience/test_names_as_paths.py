"""Names that become paths (#65 item 1): labels, case ids and the prediction tree stay inside
the run folder; a name that is a path is refused in one line, naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from intrabench.cli import main
from intrabench.config import load_config
from intrabench.errors import ConfigError, UserError
from intrabench.io.run_paths import inside_run, path_component_problem, safe_file_name

BASE = (
    "name: paths\nsave_predictions: true\nrefinement_steps: 1\n"
    "datasets: [{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}]\n"
    "models: [region-growing-3d]\nprompters: [box-3d]\nrefiners: [scribble]\n"
)


def _files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


def test_labels_dot_dot_everywhere_are_refused_and_nothing_is_written(tmp_path, capsys):
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    config = deep / "run.yaml"
    config.write_text(
        BASE.replace("shape: [12, 32, 32]}", "shape: [12, 32, 32], label: '..'}")
        .replace("[region-growing-3d]", "[{name: region-growing-3d, label: '..'}]")
        .replace("[box-3d]", "[{name: box-3d, label: '..'}]")
        .replace("[scribble]", "[{name: scribble, label: '..'}]")
    )
    before = _files_under(tmp_path)
    assert main(["run", str(config), "--out", str(deep / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "datasets.0.label" in err and "'..' cannot be a label" in err
    # before: a/seed0/phantom_000__lesion_1.nii.gz, two folders above the run
    assert _files_under(tmp_path) == before


@pytest.mark.parametrize("group", ["datasets", "models", "prompters", "refiners"])
@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("..", "names a folder"),
        (".", "names a folder"),
        ("a/b", "folder separator"),
        ("a\\\\b", "folder separator"),
        ("''", "empty"),
        ('"a\\0b"', "U+0000"),
        ('"a\\e[2Jb"', "U+001B"),
        ('"\\u202eevil"', "U+202E"),
    ],
)
def test_a_label_that_is_not_one_name_is_refused_naming_its_key(tmp_path, group, label, why):
    line = {
        "datasets": "datasets: [{name: demo-phantoms, n_cases: 1, label: %s}]\n",
        "models": "models: [{name: region-growing-3d, label: %s}]\n",
        "prompters": "prompters: [{name: box-3d, label: %s}]\n",
        "refiners": "refiners: [{name: scribble, label: %s}]\n",
    }[group] % label
    kept = [text for text in BASE.splitlines(keepends=True) if not text.startswith(group)]
    (tmp_path / "run.yaml").write_text("".join(kept) + line)
    with pytest.raises(
        ConfigError, match=rf"{group}\.0\.label: .*cannot be a label: .*{re.escape(why)}"
    ):
        load_config(tmp_path / "run.yaml")


def test_a_case_id_in_the_config_that_is_a_path_is_refused(tmp_path):
    (tmp_path / "run.yaml").write_text(
        BASE.replace("shape: [12, 32, 32]}", "shape: [12, 32, 32], cases: [../up]}")
    )
    with pytest.raises(
        ConfigError,
        match=r"datasets\.0\.cases: .*'\.\./up' cannot be a case "
        r"id: it holds '/', a folder separator",
    ):
        load_config(tmp_path / "run.yaml")


def _folder_dataset(folder: Path, cases: list[str], classes: str = "{lesion: 1}") -> Path:
    """A ``folder`` dataset of one small image and label, under each of ``cases``' names."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    image = np.random.default_rng(0).normal(0, 5, (8, 24, 24)).astype(np.float32)
    label = np.zeros((8, 24, 24), np.uint8)
    image[2:6, 6:16, 6:16] += 100
    label[2:6, 6:16, 6:16] = 1
    sitk.WriteImage(sitk.GetImageFromArray(image), str(folder / "data" / "image.nii.gz"))
    sitk.WriteImage(sitk.GetImageFromArray(label), str(folder / "data" / "label.nii.gz"))
    pairs = "".join(
        f"  - {{case: '{case}', image: data/image.nii.gz, label: data/label.nii.gz}}\n"
        for case in cases
    )
    spec = folder / "spec.yaml"
    spec.write_text(f"name: mine\npairs:\n{pairs}classes: {classes}\n")
    return spec


@pytest.mark.parametrize(("case", "why"), [("..", "names a folder"), ('"a\\e]0;x\\ab"', "U+001B")])
def test_a_dataset_whose_case_id_is_a_path_is_refused_in_one_line(tmp_path, capsys, case, why):
    spec = _folder_dataset(tmp_path / "data", ["good"])
    spec.write_text(
        spec.read_text().replace(
            "pairs:\n",
            "pairs:\n  - {case: " + case + ", image: data/image.nii.gz, "
            "label: data/label.nii.gz}\n",
        )
    )
    config = tmp_path / "run.yaml"
    config.write_text(
        BASE.replace(
            "{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}",
            f"{{name: folder, spec: {spec}}}",
        )
    )
    before = _files_under(tmp_path)
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.splitlines()[-1].startswith("error: ")
    err = err.splitlines()[-1]  # after the run's banner line
    assert "has a case named" in err and why in err and "rename that case" in err
    assert not {p for p in _files_under(tmp_path) - before if "run" not in p.parts}


def test_a_prediction_folder_linked_out_of_the_run_is_never_written(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(BASE.replace("save_predictions: true", "save_predictions: false"))
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (out / "predictions").symlink_to(outside)  # a link that leads out of the run folder
    config.write_text(BASE)
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(out), "--extend"]) == 1  # the unit fails
    assert list(outside.iterdir()) == []
    failures = (out / "failures.csv").read_text()
    assert "lies outside the run folder" in failures and "refusing to write" in failures


def test_a_file_name_part_is_never_a_folder_name_and_long_ones_stay_apart():
    assert [safe_file_name(t) for t in ("..", ".", "", "a/../b")] == ["__", "_", "_", "a_.._b"]
    first, second = "x" * 280 + "A", "x" * 280 + "B"  # the same first 255 characters
    one, two = safe_file_name(first), safe_file_name(second)
    assert one != two and len(one) == len(two) == 120 and one.startswith("x" * 103 + "-")
    assert safe_file_name("x" * 120) == "x" * 120  # names that fit are as before


def test_inside_run_refuses_a_path_that_leaves_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert inside_run(run, run / "predictions" / "a.nii.gz") == run / "predictions" / "a.nii.gz"
    with pytest.raises(UserError, match="lies outside the run folder"):
        inside_run(run, run / "predictions" / ".." / ".." / "seed0" / "a.nii.gz")
    assert path_component_problem("liver_1") is None
    assert path_component_problem("\u202eevil") == "it holds the control character U+202E"
