"""Config validation: precise one-line messages for every kind of mistake."""

from __future__ import annotations

import json

import pytest

from intrabench.config import load_config, parse_config
from intrabench.errors import ConfigError

BASE = {"datasets": ["demo-phantoms"], "models": ["region-growing-3d"], "prompters": ["box-3d"]}


def test_valid_config_with_shorthand_and_params():
    config = parse_config(
        {**BASE, "models": [{"name": "region-growing-3d", "multiplier": 2.0}], "seeds": 3}
    )
    assert config.models[0].params == {"multiplier": 2.0}
    assert config.models[0].key == "region-growing-3d(multiplier=2.0)"
    assert config.seeds == [3]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"modles": ["x"]}, "unknown key 'modles' \\(did you mean 'models'\\?\\)"),
        (
            {"models": ["segment-everything"]},
            "unknown model 'segment-everything'.*Valid models: .*region-growing-3d",
        ),
        ({"prompters": ["box3d"]}, "unknown prompter 'box3d'. Did you mean 'box-3d'"),
        (
            {"models": [{"name": "region-growing-3d", "multplier": 2}]},
            "no parameter 'multplier' \\(did you mean 'multiplier'\\?\\)",
        ),
        ({"refinement_steps": -1}, "refinement_steps: Input should be greater than or equal to 0"),
        ({"datasets": []}, "datasets: List should have at least 1 item"),
        ({"prompters": ["box-3d", "box-3d"]}, "listed twice: box-3d"),
    ],
)
def test_mistakes_give_precise_messages(change, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **change})


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [a, b\nprompters: x\n")
    with pytest.raises(ConfigError, match="line 2 invalid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(scalar)


# --------------------------------------------------------------------------------------
# Values that used to be accepted silently
# --------------------------------------------------------------------------------------

_BASE = {"datasets": ["demo-phantoms"], "models": ["region-growing-3d"], "prompters": ["box-3d"]}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "../.."}, "cannot be a run name"),
        ({"name": "runs/a"}, "cannot be a run name"),
        ({"seeds": [0, 0]}, r"seeds listed twice: \[0\]"),
        (
            {"prompters": [{"name": "points-per-slice", "n_points": 1.5}]},
            "parameter 'n_points' = 1.5: Input should be a valid integer",
        ),
        (
            {"datasets": [{"name": "nnunet-folder", "path": "/nowhere", "target_type": "organs"}]},
            "parameter 'target_type' = 'organs': Input should be 'instance' or 'organ'",
        ),
        (
            {"datasets": [{"name": "nnunet-folder", "path": "/nowhere", "instances": "value"}]},
            "parameter 'instances' = 'value'",
        ),
    ],
)
def test_invalid_values_are_one_line_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({**_BASE, **changes})


def test_a_key_given_twice_and_a_non_utf8_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "datasets: [demo-phantoms]\nmodels: [region-growing-3d]\n"
        "prompters: [box-3d]\nrefinement_steps: 5\nrefinement_steps: 1\n"
    )
    with pytest.raises(ConfigError, match="line 5 invalid YAML: key 'refinement_steps' is given"):
        load_config(path)
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (["labels"], "expected a JSON object"),
        (
            {
                "labels": {"background": 0, "lesion": 1},
                "target_type": {"lesion": "organ"},
                "target_types": {"lesoin": "organ"},
            },
            r"target_types names \['lesoin'\]",
        ),
        (
            {"labels": {"background": 0, "lesion": 1}, "target_types": {"lesion": "organs"}},
            'each must be "instance" or "organ"',
        ),
    ],
)
def test_dataset_json_mistakes_are_named(tmp_path, meta, message):
    from intrabench import registry
    from intrabench.errors import UserError

    (tmp_path / "imagesTr").mkdir()
    (tmp_path / "labelsTr").mkdir()
    (tmp_path / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match=message):
        registry.datasets.create("nnunet-folder", {"path": str(tmp_path)})


