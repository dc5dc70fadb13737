"""A robustness run end to end: config rules, the plan, identical rows whatever the executor,
its table and report section."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.config import parse_config
from intrabench.errors import ConfigError
from intrabench.execution.runner import Runner
from intrabench.io.results import measured_columns

SPEC = {
    "name": "robust",
    "datasets": [{"name": "demo-phantoms", "n_cases": 2, "shape": [16, 48, 48]}],
    "models": ["region-growing-3d"],
    "prompters": [{"name": "points-per-volume", "label": "click"}, "box-3d"],
    "refiners": ["center-error-click", "scribble"],
    "robustness": {"clickability": "contrast-aware", "groups": 4, "rounds": 3},
}


def test_config_rules():
    config = parse_config(SPEC)
    assert config.refinement_steps == 2  # rounds - 1
    assert parse_config({**SPEC, "robustness": {}}).refinement_steps == 19  # 20 rounds
    assert config.robustness.strategies == ["baseline", "G1", "G2", "G3", "G4"]
    with pytest.raises(ConfigError, match="robustness.rounds is 3 but refinement_steps is 5"):
        parse_config({**SPEC, "refinement_steps": 5})
    with pytest.raises(ConfigError, match="groups must be even"):
        parse_config({**SPEC, "robustness": {"groups": 5}})
    with pytest.raises(ConfigError, match="unknown clickability model 'distanse'"):
        parse_config({**SPEC, "robustness": {"clickability": "distanse"}})
    with pytest.raises(ConfigError, match="clickability model 'distance' has no parameter 'power'"):
        parse_config({**SPEC, "robustness": {"clickability": {"name": "distance", "power": 2}}})
    with pytest.raises(ConfigError, match="no prompter or refiner of this config draws its clicks"):
        parse_config({**SPEC, "prompters": ["box-3d"], "refiners": ["scribble"]})


def test_the_plan_runs_every_strategy_of_click_combinations_only(tmp_path):
    runner = Runner(parse_config(SPEC), tmp_path / "run", background="inline")
    try:
        plan = runner.plan()
    finally:
        runner.close()
    combos = {(u.prompter.key, u.refiner_key, u.click_group) for u in plan.units}
    # box-3d + scribble clicks nowhere: skipped; every other combination x 5 strategies
    assert {(p, r) for p, r, _ in combos} == {
        ("click", "center-error-click"),
        ("click", "scribble"),
        ("box-3d", "center-error-click"),
    }
    assert len(combos) == 3 * 5 and len(plan.units) == 3 * 5 * 2
    assert [
        s["reason"]
        for s in plan.skipped
        if s["refiner"] == "scribble" and s["prompter"] == "box-3d"
    ] == ["robustness run: neither the prompter nor the refiner clicks from a clickability model"]
    keys = {u.key for u in plan.units}
    assert len(keys) == len(plan.units)  # each strategy is its own unit file


def _rows(run_dir) -> pd.DataFrame:
    rows = pd.read_parquet(run_dir / "results.parquet")
    return rows.drop(columns=measured_columns(rows))


def test_a_robustness_run_is_identical_across_executors(tmp_path, capsys):
    from intrabench.execution.runner import run_distributed
    from intrabench.execution.settings import DaskSettings

    spec = {**SPEC, "prompters": [SPEC["prompters"][0]], "refiners": ["center-error-click"]}
    config = parse_config(spec)
    Runner(config, tmp_path / "inline", background="inline").run()
    Runner(config, tmp_path / "process", user_workers=1, episodes_in_flight=4).run()
    plan, problems = run_distributed(
        config,
        tmp_path / "dask",
        DaskSettings(workers=2, memory_limit="2GB"),
    )
    assert not problems
    inline = _rows(tmp_path / "inline")
    for other in ("process", "dask"):
        pd.testing.assert_frame_equal(inline, _rows(tmp_path / other))
    assert set(inline["click_group"]) == {"baseline", "G1", "G2", "G3", "G4"}
    assert set(inline["prompter"]) == {f"click [{s}]" for s in config.robustness.strategies}
    assert (inline["click_prompter"] == "click").all()
    assert (inline["clickability"] == "contrast-aware").all()
    assert inline.groupby(["case", "target", "click_group"]).size().eq(3).all()  # 3 rounds
    # the groups click differently: first clicks differ between G1 and G4
    first = inline[inline["step"] == 0].set_index(["case", "target", "click_group"])["prompt_json"]
    assert (first.xs("G1", level=2) != first.xs("G4", level=2)).any()

    assert (
        main(
            [
                "tables",
                str(tmp_path / "inline"),
                "--out",
                str(tmp_path / "tables"),
                "--noc-threshold",
                "0.8",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "## Robustness to where people click" in printed
    table = (tmp_path / "tables" / "robustness.md").read_text()
    assert "per dataset: targets -> cases" in table
    assert "as RClicks' tables" in (tmp_path / "tables" / "robustness-flat.md").read_text()
    assert "| region-growing-3d | click | center-error-click |" in table
    targets = pd.read_csv(tmp_path / "tables" / "robustness-targets.csv")
    assert len(targets) == inline[["case", "target"]].drop_duplicates().shape[0]
    assert main(["report", str(tmp_path / "inline")]) == 0
    report = (tmp_path / "inline" / "report" / "report.html").read_text()
    assert "Robustness to where people click" in report
    assert (tmp_path / "inline" / "report" / "iou-vs-clicks.png").stat().st_size > 1000


def test_a_learned_network_runs_in_a_robustness_run(tmp_path):
    spec = {
        **SPEC,
        "datasets": [{"name": "demo-phantoms", "n_cases": 1, "shape": [16, 48, 48]}],
        "prompters": [SPEC["prompters"][0]],
        "refiners": ["center-error-click"],
        "robustness": {
            "clickability": {"name": "network", "factory": "realistic_clicks.tiny_network:build"},
            "groups": 2,
            "rounds": 2,
        },
    }
    Runner(parse_config(spec), tmp_path / "run", background="inline").run()
    rows = _rows(tmp_path / "run")
    assert set(rows["click_group"]) == {"baseline", "G1", "G2"}
    assert rows["clickability"].str.startswith("network(").all()


def test_the_demo_config_is_a_robustness_run():
    from pathlib import Path

    from intrabench.config import load_config

    root = Path(__file__).resolve().parents[2]
    config = load_config(root / "configs" / "robustness-demo.yaml")
    assert config.robustness.strategies == ["baseline"] + [f"G{g}" for g in range(1, 11)]
    assert config.refinement_steps == config.robustness.rounds - 1 == 9
    docs = (root / "docs" / "realistic-clicks.md").read_text()
    assert "clickability: contrast-aware" in docs and "rounds: 10" in docs


def test_recorded_maps_count_their_fallbacks_in_the_results_and_the_run_log(tmp_path, capsys):
    import numpy as np
    import yaml

    from intrabench import registry

    dataset = {"name": "demo-phantoms", "n_cases": 1, "shape": [16, 48, 48]}
    case = registry.datasets.create("demo-phantoms", {"n_cases": 1, "shape": [16, 48, 48]}).load(
        "phantom_000"
    )
    recorded = case.targets[0]
    z, y, x = np.argwhere(case.target_mask(recorded))[0]
    clicks = tmp_path / "clicks.csv"  # clicks recorded for the first target's first round only
    clicks.write_text(
        "dataset,case,target,z,y,x,step\n"
        f"{case.dataset},phantom_000,{recorded.target_id},{z},{y},{x},0\n"
    )
    spec = {
        **SPEC,
        "datasets": [dataset],
        "prompters": [SPEC["prompters"][0]],
        "refiners": ["center-error-click"],
        "robustness": {
            "clickability": {"name": "recorded", "clicks_file": str(clicks)},
            "groups": 2,
            "rounds": 2,
            "baseline": False,
        },
    }
    config_file = tmp_path / "recorded.yaml"
    config_file.write_text(yaml.safe_dump(spec))
    assert main(["run", str(config_file), "--out", str(tmp_path / "run")]) in (0, 1)
    log = capsys.readouterr().err
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    called = rows[~rows["converged"]]
    assert (called["click_map_regions"] >= 1).all()
    mine = called["target"] == recorded.target_id
    # the recorded target's first round drew from its clicks; everything else fell back
    assert (called.loc[mine & (called["step"] == 0), "click_map_fallbacks"] == 0).all()
    others = called[~(mine & (called["step"] == 0))]
    assert (others["click_map_fallbacks"] == others["click_map_regions"]).all()
    total, fallbacks = (
        int(called["click_map_regions"].sum()),
        int(called["click_map_fallbacks"].sum()),
    )
    assert 0 < fallbacks < total
    assert f"note: {fallbacks} of {total} click regions had no recorded clicks" in log
    # the counts come back from a user worker process too
    Runner(
        parse_config({**spec, "name": "recorded-process"}), tmp_path / "process", user_workers=1
    ).run()
    process = pd.read_parquet(tmp_path / "process" / "results.parquet")
    assert process["click_map_fallbacks"].tolist() == rows["click_map_fallbacks"].tolist()
