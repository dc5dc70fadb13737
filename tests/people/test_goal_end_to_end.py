"""The goal of people in the loop, end to end: a scripted person's sessions on the demo's real
cases (MobileSAM live), imported, replayed on LiteMedSAM, MobileSAM and region-growing-3d, and
put beside the simulated user: the table by ``intrabench tables``, the figure on the report.
The fast version of it is tests/people/test_people_commands.py (one case, one model)."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench import registry
from intrabench.cli import main
from tests.people.scripted import script_session
from tests.run_helpers import run_config

RUN = """
name: people-goal
seeds: [0]
datasets: [demo-real]
models:
  - {name: litemedsam, refiners: []}
  - mobilesam
  - region-growing-3d
prompters: [box-3d]
refiners: [center-error-click]
refinement_steps: 2
"""

MODELS = ["litemedsam", "mobilesam", "region-growing-3d"]


@pytest.mark.slow
def test_sessions_replayed_on_three_models_beside_the_simulated_user(tmp_path, capsys):
    run = run_config(tmp_path, RUN)
    dataset = registry.datasets.create("demo-real", {})
    live = registry.models.create("mobilesam", {})
    written = 0
    for case_id in dataset.case_ids():
        case = dataset.load(case_id)
        live.set_case(case.image)
        for target in case.targets:
            if (case_id, target.target_id) == ("brain1", "lesion_2"):
                continue  # a target nobody segmented: skipped and counted
            script_session(run / "sessions", case, target, live, "mobilesam", "ann")
            written += 1
    assert written == 3  # brain1 lesion_1, breast1 lesion_1, lung1 lesion_1
    capsys.readouterr()
    assert main(["session", "import", str(run / "sessions"), "--to", str(tmp_path / "import")]) == 0
    assert "imported 3 sessions" in capsys.readouterr().out
    replay = ["people", "replay", str(run)] + [f"--model={m}" for m in MODELS]
    assert main(replay) == 0
    printed = capsys.readouterr().out
    assert "3 session(s) replayed on 3 model(s); 1 target(s)" in printed
    assert "litemedsam | initial + 0 of 2 corrections; stopped at correction 1" in printed
    replays = pd.read_csv(run / "people" / "replays.csv")
    assert set(replays["model"]) == set(MODELS)
    assert main(["tables", str(run), "--out", str(tmp_path / "tables")]) == 0
    table = pd.read_csv(tmp_path / "tables" / "people.csv")
    users = set(zip(table["user"], table["model"]))
    assert ("people", "mobilesam") in users
    assert {("replayed", m) for m in MODELS} <= users
    assert {("box-3d + center-error-click", m) for m in ["mobilesam", "region-growing-3d"]} <= users
    assert ("box-3d", "litemedsam") in users
    by = table.set_index(["user", "model"])
    steps = ["dice@0", "dice@1", "dice@2"]
    # MobileSAM was the live model: its replay is the person's own Dice
    assert by.loc[("replayed", "mobilesam"), steps].tolist() == pytest.approx(
        by.loc[("people", "mobilesam"), steps].tolist(), abs=0.051
    )
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "People beside the simulated user" in page
    assert (tmp_path / "report" / "people-vs-simulated.png").stat().st_size > 10_000