def test_a_model_can_be_limited_to_some_datasets():
    from intrabench.engine.plan import make_plan

    config = parse_config(
        {
            "datasets": ["demo-real", {"name": "demo-phantoms", "n_cases": 1, "label": "phantoms"}],
            "models": [{"name": "region-growing-3d", "datasets": ["phantoms"]}, "random-walker-3d"],
            "prompters": ["box-3d"],
        }
    )
    config.validate_components()
    assert config.models[0].datasets == ["phantoms"] and config.models[0].params == {}
    assert config.models[0].key == "region-growing-3d"
    datasets = {spec.key: registry_dataset(spec) for spec in config.datasets}
    plan = make_plan(config, datasets)
    pairs = {(u.model.key, u.dataset.key) for u in plan.units}
    assert pairs == {
        ("region-growing-3d", "phantoms"),
        ("random-walker-3d", "phantoms"),
        ("random-walker-3d", "demo-real"),
    }
    assert [s["reason"] for s in plan.skipped] == [
        "dataset 'demo-real' left out: the config runs the model on phantoms only"
    ]
    with pytest.raises(ConfigError, match=r"datasets \['phantoms'\] are not datasets of this run"):
        parse_config({**BASE, "models": [{"name": "region-growing-3d", "datasets": ["phantoms"]}]})


def test_a_model_can_be_limited_to_some_prompters_and_refiners():
    """The demo runs MobileSAM with one click per slice and two refiners only, beside models
    that run every prompter with scribbles: each left-out pair is a skipped line."""
    from intrabench.engine.plan import make_plan

    config = parse_config(
        {
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [
                {"name": "random-walker-2d", "prompters": ["box-3d"], "refiners": []},
                {"name": "region-growing-3d", "refiners": ["scribble"]},
            ],
            "prompters": [
                "box-3d",
                {"name": "center-points-per-volume", "n_points": 1, "label": "1-click"},
            ],
            "refiners": ["scribble", {"name": "center-error-click", "label": "click"}],
            "refinement_steps": 1,
        }
    )
    config.validate_components()
    plan = make_plan(config, {spec.key: registry_dataset(spec) for spec in config.datasets})
    combos = {(u.model.key, u.prompter.key, u.refiner_key) for u in plan.units}
    assert combos == {
        ("random-walker-2d", "box-3d", "none"),
        ("region-growing-3d", "box-3d", "scribble"),
        ("region-growing-3d", "1-click", "scribble"),
    }
    reasons = {(s["model"], s["prompter"], s["refiner"]): s["reason"] for s in plan.skipped}
    assert (
        reasons[("random-walker-2d", "1-click", "")]
        == "left out: the config runs the model with box-3d only"
    )
    assert (
        reasons[("random-walker-2d", "box-3d", "click")]
        == "left out: the config refines the model with no refiner only"
    )
    assert (
        reasons[("region-growing-3d", "1-click", "click")]
        == "left out: the config refines the model with scribble only"
    )
    with pytest.raises(
        ConfigError,
        match=r"prompters \['box'\] are not prompters of this run "
        r"\(box-3d\)",
    ):
        parse_config(
            {
                **BASE,
                "models": [{"name": "random-walker-2d", "prompters": ["box"]}],
                "prompters": ["box-3d"],
            }
        ).validate_components()


def test_a_refiner_can_leave_out_the_earlier_prompts_beside_one_that_keeps_them():
    """The paper's Table 5 setting (refinement without the initial prompts) beside the default
    in one run: two rows per step, the unit keys differ, the label names each."""
    from intrabench.engine.plan import make_plan

    config = parse_config(
        {
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": ["random-walker-2d"],
            "prompters": ["box-3d"],
            "refiners": ["scribble", {"name": "scribble", "keep_previous_prompts": False}],
            "refinement_steps": 1,
        }
    )
    config.validate_components()
    assert [r.key for r in config.refiners] == ["scribble", "scribble[keep_previous_prompts=False]"]
    assert config.refiners[1].params == {}
    plan = make_plan(config, {spec.key: registry_dataset(spec) for spec in config.datasets})
    assert sorted(u.keep_previous_prompts for u in plan.units) == [False, True]
    assert len({u.key for u in plan.units}) == 2
    off = parse_config(
        {
            **BASE,
            "keep_previous_prompts": False,
            "refiners": [
                "scribble",
                {"name": "scribble", "label": "again", "keep_previous_prompts": True},
            ],
        }
    )
    off.validate_components()
    units = make_plan(off, {s.key: registry_dataset(s) for s in off.datasets}).units
    assert {(u.refiner_key, u.keep_previous_prompts) for u in units} == {
        ("scribble", False),
        ("again", True),
    }


