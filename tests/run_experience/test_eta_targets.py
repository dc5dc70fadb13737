"""The ETA scales by the case's targets and says what load its record was made at (issue 65,
item 12): a per-unit time learnt on a 1-lesion dataset was applied to 5 organs per case (the
ETA sat at "2m04s" for 9 minutes of a 15-minute unit), and the dry run called an estimate
recorded at load 7 on 2 cores "an idle machine"."""

from __future__ import annotations

import io
import os
import platform

import pytest
import yaml

from intrabench import registry
from intrabench.config import ComponentSpec, DatasetSpec
from intrabench.engine.plan import WorkUnit
from intrabench.execution.dry_run import load_note, print_time_estimate
from intrabench.execution.eta import Record, UnitCosts, read_record, write_record
from intrabench.execution.progress import RunProgress, work_keys
from tests.run_helpers import run_config


def _units(dataset: str, cases: list[str], model: str = "m") -> list[WorkUnit]:
    return [
        WorkUnit(
            dataset=DatasetSpec(name=dataset),
            case_id=case,
            model=ComponentSpec(name=model),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )
        for case in cases
    ]


def test_a_rate_learnt_on_one_lesion_cases_scales_to_a_case_of_five_organs():
    costs = UnitCosts()
    for case in ("a0", "a1", "a2"):
        costs.set_targets("lesions", case, 1)
    costs.add("m", "lesions", 2, 9.0, case="a0")  # the first group: one-off costs in it
    costs.add("m", "lesions", 2, 4.0, case="a1")  # steady: 2 s per unit, 1 target each
    costs.add("m", "lesions", 2, 4.0, case="a2")
    assert costs.rate("m", "lesions") == pytest.approx(2.0)
    # another dataset, no case of it read yet: nothing known of its targets, per unit
    assert costs.rate("m", "organs", "b0") == pytest.approx(2.0)
    costs.set_targets("organs", "b0", 5)
    assert costs.rate("m", "organs", "b0") == pytest.approx(2.0 * 5)
    # its other cases: the mean of its cases read so far (5 and 3 targets)
    costs.set_targets("organs", "b1", 3)
    assert costs.rate("m", "organs", "b9") == pytest.approx(2.0 * 4)
    # the warm-up: the first group's seconds over its 2 units x 1 target at 2 s
    assert costs.warm_up("m") == pytest.approx(9.0 - 2 * 1 * 2.0)
    # within one dataset, a 4-target case costs 4 times a 1-target one
    costs.set_targets("lesions", "a3", 4)
    assert costs.rate("m", "lesions", "a3") == pytest.approx(8.0)


def test_the_running_group_of_a_five_organ_case_counts_down_its_five_targets():
    """The issue's ETA: learnt on 1-lesion cases, then a 5-organ case runs. Its share is 5
    targets x the per-target rate, so the ETA counts down with it instead of sitting at the
    other work's seconds."""
    units = _units("lesions", ["a0", "a1"]) + _units("organs", ["b0", "b1"])
    now = [0.0]
    progress = RunProgress(
        units,
        stream=io.StringIO(),
        interval=1e9,
        clock=lambda: now[0],
        heartbeat=False,
        costs=UnitCosts(),
    )
    for index, seconds in ((0, 30.0), (1, 10.0)):  # 10 s per 1-target unit once warm
        progress.start_group(units[index : index + 1])
        progress.case_targets(units[index], 1)
        now[0] += seconds
        progress.finish_group(units[index : index + 1], seconds)
    progress.start_group(units[2:3])
    progress.case_targets(units[2], 5)
    # b0: 5 targets x 10 s; b1: the organs' mean so far, 5 targets: 50 s
    assert progress.eta() == pytest.approx(100.0)
    now[0] += 40.0
    assert progress.eta() == pytest.approx(60.0)  # b0 ran 40 of its 50 s
    progress.close()


