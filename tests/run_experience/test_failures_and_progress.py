"""A run that never dies on one bad episode, and tells you where it is (issue #20, items 1-2)."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from intrabench import registry
from intrabench.cli import main
from intrabench.config import parse_config
from intrabench.execution.eta import UnitCosts, read_record, write_record
from intrabench.execution.progress import RunProgress, format_seconds, work_keys
from intrabench.execution.runner import Runner
from intrabench.interfaces import Model, Refiner
from intrabench.types import Prediction


class _FailsOnOneTarget(Model):
    """A 3D box model that raises on the second target of case 1 (like an adapter bug)."""

    name = "test-fails-on-one-target"
    dimension = 3
    accepts = frozenset({"box3d", "point", "mask"})

    def set_case(self, image):
        self.shape = image.shape
        self.calls = 0

    def predict(self, prompt, previous=None, update_slices=None):
        mask = np.zeros(self.shape, bool)
        box = prompt.box3d
        if box is None:
            return Prediction(mask=mask)
        if self.shape[0] > 0 and box.z_min == self._bad_z:
            raise IndexError(f"index {box.z_max + 99} is out of bounds for axis 0")
        mask[box.z_min : box.z_max + 1, box.y_min : box.y_max + 1, box.x_min : box.x_max + 1] = True
        return Prediction(mask=mask)

    _bad_z = -1


class _RefinerFails(Refiner):
    name = "test-refiner-fails"
    dimensions = frozenset({2, 3})
    kinds = frozenset({"point"})
    effort_rule = "never answers"

    def refine(self, context):
        raise RuntimeError("the refiner broke")


@pytest.fixture(autouse=True)
def _failing_components():
    """Registered for these tests only: other tests iterate over every registered one."""
    registry.models.register(_FailsOnOneTarget)
    registry.refiners.register(_RefinerFails)
    yield
    registry.models.unregister(_FailsOnOneTarget.name)
    registry.refiners.unregister(_RefinerFails.name)


SPEC = {
    "name": "isolated",
    "datasets": [{"name": "demo-phantoms", "n_cases": 3}],
    "models": ["test-fails-on-one-target", "region-growing-3d"],
    "prompters": ["box-3d"],
    "target_attributes": False,
}


def _bad_z() -> int:
    """The first slice of one target of phantom case 1: the box the model fails on."""
    case = registry.datasets.create("demo-phantoms", {"n_cases": 3}).load("phantom_001")
    return int(case.target_box(case.targets[1])[0].start)


def test_the_crash_of_issue_20_is_fixed():
    """region-growing-3d + cvpr25-box + a refiner raised IndexError (models/classical/region_growing_3d.py:
    115) when a correction click fell outside the 3D box; the run died at 43%."""
    config = parse_config(
        {
            "name": "crash",
            "datasets": [{"name": "demo-phantoms", "n_cases": 4}],
            "models": ["region-growing-3d"],
            "prompters": ["cvpr25-box"],
            "refiners": ["center-error-click", "cvpr25-click"],
            "refinement_steps": 3,
            "target_attributes": False,
        }
    )
    runner = Runner(config, _tmp() / "crash", background="inline")
    plan, problems = runner.run()
    assert not problems and not runner.failures and runner.executed == len(plan.units)


def _tmp():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="ib-crash-"))


def test_a_failing_unit_is_isolated_listed_and_retried(tmp_path, capsys):
    _FailsOnOneTarget._bad_z = _bad_z()
    config = tmp_path / "run.json"
    config.write_text(json.dumps(SPEC))
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "5 of 6 work units executed" in err and "1 failed" in err
    assert "IndexError: index" in err and "phantom_001" in err
    failures = pd.read_csv(out / "failures.csv")
    assert len(failures) == 1
    row = failures.iloc[0]
    assert (
        row["dataset"],
        row["case"],
        row["model"],
        row["prompter"],
        row["refiner"],
        row["seed"],
    ) == (
        "demo-phantoms(n_cases=3)",
        "phantom_001",
        "test-fails-on-one-target",
        "box-3d",
        "none",
        0,
    )
    assert row["target"] and row["cause"].startswith("IndexError: index")
    assert "test_failures_and_progress.py" in row["cause"]  # where it was raised
    rows = pd.read_parquet(out / "results.parquet")
    # the other model's units and the failing model's other cases are all there
    assert set(rows.model) == {"test-fails-on-one-target", "region-growing-3d"}
    assert set(rows[rows.model == "test-fails-on-one-target"].case) == {
        "phantom_000",
        "phantom_002",
    }
    # every summary says how many units its rows miss: the run's own table ...
    printed = capsys.readouterr().out  # (the run's stdout was read above with its stderr)
    assert main(["run", str(config), "--out", str(out)]) == 1
    shown = capsys.readouterr().out
    assert "warning: 1 work unit(s) failed and have no rows" in shown
    assert "| Failed units |" in shown.splitlines()[1]
    failing_row = next(
        line for line in shown.splitlines() if line.startswith("| test-fails-on-one-target |")
    )
    assert failing_row.rstrip(" |").endswith("1")
    # ... and intrabench tables, above the tables and per row
    assert main(["tables", str(out), "--out", str(tmp_path / "tables")]) == 0
    captured = capsys.readouterr()
    tables = captured.out
    assert tables.splitlines()[0].startswith("warning: 1 work unit(s) failed")
    # the missing unit is named as failed, not as an interrupted run's
    assert (
        f"is incomplete: 5 of 6 work units finished; 1 failed (see {out / 'failures.csv'})"
        in captured.err
    ) and "not run yet" not in captured.err
    assert "| Failed units |" in tables
    assert any(
        line.startswith("| box-3d | test-fails-on-one-target |")
        and line.rstrip(" |").endswith("| 1")
        for line in tables.splitlines()
    )
    del printed
    # ... and the HTML report
    from intrabench.reports.html import build_report

    page = build_report(out, tmp_path / "report", n_boot=10).read_text()
    assert "1 work unit(s) failed and have no rows" in page and "Failed units" in page
    # fixed: the same command retries only the failed unit, and the list empties
    _FailsOnOneTarget._bad_z = -1
    assert main(["run", str(config), "--out", str(out)]) == 0
    assert "1 of 6 work units executed" in capsys.readouterr().err
    assert pd.read_csv(out / "failures.csv").empty


def test_a_failure_in_a_user_worker_is_isolated_too(tmp_path):
    """The same failure raised by a refiner that runs in a user worker process."""
    config = parse_config(
        {
            **SPEC,
            "models": ["region-growing-3d"],
            "refiners": ["test-refiner-fails"],
            "refinement_steps": 1,
        }
    )
    runner = Runner(config, tmp_path / "run", user_workers=1, episodes_in_flight=3)
    plan, _ = runner.run()
    assert len(runner.failures) == len(plan.units) == 3
    assert all(f.cause.startswith("RuntimeError: the refiner broke") for f in runner.failures)


def test_progress_prints_lines_when_stderr_is_not_a_terminal():
    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit

    def unit(model: str, case: str) -> WorkUnit:
        return WorkUnit(
            dataset=DatasetSpec(name="d"),
            case_id=case,
            model=ComponentSpec(name=model),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )

    fast = [unit("fast", f"c{i}") for i in range(4)]
    slow = [unit("slow", f"c{i}") for i in range(4)]
    now = [0.0]
    stream = io.StringIO()
    progress = RunProgress(
        fast + slow,
        stream=stream,
        interval=0.0,
        clock=lambda: now[0],
        heartbeat=False,
        costs=UnitCosts(),
    )  # no record of earlier runs
    assert not progress.terminal and progress.eta() is None
    progress.start_group(fast[:2])
    now[0] = 2.0
    progress.finish_group(fast[:2], 2.0)  # 1 s per fast unit; slow not measured yet
    # the slow model is not guessed at (the mean of the others would say 4 s for it)
    assert progress.eta() == pytest.approx(2 * 1.0) and progress.untimed() == ["slow"]
    progress.start_group(slow[:2])
    progress.failed()
    now[0] = 22.0
    progress.finish_group(slow[:2], 20.0)  # 10 s per slow unit
    # weighted by each model's cost: 2 fast x 1 s + 2 slow x 10 s (the mean would say 11 s)
    assert progress.eta() == pytest.approx(22.0) and progress.untimed() == []
    progress.start_group(slow[2:])
    now[0] = 27.0  # 5 s into the running group: its 20 s are 15 s away
    assert progress.eta() == pytest.approx(2 * 1.0 + 15.0)
    now[0] = 50.0  # overrunning: the group counts 0 s left, not less
    assert progress.eta() == pytest.approx(2.0)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == (
        "intrabench: 2/8 units (25%) | c0 | fast | 2s elapsed | ETA 2s + 1 model not timed yet"
    )
    assert lines[1] == "intrabench: 4/8 units (50%) | c0 | slow | 22s elapsed | ETA 22s | 1 failed"
    assert len(lines) == 2  # close() repeats nothing already said


def test_unit_costs_leave_out_a_models_warm_up_and_use_the_record_of_earlier_runs(tmp_path):
    costs = UnitCosts()
    costs.add("net", "ct", 4, 10.0)  # the first group: 4 units, with 6 s of one-off costs
    assert costs.rate("net", "ct") == pytest.approx(2.5)  # all there is so far
    costs.add("net", "ct", 4, 4.0)  # steady: 1 s per unit
    costs.add("net", "mr", 2, 4.0)
    assert costs.rate("net", "ct") == pytest.approx(1.0)
    assert costs.warm_up("net") == pytest.approx(10.0 - 4 * 1.0)
    costs.add_build("net", 3.0)
    costs.add_build("net", 1.0)  # built again (modules imported by then): the next one's guess
    assert costs.build("net") == 1.0 and costs.build("rg") == 0.0
    costs.add("rg", "ct", 2, 1.0)
    costs.add("rg", "ct", 2, 1.0)  # rg: 0.5 s per ct unit; not run on mr yet
    # rg on mr: its ct rate x how much dearer mr is than ct for net (2 / 1)
    assert costs.rate("rg", "mr") == pytest.approx(0.5 * 2.0)
    assert costs.rate("other", "ct") is None
    measured = costs.measured()
    assert measured.rates == {("net", "ct"): 1.0, ("net", "mr"): 2.0, ("rg", "ct"): 0.5}
    assert measured.warm_up == {"net": 6.0, "rg": 0.0}
    assert measured.builds == {"net": 3.0}  # a later run builds it in a fresh process
    # the record round trip; a later run on a machine twice as slow
    path = tmp_path / "unit-seconds.json"
    write_record(measured, path)
    record = read_record(path)
    assert record.rates == measured.rates and record.warm_up == {"net": 6.0}  # 0 s: none
    later = UnitCosts(record)
    assert later.rate("net", "mr") == pytest.approx(2.0) and later.warm_up("net") == 6.0
    assert later.build("net") == 3.0
    later.add("rg", "ct", 2, 2.0)
    later.add("rg", "ct", 2, 2.0)  # 1 s per unit against the record's 0.5: twice as slow
    # ... on one comparison, shrunk towards the record's speed as if 2 more agreed with it
    speed = 2.0 ** (1 / 3)
    assert later.rate("net", "mr") == pytest.approx(2.0 * speed)
    assert later.rate("net", "ct") == pytest.approx(1.0 * speed)
    path.write_text("not json")
    assert read_record(path).rates == {}  # an unreadable record is no record
    write_record(measured, path)  # ... and is replaced
    assert read_record(path).rates == measured.rates


def test_the_eta_adds_the_build_of_models_not_in_memory_and_the_warm_up_of_models_yet_to_start():
    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit
    from intrabench.execution.eta import Record

    units = [
        WorkUnit(
            dataset=DatasetSpec(name="d"),
            case_id=f"c{i}",
            model=ComponentSpec(name=model),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )
        for model in ("a", "b")
        for i in range(2)
    ]
    # costs are kept per model and the mix of work its units do: a run that gives model "a"
    # other prompters does not use this record
    work = work_keys(units)
    assert (
        work["a"].startswith("a[")
        and work["a"] != work_keys([replace(u, steps=3) for u in units])["a"]
    )
    # seconds per unit 1 and 3, first-inference warm-ups 5 and 7, builds 2 and 4
    record = Record(
        {(work["a"], "d"): 1.0, (work["b"], "d"): 3.0},
        {work["a"]: 5.0, work["b"]: 7.0},
        builds={work["a"]: 2.0, work["b"]: 4.0},
    )
    now = [0.0]
    progress = RunProgress(
        units,
        stream=io.StringIO(),
        interval=1e9,
        clock=lambda: now[0],
        heartbeat=False,
        costs=UnitCosts(record),
    )
    # known from the start: a: 2 x 1 + 5 + 2 (its build); b: 2 x 3 + 7 + 4
    assert progress.eta() == pytest.approx(26.0)
    now[0] = 2.5
    progress.model_built(units[:1], 2.5)  # a, built beside the first case: in memory now
    assert progress.eta() == pytest.approx(24.0)
    now[0] = 3.0
    progress.start_group(units[:1])
    now[0] = 7.0
    assert progress.eta() == pytest.approx(20.0)  # a's first group runs: its 6 s count down
    progress.finish_group(units[:1], 6.0)
    assert progress.eta() == pytest.approx(1.0 + 6.0 + 7.0 + 4.0)
    progress.start_group(units[1:2])
    now[0] = 8.0
    progress.finish_group(units[1:2], 1.0)
    progress.start_group(units[2:3])  # b's first group: b is built first, in the group's time
    now[0] = 10.0
    assert progress.eta() == pytest.approx(17.0 - 2.0)
    now[0] = 11.0
    progress.model_built(units[2:3], 3.0)  # built: its group's clock starts again
    assert progress.eta() == pytest.approx(2 * 3.0 + 7.0)
    now[0] = 12.0
    assert progress.eta() == pytest.approx(2 * 3.0 + 7.0 - 1.0)
    # the builds measured go to the record (the first of each model: in a fresh process)
    assert progress.costs.measured().builds == {work["a"]: 2.5, work["b"]: 3.0}


def test_progress_lines_are_spaced_by_the_interval():
    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit

    units = [
        WorkUnit(
            dataset=DatasetSpec(name="d"),
            case_id=f"c{i}",
            model=ComponentSpec(name="m"),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )
        for i in range(10)
    ]
    now = [0.0]
    stream = io.StringIO()
    progress = RunProgress(
        units, stream=stream, interval=30.0, clock=lambda: now[0], heartbeat=False
    )
    for index, item in enumerate(units):
        now[0] = 10.0 * (index + 1)
        progress.start_group([item])
        progress.finish_group([item], 10.0)
    progress.close()
    shown = [line.split(" units")[0] for line in stream.getvalue().splitlines()]
    assert shown == [
        "intrabench: 1/10",
        "intrabench: 4/10",
        "intrabench: 7/10",
        "intrabench: 10/10",
    ]
    assert format_seconds(185) == "3m05s" and format_seconds(7440) == "2h04m"


def test_a_run_whose_work_is_all_incompatible_exits_non_zero(tmp_path, capsys):
    config = tmp_path / "run.json"
    config.write_text(
        json.dumps(
            {
                "name": "nothing",
                "datasets": ["demo-phantoms"],
                "models": ["region-growing-3d"],
                "prompters": ["box-per-slice"],
            }
        )
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "nothing to run" in capsys.readouterr().err


def test_metrics_are_computed_once_per_episode_and_a_metric_failure_fails_only_its_unit(
    tmp_path, monkeypatch
):
    """Each episode's metrics are computed as it ends (issue #13), once; an error there fails
    that unit, with its cause, and the others are written."""
    from intrabench.engine import finishing

    bad_z = _bad_z()
    calls = []
    original = finishing.evaluate_steps

    def evaluate_steps(results, ground_truth, *args, **kwargs):
        calls.append(len(results))
        if results[0].prompt.box3d is not None and results[0].prompt.box3d.z_min == bad_z:
            raise ZeroDivisionError("a metric divided by zero")
        return original(results, ground_truth, *args, **kwargs)

    monkeypatch.setattr(finishing, "evaluate_steps", evaluate_steps)
    config = parse_config({**SPEC, "models": ["region-growing-3d"]})
    runner = Runner(config, tmp_path / "run", background="inline")
    plan, _ = runner.run()
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    episodes = rows[["case", "target"]].drop_duplicates()
    failed_case = registry.datasets.create("demo-phantoms", {"n_cases": 3}).load("phantom_001")
    assert len(calls) == len(episodes) + len(failed_case.targets)  # once each, no second pass
    assert len(runner.failures) == 1 and runner.executed == len(plan.units) - 1
    assert runner.failures[0].cause.startswith("ZeroDivisionError: a metric divided by zero")
    assert set(rows.case) == {"phantom_000", "phantom_002"}


def test_a_plugin_failing_inside_torch_is_traced_to_its_own_line(tmp_path, capsys):
    """The cause names the plugin's line that called torch (and where torch raised); the full
    traceback is kept in RUN_DIR/failures/."""
    import inspect

    torch = pytest.importorskip("torch")

    class _TorchShapeBug(Model):
        name = "test-torch-shape-bug"
        dimension = 3
        accepts = frozenset({"box3d"})

        def set_case(self, image):
            self.shape = image.shape

        def predict(self, prompt, previous=None, update_slices=None):
            layer = torch.nn.Linear(4, 2)
            layer(torch.zeros(3, 5))  # the plugin's bug: shapes do not match
            return Prediction(mask=np.zeros(self.shape, bool))

    bug_line = next(
        number
        for number, line in enumerate(
            inspect.getsourcelines(_TorchShapeBug.predict)[0],
            start=inspect.getsourcelines(_TorchShapeBug.predict)[1],
        )
        if "layer(torch.zeros" in line
    )
    registry.models.register(_TorchShapeBug)
    try:
        config = tmp_path / "run.json"
        config.write_text(
            json.dumps(
                {
                    "name": "bug",
                    "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
                    "models": ["test-torch-shape-bug"],
                    "prompters": ["box-3d"],
                    "target_attributes": False,
                }
            )
        )
        out = tmp_path / "run"
        assert main(["run", str(config), "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"test_failures_and_progress.py:{bug_line}; raised in " in err
        assert f"full tracebacks: {out / 'failures'}" in err
        row = pd.read_csv(out / "failures.csv").iloc[0]
        assert row["cause"].startswith("RuntimeError: ")
        assert f"test_failures_and_progress.py:{bug_line}" in row["cause"]
        kept = (out / row["traceback_file"]).read_text()
        assert "Traceback (most recent call last)" in kept and "layer(torch.zeros(3, 5))" in kept
        assert "raised in torch/nn/modules/" in row["cause"]
        # every unit failed: the tables say so instead of naming a missing column
        assert main(["tables", str(out), "--out", str(tmp_path / "tables")]) == 1
        said = capsys.readouterr().err
        assert "no result rows in" in said and "1 work unit(s) failed, see failures.csv" in said
    finally:
        registry.models.unregister(_TorchShapeBug.name)


def test_progress_lines_come_inside_a_long_group_and_say_what_is_finished():
    """Off a terminal a line comes every interval even while one group runs on (the
    heartbeat), and after the last unit the lines say what is being finished."""
    import time as clock

    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit

    units = [
        WorkUnit(
            dataset=DatasetSpec(name="d"),
            case_id="c0",
            model=ComponentSpec(name="slow"),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )
    ]
    stream = io.StringIO()
    progress = RunProgress(units, stream=stream, interval=0.2)
    progress.start_group(units)
    clock.sleep(0.9)  # a long group: no finish_group yet
    inside = [line for line in stream.getvalue().splitlines() if "| c0 | slow |" in line]
    assert len(inside) >= 2 and all(line.startswith("intrabench: 0/1 units") for line in inside)
    progress.finish_group(units, 0.9)
    progress.finishing("finishing the last metrics")
    clock.sleep(0.5)
    progress.close()
    after = stream.getvalue().splitlines()
    assert any("finishing the last metrics" in line for line in after)
    count = len(after)
    clock.sleep(0.5)
    assert len(stream.getvalue().splitlines()) == count  # closed: the heartbeat stopped


def test_a_case_costs_what_it_cost_before_scaled_by_this_runs_speed():
    from intrabench.execution.eta import Record

    record = Record(
        rates={("m", "d"): 1.0}, case_rates={("m", "d", "big"): 5.0, ("m", "d", "small"): 0.5}
    )
    costs = UnitCosts(record)
    # cases of one dataset differ: each costs what it cost; an unrecorded one the dataset's rate
    assert costs.rate("m", "d", "big") == 5.0 and costs.rate("m", "d", "new") == 1.0
    costs.add("m", "d", 2, 30.0, case="first")  # the first group: warm-up, no case rate kept
    costs.add("m", "d", 2, 2.0, case="small")  # 1 s per unit where the record says 0.5
    # the speed compares like with like (the same case): twice as slow, on one case (shrunk
    # towards the record's as if 2 more cases agreed with it); 8 such cases: nearly 2
    assert costs.rate("m", "d", "big") == pytest.approx(5.0 * 2.0 ** (1 / 3))
    assert costs.rate("m", "d", "small") == pytest.approx(1.0)  # measured here
    assert costs.measured().case_rates == {("m", "d", "small"): 1.0}  # not the first group's
    for case in range(7):
        costs.record.case_rates[("m", "d", f"c{case}")] = 0.5
        costs.add("m", "d", 2, 2.0, case=f"c{case}")
    assert costs.rate("m", "d", "big") == pytest.approx(5.0 * 2.0 ** (8 / 10))


@pytest.mark.parametrize(
    "text",
    [
        '{"HOST": {"m": {"seconds_per_unit": {"d": 1e308}}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": Infinity}}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": 1e400}}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": 5e-324}}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": 1e300}}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": NaN}, "warm_up_seconds": -3}}}',
        '{"HOST": {"m": {"seconds_per_unit": {"d": "fast"}, "build_seconds": [1]}}}',
        '{"HOST": {"m": []}}',
        '{"HOST": []}',
        '{"HOST": {"m": {"cases": {"d": [1, 2]}}}}',
        "[" * 100000 + "]" * 100000,
        "[1, 2]",
        "null",
    ],
)
def test_a_bad_eta_record_is_ignored_with_one_line_never_fatal(text, tmp_path, caplog):
    """Issue #50 item 5: 1e308, 1e400, Infinity or 5e-324 raised OverflowError and killed the
    run before results.csv; deep nesting RecursionError; {"vm": []} a traceback after the
    results; 1e300 an ETA of 10^296 hours. A bad value is ignored (one log line) and the
    record is rewritten whole at the end of the run."""
    import platform

    from intrabench.execution.progress import format_seconds

    path = tmp_path / "unit-seconds.json"
    path.write_text(text.replace("HOST", platform.node()))
    with caplog.at_level("WARNING"):
        record = read_record(path)
    assert record.rates == {} and record.warm_up == {} and record.builds == {}
    if text not in ("null", "[1, 2]"):
        assert len([r for r in caplog.records if "record" in r.getMessage()]) == 1
    measured = read_record(tmp_path / "none.json")
    measured.rates[("m", "d")] = 2.5
    measured.case_rates[("m", "d", "c")] = 2.5
    measured.builds["m"] = 1.0
    write_record(measured, path)  # the bad record is repaired, not a traceback
    assert read_record(path).rates == {("m", "d"): 2.5}
    assert format_seconds(1e300) == ">999h" and format_seconds(float("inf")) == ">999h"
    assert format_seconds(float("nan")) == "?" and format_seconds(3725) == "1h02m"


def test_a_record_of_zero_warm_ups_and_builds_is_read_without_a_word(tmp_path, caplog):
    """What write_record itself writes for a warm-up or build too short to measure (0.0)."""
    import platform

    path = tmp_path / "unit-seconds.json"
    path.write_text(
        '{"HOST": {"m": {"seconds_per_unit": {"d": 0.5}, "warm_up_seconds": 0.0, '
        '"build_seconds": 0}}}'.replace("HOST", platform.node())
    )
    with caplog.at_level("WARNING"):
        record = read_record(path)
    assert record.rates == {("m", "d"): 0.5} and record.warm_up == {} and record.builds == {}
    assert not caplog.records


def test_the_closing_hint_does_not_promise_a_retry_that_fails_again():
    """Issue #50 item 11: units that failed on their input (a case without a modality for
    LiteMedSAM) were told 'rerun the same command to retry them'."""
    from intrabench.commands.run import _retry_hint
    from intrabench.engine.failures import UnitFailure

    def failure(cause: str) -> UnitFailure:
        return UnitFailure("d", "c", "m", "p", "none", 0, "", cause)

    data = failure("UserError: litemedsam needs to know whether the case is CT or MR (x.py:1)")
    checkpoint = failure("CheckpointError: cannot load checkpoint w.pt: truncated (y.py:2)")
    chance = failure("RuntimeError: CUDA out of memory (z.py:3)")
    assert _retry_hint([data, checkpoint]).startswith("each failed on its input")
    assert _retry_hint([data, chance]).startswith("1 of them failed on their input")
    assert _retry_hint([chance]) == "rerun the same command to retry them"


def test_an_eta_of_nothing_timed_is_no_estimate():
    """Before anything is timed the line said "ETA 0s + 2 models not timed yet" (#51 item 6)."""
    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit
    from intrabench.execution.eta import UnitCosts
    from intrabench.execution.progress import RunProgress

    units = [
        WorkUnit(
            dataset=DatasetSpec(name="d"),
            case_id="c",
            model=ComponentSpec(name=m),
            prompter=ComponentSpec(name="p"),
            refiner=None,
            seed=0,
            steps=0,
            keep_previous_prompts=True,
        )
        for m in ("a", "b")
    ]
    progress = RunProgress(
        units,
        stream=io.StringIO(),
        interval=0.0,
        clock=lambda: 0.0,
        heartbeat=False,
        costs=UnitCosts(),
    )
    assert progress._eta_text(0.0) == "no ETA yet: 2 models not timed yet"
    progress.close()
