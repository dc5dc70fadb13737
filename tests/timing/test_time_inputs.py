"""Time-aware inputs are refused in one line naming the key (issue 65, item 6): seconds that
are negative, NaN, infinite, text or lists; a misspelt kind or key; a budget of 0, negative or
infinite; ``max_interactions`` 0 or 1.5; a latency table that is a missing file, not a table,
or inline for other models; a section that is a string. An edited time model in a finished
run is refused naming the file, not replaced by the defaults without a word."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from intrabench.cli import main
from intrabench.config import load_config
from intrabench.errors import ConfigError, UserError
from intrabench.timing.human import TimeModel
from intrabench.timing.table import run_time_model
from tests.run_helpers import run_config

BASE = {
    "name": "t",
    "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
    "models": ["region-growing-3d"],
    "prompters": ["box-3d"],
}

REFUSED = [
    (
        {"seconds": {"click": -1}},
        "time_model.seconds.click: Input should be greater than or equal to 0",
    ),
    (
        {"seconds": {"click": float("nan")}},
        "time_model.seconds.click: Input should be a finite number",
    ),
    (
        {"seconds": {"click": float("inf")}},
        "time_model.seconds.click: Input should be a finite number",
    ),
    ({"seconds": {"click": "2.4"}}, "time_model.seconds.click: Input should be a valid number"),
    ({"seconds": {"click": [1, 2]}}, "time_model.seconds.click: Input should be a valid number"),
    ({"seconds": {"click": True}}, "time_model.seconds.click: Input should be a valid number"),
    (
        {"seconds": {"click": 1e300}},
        "time_model.seconds.click: Input should be less than or equal to 3600",
    ),
    ({"seconds": [2.4]}, "time_model.seconds: Input should be a valid dictionary"),
    ({"seconds": {"clik": 2}}, r"unknown interaction kinds \['clik'\] \(did you mean 'click'\?\)"),
    ({"budget_per_interation": 30}, "time_model.budget_per_interation: unknown key"),
    (
        {"budget_per_interaction": 0},
        "time_model.budget_per_interaction: Input should be greater than 0",
    ),
    (
        {"budget_per_interaction": -3},
        "time_model.budget_per_interaction: Input should be greater than 0",
    ),
    (
        {"budget_per_interaction": float("inf")},
        "time_model.budget_per_interaction: Input should be a finite",
    ),
    (
        {"budget_per_interaction": "30"},
        "time_model.budget_per_interaction: Input should be a valid number",
    ),
    (
        {"seconds_per_slice_scrolled": -0.1},
        "time_model.seconds_per_slice_scrolled: Input should be greater",
    ),
    (
        {"max_interactions": 0},
        "time_model.max_interactions: Input should be greater than or equal to 1",
    ),
    ({"max_interactions": 1.5}, "time_model.max_interactions: Input should be a valid integer"),
    ({"max_interactions": "8"}, "time_model.max_interactions: Input should be a valid integer"),
    ({"max_interactions": True}, "time_model.max_interactions: Input should be a valid integer"),
    ({"waiting": "tabel"}, "time_model.waiting: Input should be 'measured' or 'table'"),
    (
        {"latency_table": {"region-growing-3d": {"warm": 0.1}}},
        "latency_table is read only with 'waiting: table'",
    ),
    ("fast", "time_model: Input should be a valid dictionary"),
    ([1], "time_model: Input should be a valid dictionary"),
]


def _config(folder: Path, time_model) -> Path:
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "time_model": time_model}))
    return path


@pytest.mark.parametrize(("time_model", "message"), REFUSED)
def test_a_wrong_time_model_in_a_config_is_refused_naming_the_key(tmp_path, time_model, message):
    with pytest.raises(ConfigError, match=message) as refusal:
        load_config(_config(tmp_path, time_model))
    assert "\n" not in str(refusal.value) and str(refusal.value).startswith(str(tmp_path))


def test_a_valid_time_model_is_read_with_its_values(tmp_path):
    model = load_config(
        _config(
            tmp_path, {"seconds": {"click": 3}, "budget_per_interaction": 20, "max_interactions": 4}
        )
    ).time_model
    assert model.seconds["click"] == 3.0 and model.seconds["scribble"] == 10.9
    assert model.budget == 80.0


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("missing.json", r"c\.yaml: time_model\.latency_table: .*missing\.json not found"),
        ("/etc/passwd", r"c\.yaml: time_model\.latency_table: /etc/passwd is not a latency table"),
        (
            {"other-model": {"warm": 0.1}},
            r"c\.yaml: time_model\.latency_table \(the config\) has no "
            "latency for the model\\(s\\) region-growing-3d; it has other-model",
        ),
        ({"region-growing-3d": {"wram": 0.1}}, "unknown key 'wram'"),
        ({"region-growing-3d": {"warm": -0.1}}, "region-growing-3d.warm = -0.1"),
    ],
)
def test_a_latency_table_that_cannot_serve_the_run_is_refused_when_the_config_is_read(
    tmp_path, table, message
):
    if not Path("/etc/passwd").is_file() and table == "/etc/passwd":
        pytest.skip("no /etc/passwd here")
    with pytest.raises(UserError, match=message):
        load_config(_config(tmp_path, {"waiting": "table", "latency_table": table}))


def test_a_latency_table_file_for_the_run_s_models_is_accepted(tmp_path):
    (tmp_path / "lat.json").write_text(
        json.dumps(
            {"format": "intrabench-latency-table/1", "models": {"region-growing-3d": {"warm": 0.2}}}
        )
    )
    model = load_config(
        _config(tmp_path, {"waiting": "table", "latency_table": "lat.json"})
    ).time_model
    assert model.latency_table == str(tmp_path / "lat.json")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("finished")
    return run_config(
        folder, yaml.safe_dump({**BASE, "refiners": ["scribble"], "refinement_steps": 1})
    )


def _edited(finished_run: Path, folder: Path, key: str, value) -> Path:
    run = folder / "run"
    shutil.copytree(finished_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["time_model"][key] = value
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    return run


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "seconds",
            {"click": -1},
            "time_model.seconds.click: Input should be greater than or equal to 0",
        ),
        (
            "budget_per_interaction",
            "30",
            "time_model.budget_per_interaction: Input should be a valid number",
        ),
        ("budget_per_interation", 30, "time_model.budget_per_interation: unknown key"),
        ("max_interactions", 1.5, "time_model.max_interactions: Input should be a valid integer"),
    ],
)
def test_an_edited_time_model_of_a_finished_run_is_refused_naming_the_file(
    finished_run, tmp_path, capsys, key, value, message
):
    run = _edited(finished_run, tmp_path, key, value)
    with pytest.raises(ConfigError, match=message) as refusal:
        run_time_model(run)
    assert str(run / "config.yaml") in str(refusal.value)
    assert main(["tables", str(run)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message.split(":")[0] in err
    assert not (run / "tables" / "time.md").exists()


def test_a_valid_edit_of_a_finished_run_is_what_its_tables_use(finished_run, tmp_path, capsys):
    run = _edited(finished_run, tmp_path, "budget_per_interaction", 10)
    assert run_time_model(run).budget == 80.0
    assert main(["tables", str(run)]) == 0
    assert "Dice AUC-time x100 (/80 s)" in (run / "tables" / "time.md").read_text()


def test_a_run_folder_without_config_gets_the_defaults_with_a_warning(
    finished_run, tmp_path, caplog
):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "config.yaml").unlink()
    assert run_time_model(run) == TimeModel()
    assert "has no config.yaml: the time tables use the default time model" in caplog.text