def test_targets_rates_per_target_and_loads_go_through_the_record(tmp_path):
    costs = UnitCosts()
    for case, targets in (("c0", 2), ("c1", 2), ("c2", 6)):
        costs.set_targets("d", case, targets)
    costs.add("m", "d", 1, 5.0, case="c0")
    costs.add("m", "d", 1, 2.0, case="c1")  # 1 s per target
    costs.add("m", "d", 1, 6.0, case="c2")
    measured = costs.measured()
    assert measured.target_rates == {("m", "d"): pytest.approx(8.0 / 8)}
    assert measured.targets == {("d", "c0"): 2, ("d", "c1"): 2, ("d", "c2"): 6}
    assert set(measured.loads) == {"m"} and measured.loads["m"] >= 0
    path = tmp_path / "unit-seconds.json"
    write_record(measured, path)
    record = read_record(path)
    assert record.targets == measured.targets
    assert record.target_rates == {("m", "d"): pytest.approx(1.0)}
    assert record.loads["m"] == pytest.approx(measured.loads["m"], abs=1e-3)
    later = UnitCosts(record)
    # a case not read yet, of a dataset whose cases the record knows: their mean, 10/3 targets
    assert later.rate("m", "d", "c9") == pytest.approx(1.0 * 10 / 3)
    assert later.rate("m", "d", "c2") == pytest.approx(6.0)  # its own case rate, recorded


@pytest.mark.parametrize(
    "text",
    [
        '{"HOST": {"targets per case": {"d": {"c": -1}}}}',
        '{"HOST": {"targets per case": {"d": {"c": 2.5}}}}',
        '{"HOST": {"targets per case": {"d": {"c": true}}}}',
        '{"HOST": {"targets per case": [1]}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": 1}, "load_per_core": "busy"}}}',
    ],
)
def test_bad_target_counts_and_loads_in_a_record_are_ignored_with_one_line(text, tmp_path, caplog):
    path = tmp_path / "unit-seconds.json"
    path.write_text(text.replace("HOST", platform.node()))
    with caplog.at_level("WARNING"):
        record = read_record(path)
    assert record.targets == {} and record.loads == {}
    assert len([r for r in caplog.records if "record" in r.getMessage()]) == 1


def test_the_load_note_never_calls_a_busy_machine_idle():
    assert load_note(3.5, now=0.5, cores=2) == (
        "measured on a busy machine, load 7.0 on 2 "
        "cores; load now 1.0: a quieter machine runs "
        "it faster"
    )
    assert load_note(0.6, now=0.25, cores=2) == "measured at load 1.2 on 2 cores; load now 0.5"
    assert load_note(None, now=0.5, cores=2) == (
        "the record does not say at what load it was measured; load now 1.0"
    )


def test_the_dry_run_says_the_load_of_its_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path))
    cores = os.cpu_count() or 1
    units = _units("d", ["c0", "c1"])
    work = work_keys(units)["m"]
    write_record(
        Record(rates={(work, "d"): 2.0}, loads={work: 7.0 / cores}), tmp_path / "unit-seconds.json"
    )
    print_time_estimate(units)
    out = capsys.readouterr().out
    assert "time: about 4s (estimated from this machine's record of earlier runs; " in out
    assert "idle machine" not in out
    if 7.0 / cores > 1.5:
        assert f"measured on a busy machine, load 7.0 on {cores} cores" in out


def test_a_run_tells_the_eta_its_cases_targets(tmp_path, monkeypatch):
    """The runner passes each case's targets on: the record of a real run holds them."""
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    config = {
        "name": "t",
        "seeds": [0],
        "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
        "models": ["region-growing-3d"],
        "prompters": ["box-3d"],
    }
    run_config(tmp_path, yaml.safe_dump(config))
    record = read_record(tmp_path / "cache" / "unit-seconds.json")
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 2})
    expected = {
        ("demo-phantoms(n_cases=2)", case): len(dataset.load(case).targets)
        for case in dataset.case_ids()
    }
    assert record.targets == expected and all(count >= 1 for count in expected.values())
