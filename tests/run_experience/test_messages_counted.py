"""Issue 69 item 4: messages that count and list say it right (every unknown name at once,
left-out pairs apart from incompatible ones, singular counts, cut lists say how many more)."""

from __future__ import annotations

import re

import pytest

from intrabench.config import parse_config
from intrabench.errors import ConfigError

BASE = {"datasets": ["demo-phantoms"], "models": ["region-growing-3d"], "prompters": ["box-3d"]}


def test_every_unknown_name_is_reported_in_one_line():
    with pytest.raises(ConfigError) as raised:
        parse_config(
            {
                "datasets": ["demo-phantom"],
                "models": ["region-growing3d", "no-such-model"],
                "prompters": ["box3d"],
                "refiners": ["scribles"],
            }
        )
    message = str(raised.value)
    assert "\n" not in message
    # the model's suggestion is the closest registered name: other tests register doubles
    # named like region growing, so only its form is checked
    assert message.startswith(
        "5 unknown names: dataset 'demo-phantom' (did you mean 'demo-phantoms'?), "
        "model 'region-growing3d' (did you mean 'region-growing"
    )
    # other tests may register a double whose name is close to 'no-such-model' as well
    assert re.search(
        r"\?\), model 'no-such-model'( \(did you mean '[^']+'\?\))?, prompter "
        r"'box3d' \(did you mean 'box-3d'\?\), refiner 'scribles' \(did you mean "
        r"'scribble'\?\); ",
        message,
    ), message


def test_one_unknown_name_keeps_its_list_of_valid_names():
    with pytest.raises(
        ConfigError, match="unknown model 'no-such-model'.*Valid models: .*region-growing-3d"
    ):
        parse_config({**BASE, "models": ["region-growing-3d", "no-such-model"]})


def _dry_run(tmp_path, capsys, text: str) -> str:
    from intrabench.cli import main

    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    return capsys.readouterr().out


def test_left_out_pairs_are_counted_apart_from_incompatible_ones(tmp_path, capsys):
    """random-walker-3d is limited to box-3d (left out with box-per-slice on purpose);
    region-growing-3d cannot take box-per-slice (incompatible)."""
    out = _dry_run(
        tmp_path,
        capsys,
        "name: c\ndatasets: [{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}]\n"
        "models: [{name: random-walker-3d, prompters: [box-3d]}, region-growing-3d]\n"
        "prompters: [box-3d, box-per-slice]\n",
    )
    assert "1 combination left out by the config; 1 incompatible combination skipped:" in out
    assert "2 work units (0 already done there), 1 seed\n" in out


def test_a_dry_run_without_refiners_names_no_refinement_steps(tmp_path, capsys):
    text = (
        "name: c\ndatasets: [{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}]\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefinement_steps: 5\n"
    )
    out = _dry_run(tmp_path, capsys, text)
    assert "1 work unit (0 already done there), 1 seed\n" in out
    assert "refinement" not in out
    out = _dry_run(tmp_path, capsys, text + "refiners: [scribble]\n")
    assert "1 work unit (0 already done there), 1 seed, 5 refinement steps\n" in out


def test_verify_of_a_config_reads_only_its_cases(tmp_path, capsys):
    from intrabench.cli import main

    config = tmp_path / "c.yaml"
    config.write_text(
        "name: c\ndatasets: [{name: demo-phantoms, n_cases: 3, shape: [12, 32, 32],"
        " n_lesions: [1, 1],"
        " cases: [phantom_001], label: ph}]\nmodels: [region-growing-3d]\n"
        "prompters: [box-3d]\n"
    )
    assert main(["datasets", "verify", str(config)]) == 0
    out = capsys.readouterr().out
    assert "phantom_001: ok, 1 target (" in out
    assert "phantom_000" not in out and "phantom_002" not in out
    assert "ph: 1/1 cases ok, 1 target\n" in out


