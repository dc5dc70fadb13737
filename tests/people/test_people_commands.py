"""``intrabench people seconds|replay`` and the people table of ``intrabench tables`` and the
report, on a run on the demo's real brain case with scripted sessions."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from intrabench import registry
from intrabench.cli import main
from intrabench.timing.human import TimeModel
from tests.people.scripted import script_session
from tests.run_helpers import run_config


def _sessions(folder, targets=None, model_name="region-growing-3d"):
    case = registry.datasets.create("demo-real", {}).load("brain1")
    model = registry.models.create(model_name, {})
    model.set_case(case.image)
    for target in case.targets if targets is None else [case.targets[i] for i in targets]:
        script_session(folder, case, target, model, model_name, "ann")
    return case


def test_seconds_from_sessions_become_the_time_models_seconds(tmp_path, capsys):
    _sessions(tmp_path / "sessions", targets=[0])
    saved = tmp_path / "seconds.yaml"
    assert main(["people", "seconds", str(tmp_path / "sessions"), "--save", str(saved)]) == 0
    printed = capsys.readouterr().out
    # the scripted person: a 3D box after 7 s, clicks after 3, 3 (undone) and 2 s
    assert "| box3d | 1 | 7.00 |  |  | 7.00 |" in printed
    assert "| click | 3 | 2.67 | 1.23 | 4.10 | 3.00 |" in printed
    section = yaml.safe_load(saved.read_text())
    assert section == {"time_model": {"seconds": {"box3d": 7.0, "click": 2.7}}}
    model = TimeModel(**section["time_model"])
    assert model.seconds["click"] == 2.7 and model.seconds["scribble"] == 10.9  # the default
    assert "click: 2.7   # n=3, 0.95 CI 1.23-4.10" in saved.read_text()


def test_seconds_of_a_folder_without_sessions_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["people", "seconds", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no session logs (*.jsonl) in this folder" in err and "Traceback" not in err


RUN = """
name: people
seeds: [0]
datasets:
  - {name: demo-real, cases: [brain1]}
models: [region-growing-3d]
prompters: [box-3d]
refiners: [center-error-click]
refinement_steps: 2
"""


def test_tables_put_people_beside_the_simulated_user_and_the_replays(tmp_path, capsys):
    run = run_config(tmp_path, RUN)
    _sessions(run / "sessions", targets=[0])
    capsys.readouterr()
    assert main(["people", "replay", str(run), "--model", "region-growing-3d"]) == 0
    printed = capsys.readouterr().out
    assert "| ann-brain1-lesion_1 | region-growing-3d | initial + 2 of 2 corrections |" in printed
    assert "1 target(s) of their cases have no session and were skipped" in printed
    assert main(["tables", str(run), "--out", str(tmp_path / "tables")]) == 0
    printed = capsys.readouterr().out
    assert "## People beside the simulated user" in printed
    table = pd.read_csv(tmp_path / "tables" / "people.csv").set_index("user")
    assert list(table.index) == ["people", "box-3d + center-error-click", "replayed"]
    steps = ["dice@0", "dice@1", "dice@2"]
    # replayed on the model the person used live: the person's own Dice, a shift of 0
    assert table.loc["replayed", steps].tolist() == table.loc["people", steps].tolist()
    assert table.loc["replayed", "dice shift x100"] == 0.0
    simulated = table.loc["box-3d + center-error-click"]
    shift = (simulated[steps] - table.loc["people", steps]).mean()
    assert simulated["dice shift x100"] == pytest.approx(shift, abs=0.1)  # of rounded values
    exact = pd.read_csv(tmp_path / "tables" / "people-shift.csv").set_index("user")
    per_step = exact.loc["box-3d + center-error-click", ["shift@0", "shift@1", "shift@2"]]
    assert exact.loc["box-3d + center-error-click", "mean_dice_shift"] == pytest.approx(
        per_step.mean()
    )
    assert simulated["dice shift x100"] == round(100 * per_step.mean(), 1)
    seconds = pd.read_csv(tmp_path / "tables" / "people-seconds.csv").set_index("kind")
    assert seconds.loc["click", "n"] == 3 and seconds.loc["click", "mean"] == pytest.approx(8 / 3)
    clicks = pd.read_csv(tmp_path / "tables" / "people-clicks.csv")
    assert sorted(set(clicks["who"])) == ["center-error-click", "people"]
    assert (clicks["step"] >= 1).all()


def test_the_report_section_has_the_table_and_the_figure(tmp_path):
    from intrabench.io.results import load_results
    from intrabench.reports.people import report_section

    run = run_config(tmp_path, RUN)
    assert report_section(run, load_results(run)) == ([], [])  # no sessions: nothing
    _sessions(run / "sessions", targets=[0])
    figures, parts = report_section(run, load_results(run))
    assert [name for name, _, _ in figures] == ["people-vs-simulated"]
    assert figures[0][2][:8] == b"\x89PNG\r\n\x1a\n"
    page = "".join(parts)
    assert "People beside the simulated user" in page and "box-3d + center-error-click" in page
    assert "Where correction clicks fall" in page and "2 correction clicks" in page


def test_a_run_replays_sessions_with_the_recorded_prompter_and_refiner(tmp_path):
    from intrabench.io.results import load_results

    sessions = tmp_path / "sessions"
    _sessions(sessions)  # both lesions of brain1
    run = run_config(
        tmp_path,
        f"""
name: replay-run
seeds: [0]
datasets:
  - {{name: demo-real, cases: [brain1]}}
models: [region-growing-3d]
prompters: [{{name: recorded, sessions: {sessions}, label: people}}]
refiners: [{{name: recorded, sessions: {sessions}, k: 1, label: people-k1}}]
refinement_steps: 2
""",
    )
    rows = load_results(run).sort_values(["target", "step"])
    assert rows["target"].tolist() == ["lesion_1"] * 3 + ["lesion_2"] * 3
    # the 3D box, one recorded click (k = 1), then nothing: the episode repeats its last step
    assert rows["cumulative_effort"].tolist() == [3, 4, 4, 3, 4, 4]
    assert rows["converged"].tolist() == [False, False, True] * 2
    assert (
        main(
            [
                "people",
                "replay",
                str(run),
                "--sessions",
                str(sessions),
                "--k",
                "1",
                "--model",
                "region-growing-3d",
            ]
        )
        == 0
    )
    replays = pd.read_csv(run / "people" / "replays.csv").sort_values(["target", "step"])
    ran = rows[rows["step"] <= 1]
    assert replays["dice"].tolist() == pytest.approx(ran["dice"].tolist(), abs=1e-12)