def registry_dataset(spec):
    from intrabench import registry

    return registry.datasets.create(spec.name, spec.params)


def test_silent_acceptances_are_now_one_line_errors(tmp_path, capsys):
    """Values that used to be taken quietly (issue: reliability round two, item 5)."""
    import json

    from intrabench import registry
    from intrabench.cli import main
    from intrabench.errors import UserError

    # a folder given as the config
    with pytest.raises(ConfigError, match="is a folder, not a config file"):
        load_config(tmp_path)
    # a negative random-walker beta
    with pytest.raises(ConfigError, match="beta must be > 0"):
        registry.models.create("random-walker-2d", {"beta": -1.0})
    with pytest.raises(ConfigError, match="beta must be > 0"):
        registry.models.create("random-walker-3d", {"beta": 0})
    # dataset.json: a label 1.5, a region label
    for labels, message in (
        ({"background": 0, "lesion": 1.5}, "must be a whole number, not 1.5"),
        ({"background": 0, "tumour": [1, 2]}, "is a region \\[1, 2\\]"),
    ):
        root = tmp_path / f"data{len(message)}"
        (root / "imagesTr").mkdir(parents=True)
        (root / "labelsTr").mkdir()
        (root / "dataset.json").write_text(json.dumps({"labels": labels}))
        with pytest.raises(UserError, match=message):
            registry.datasets.create("nnunet-folder", {"path": str(root)})
    # models verify with an unknown checkpoint key
    assert main(["models", "verify", "litemedsm"]) == 2
    assert "unknown checkpoint litemedsm; known:" in capsys.readouterr().err


def test_a_large_plan_is_announced(tmp_path, capsys, caplog, monkeypatch):
    """Many seeds: one line before the run with the planned size; a case with very many
    targets: a warning naming the file."""
    from intrabench import registry
    from intrabench.cli import main
    from intrabench.datasets import nnunet_folder

    seeds = "[" + ", ".join(str(s) for s in range(150)) + "]"
    assert main(["run", "--dry-run", "--out", str(tmp_path / "o"), "--set", f"seeds={seeds}"]) == 0
    err = capsys.readouterr().err
    # the demo: litemedsam 7 prompters x 2 refiners, mobilesam 1 x 2, the classical models 7 x 1
    assert (
        "warning: 150 seeds: every case runs 150 x 30 model/prompter/refiner combinations = 4,500"
        in err
    )
    monkeypatch.setattr(nnunet_folder, "MANY_TARGETS", 1)
    with caplog.at_level("WARNING"):
        registry.datasets.create("demo-real").load("brain1")
    assert "brain1.nii.gz: 2 targets (one episode each" in caplog.text


def test_imports_finds_a_module_beside_the_config(tmp_path, monkeypatch):
    """A plugin module in the config's folder, the run started from elsewhere: found, in this
    process and in the run's worker processes."""
    import subprocess
    import sys

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "my_plugin_beside.py").write_text(
        "from intrabench.prompters.volume3d import Box3DPrompter\n"
        "from intrabench.registry import prompters\n\n\n"
        "@prompters.register\n"
        "class MyBox(Box3DPrompter):\n"
        "    name = 'my-box-beside'\n"
    )
    (folder / "run.yaml").write_text(
        "name: beside\nimports: [my_plugin_beside]\n"
        "datasets: [{name: demo-phantoms, n_cases: 1}]\n"
        "models: [region-growing-3d]\nprompters: [my-box-beside]\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "intrabench",
            "run",
            str(folder / "run.yaml"),
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "my-box-beside" in (tmp_path / "out" / "results.csv").read_text()