def test_unknown_cases_list_says_how_many_more_it_cut():
    from intrabench import registry
    from intrabench.engine.plan import select_cases

    config = parse_config(
        {
            **BASE,
            "datasets": [
                {"name": "demo-phantoms", "n_cases": 13, "shape": [12, 32, 32], "cases": ["nope"]}
            ],
        }
    )
    dataset = registry.datasets.create(config.datasets[0].name, config.datasets[0].params)
    with pytest.raises(
        Exception,
        match=r"unknown case nope; available: phantom_000, .*"
        r"phantom_009, \.\.\. and 3 more$",
    ):
        select_cases(dataset, config.datasets[0])


def test_undeclared_label_values_say_how_many_more_were_cut():
    """The list of undeclared label values stopped at 10 without saying so (#69 item 4)."""
    from pathlib import Path

    import numpy as np

    from intrabench.datasets.nnunet_folder import check_label_values
    from intrabench.errors import DataError

    label = np.arange(0, 16, dtype=np.int64).reshape(1, 4, 4)  # 0, lesion 1, then 2..15
    with pytest.raises(
        DataError,
        match=r"label values \[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, "
        r"\.\.\. and 4 more\] are not declared classes",
    ):
        check_label_values(label, Path("case.nii.gz"), {"lesion": 1})


def test_wording_counts_and_cuts():
    from intrabench.wording import counted, listed

    assert [counted(n, "target") for n in (0, 1, 2)] == ["0 targets", "1 target", "2 targets"]
    assert counted(1, "case", "cases") == "1 case"
    assert listed(list("abc")) == "a, b, c"
    assert listed(list("abcdefghijklm"), limit=3) == "a, b, c, ... and 10 more"


def test_a_foreign_output_folder_says_how_many_files_were_not_named(tmp_path):
    from intrabench.errors import UserError
    from intrabench.io.run_directory import check_output_directory

    for index in range(8):
        (tmp_path / f"photo{index}.jpg").write_text("x")
    with pytest.raises(
        UserError,
        match=r"holds files this run did not write \('photo0.jpg', "
        r"'photo1.jpg', .*'photo4.jpg', \.\.\. and 3 more\)",
    ):
        check_output_directory(tmp_path)


def test_a_recipe_label_with_gaps_in_its_instance_ids_lists_them_cut():
    import numpy as np
    import SimpleITK as sitk

    from intrabench.datasets._recipe import Output, _check_label

    label = np.zeros((1, 4, 4), dtype=np.uint8)
    label.flat[:14] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15]
    image = sitk.Image(4, 4, 1, sitk.sitkInt16)
    output = Output("x", {"background": 0, "lesion": 1}, {"lesion": "instance"})
    assert _check_label(label, image, output, output.labels) == (
        "instance ids are not consecutive: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... and 4 more]"
    )


def test_an_unknown_configuration_lists_the_runs_configurations_cut():
    import pandas as pd

    from intrabench.commands.reports import _configuration
    from intrabench.errors import UserError

    rows = pd.DataFrame(
        {"model": [f"m{i:02d}" for i in range(11)], "prompter": "box-3d", "refiner": "none"}
    )
    with pytest.raises(
        UserError,
        match=r"--a x/y: not a configuration .* its configurations: "
        r"m00/box-3d/none, .*m07/box-3d/none, \.\.\. and 3 more$",
    ):
        _configuration("x/y", "--a", rows)
    assert _configuration("m03/box-3d", "--a", rows) == ("m03", "box-3d", "none")


def test_ratings_for_unknown_jobs_say_how_many_more(tmp_path):
    import pandas as pd

    from intrabench.errors import UserError
    from intrabench.review.ratings import join_ratings

    (tmp_path / "reviews" / "r1").mkdir(parents=True)
    pd.DataFrame({"job": ["j0"], "case": ["a"], "target": ["1"]}).to_csv(
        tmp_path / "reviews" / "r1" / "key.csv", index=False
    )
    ratings = pd.DataFrame({"review": "r1", "job": [f"x{i}" for i in range(7)]})
    with pytest.raises(
        UserError,
        match=r"ratings for jobs this review does not have: x0, x1, "
        r"x2, x3, x4, \.\.\. and 2 more$",
    ):
        join_ratings(ratings, tmp_path, pd.DataFrame())
