"""A run directory belongs to one run: no foreign files overwritten, no two runs at once, no
stale rows after a changed setting."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.config import parse_config
from intrabench.errors import UserError
from intrabench.execution.runner import Runner
from intrabench.io.results import measured_columns
from intrabench.io.run_directory import RunLock

SPEC = {
    "name": "dir-test",
    "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
    "models": ["region-growing-3d"],
    "prompters": ["box-3d"],
    "refiners": ["scribble"],
    "refinement_steps": 1,
}


def _config(**changes):
    return parse_config({**SPEC, **changes})


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in frame.columns if c not in measured_columns(frame)]
    return frame[keep].sort_values(["case", "target", "step"]).reset_index(drop=True)


def test_a_folder_with_the_users_own_files_is_refused(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    for name, text in (
        ("config.yaml", "my: config\n"),
        ("run.json", '{"mine": 1}'),
        ("results.csv", "a,b\n1,2\n"),
    ):
        (project / name).write_text(text)
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps(SPEC))
    monkeypatch.chdir(project)
    assert main(["run", str(config), "--out", "."]) == 2
    err = capsys.readouterr().err
    assert "holds files this run did not write" in err and "Traceback" not in err
    assert (project / "config.yaml").read_text() == "my: config\n"  # untouched
    assert (project / "run.json").read_text() == '{"mine": 1}'
    assert sorted(p.name for p in project.iterdir()) == ["config.yaml", "results.csv", "run.json"]
    (project / "notes.txt").write_text("x")
    (project / "config.yaml").unlink()
    (project / "run.json").unlink()
    (project / "results.csv").unlink()
    assert main(["run", str(config), "--out", "."]) == 2  # any foreign file


def test_a_previous_run_folder_resumes_and_a_renamed_run_is_refused(tmp_path):
    Runner(_config(), tmp_path / "run").run()
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "run" / "units").iterdir()}
    Runner(_config(), tmp_path / "run").run()  # its own folder: resumes, nothing recomputed
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "run" / "units").iterdir()} == stamps
    with pytest.raises(UserError, match="holds the run 'dir-test'; this config is named 'other'"):
        Runner(_config(name="other"), tmp_path / "run").prepare()


def test_two_runs_cannot_write_to_one_folder_at_once(tmp_path):
    (tmp_path / "run").mkdir()
    holder = RunLock(tmp_path / "run")
    holder.acquire()
    try:
        with pytest.raises(UserError, match="in use by another IntraBench run .pid"):
            Runner(_config(), tmp_path / "run").prepare()
    finally:
        holder.release()
    plan, problems = Runner(_config(), tmp_path / "run").run()  # free again
    assert not problems and len(plan.units) == 2


def test_a_changed_tolerance_recomputes_instead_of_keeping_stale_rows(tmp_path):
    Runner(_config(), tmp_path / "run").run()
    at_two = pd.read_parquet(tmp_path / "run" / "results.parquet")
    Runner(_config(nsd_tolerance_mm=5.0), tmp_path / "run", extend=True).run()
    rerun = pd.read_parquet(tmp_path / "run" / "results.parquet")
    Runner(_config(nsd_tolerance_mm=5.0), tmp_path / "fresh").run()
    fresh = pd.read_parquet(tmp_path / "fresh" / "results.parquet")
    assert set(rerun["nsd_tolerance_mm"]) == {5.0}
    pd.testing.assert_frame_equal(_measured(rerun), _measured(fresh))
    assert (
        rerun.sort_values(["case", "target", "step"])["nsd"].to_numpy()
        >= at_two.sort_values(["case", "target", "step"])["nsd"].to_numpy()
    ).all()
    assert not _measured(rerun)["nsd"].equals(_measured(at_two)["nsd"])


def test_turning_on_save_predictions_later_writes_them(tmp_path):
    Runner(_config(), tmp_path / "run").run()
    assert not (tmp_path / "run" / "predictions").exists()
    Runner(_config(save_predictions=True), tmp_path / "run", extend=True).run()
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    files = list((tmp_path / "run" / "predictions").rglob("*.nii.gz"))
    assert len(files) == rows.groupby(["case", "target"]).ngroups > 0


def test_a_damaged_unit_file_is_recomputed_and_tables_warn_on_a_partial_run(tmp_path, capsys):
    Runner(_config(), tmp_path / "run").run()
    complete = pd.read_parquet(tmp_path / "run" / "results.parquet")
    units = sorted((tmp_path / "run" / "units").glob("*.parquet"))
    units[0].write_bytes(units[0].read_bytes()[:100])  # cut short (a full disk, a bad copy)
    plan, problems = Runner(_config(), tmp_path / "run").run()
    assert not problems
    assert (units[0].parent / (units[0].name + ".damaged")).exists()
    again = pd.read_parquet(tmp_path / "run" / "results.parquet")
    pd.testing.assert_frame_equal(_measured(again), _measured(complete))

    units[1].unlink()  # as if the run had been interrupted before that unit
    (tmp_path / "run" / "results.parquet").unlink()
    assert main(["tables", str(tmp_path / "run"), "--out", str(tmp_path / "t")]) == 0
    err = capsys.readouterr().err
    assert "is incomplete: 1 of 2 work units finished" in err


def test_damaged_results_and_unit_files_are_one_warning_to_the_commands_that_read_them(
    tmp_path, capsys, caplog
):
    """A results.parquet cut short is read from the unit files instead; a unit file cut short
    is left out of what `tables` shows, with a warning naming it (a traceback before)."""
    Runner(_config(), tmp_path / "run").run()
    complete = pd.read_parquet(tmp_path / "run" / "results.parquet")
    consolidated = tmp_path / "run" / "results.parquet"
    consolidated.write_bytes(consolidated.read_bytes()[:100])
    assert main(["tables", str(tmp_path / "run"), "--out", str(tmp_path / "t")]) == 0
    assert "results.parquet is damaged" in caplog.text and "unit files instead" in caplog.text
    read = pd.read_csv(tmp_path / "t" / "statistics.csv")
    caplog.clear()

    consolidated.unlink()
    units = sorted((tmp_path / "run" / "units").glob("*.parquet"))
    units[0].write_bytes(units[0].read_bytes()[:100])
    assert main(["tables", str(tmp_path / "run"), "--out", str(tmp_path / "t2")]) == 0
    assert f"unit file {units[0].name} is damaged" in caplog.text
    assert "Traceback" not in capsys.readouterr().err
    partial = pd.read_csv(tmp_path / "t2" / "statistics.csv")
    assert len(read) > 0 and partial["n_cases"].sum() < read["n_cases"].sum()

    Runner(_config(), tmp_path / "run").run()  # the next run rewrites both
    pd.testing.assert_frame_equal(_measured(pd.read_parquet(consolidated)), _measured(complete))


def test_a_damaged_run_record_is_named_not_a_traceback(tmp_path, capsys, caplog):
    Runner(_config(), tmp_path / "run").run()
    (tmp_path / "run" / "run.json").write_text('{"versions": ')  # a copy cut short
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
    assert "run.json is damaged (not JSON)" in caplog.text
    assert (tmp_path / "report" / "report.html").exists()
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps(SPEC))
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "whose run.json is damaged (not JSON)" in err and "Traceback" not in err
    assert main(["tables", str(tmp_path / "run" / "results.csv")]) == 2
    assert "results.csv is a file; give the run's folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\x00\xff garbage", None),
        ("[1, 2, 3]", None),
        ("-1", None),
        ("NaN", None),
        ('{"versions": {"intrabench": {"nested": [NaN, -1e308]}}}', True),
        ('{"versions": ["intrabench"]}', False),
        ('{"versions": null, "machine": 7}', False),
        ('{"versions": {"x": 1}, "pad": "' + "a" * 2_000_000 + '"}', False),
    ],
)
def test_hostile_run_records_are_damaged_or_foreign_never_a_traceback(tmp_path, text, expected):
    """run.json as garbage, a list, a number, NaN, nested, of the wrong types or huge: read as
    damaged (None) or as a record that is or is not IntraBench's; the machine only if a dict."""
    from intrabench.io.run_directory import _is_intrabench_run, run_machine, run_record

    (tmp_path / "run.json").write_text(text, encoding="latin-1")
    record = run_record(tmp_path)
    assert (record is None) == (expected is None)
    if expected is not None:
        assert _is_intrabench_run(tmp_path) is expected
    assert run_machine(tmp_path) is None


@pytest.mark.parametrize(
    "problems",
    [
        "garbage\x00\xff",
        "dataset,case,model,units,problem\nd,c,m,many,p\n",
        "",
        "units\n-5\n",
        "dataset,case,model,units,problem\nd,c,m,NaN,p\n",
        "dataset,case,model,units,problem\nd,c,m,1e9,p\n",
        'dataset,case,model,units,problem\nd,c,m,"[[1]]",p\n',
        "dataset,case,model,units,problem\n" + "d,c,m,x,p\n" * 200_000,  # huge
    ],
)
def test_a_damaged_problems_list_is_read_as_no_problems(tmp_path, capsys, problems):
    """The incompleteness line reads problems.csv and failures.csv: damaged, they count
    nothing (the missing units are then called not run yet), never a traceback."""
    Runner(_config(), tmp_path / "run").run()
    sorted((tmp_path / "run" / "units").glob("*.parquet"))[0].unlink()
    (tmp_path / "run" / "results.parquet").unlink()
    (tmp_path / "run" / "problems.csv").write_bytes(problems.encode("utf-8", "surrogateescape"))
    (tmp_path / "run" / "failures.csv").write_text('not,a\n"broken')
    assert main(["tables", str(tmp_path / "run"), "--out", str(tmp_path / "t")]) == 0
    err = capsys.readouterr().err
    assert "is incomplete: 1 of 2 work units finished; 1 not run yet" in err


def test_a_run_killed_without_closing_is_named_by_the_next_one(tmp_path, caplog):
    """A run killed by the system (out of memory) or kill -9 left no word: the next run
    resumed in silence. The lock file names its holder while a run lasts and is emptied when
    the run closes, so a name left there is a run that never closed."""
    import logging
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    Runner(_config(), tmp_path / "run").run()
    assert (tmp_path / "run" / ".lock").read_text() == ""  # closed: emptied
    # a process that takes the lock and is killed with SIGKILL while holding it
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import sys, time
        from intrabench.io.run_directory import RunLock
        RunLock(sys.argv[1]).acquire()
        print("held", flush=True)
        time.sleep(60)
        """),
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    left = (tmp_path / "run" / ".lock").read_text()
    assert left.startswith(f"pid {holder.pid} on ") and ", started " in left
    with caplog.at_level(logging.WARNING, logger="intrabench.execution.runner"):
        plan, problems = Runner(_config(), tmp_path / "run").run()
    assert not problems
    warned = [r.getMessage() for r in caplog.records if "ended without closing" in r.getMessage()]
    assert len(warned) == 1 and f"({left})" in warned[0] and "out of memory?" in warned[0]
    assert (tmp_path / "run" / ".lock").read_text() == ""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="intrabench.execution.runner"):
        Runner(_config(), tmp_path / "run").run()
    assert not any("ended without closing" in r.getMessage() for r in caplog.records)


def test_a_refused_run_closes_its_lock_and_the_next_one_has_nothing_to_say(tmp_path, caplog):
    """A run refused while it prepares (another config recorded in the folder) held the lock
    and named itself there; the next run must not take it for a killed one."""
    import logging

    Runner(_config(), tmp_path / "run").run()
    with pytest.raises(UserError):
        Runner(_config(refinement_steps=2), tmp_path / "run").prepare()
    assert (tmp_path / "run" / ".lock").read_text() == ""
    with caplog.at_level(logging.WARNING, logger="intrabench.execution.runner"):
        Runner(_config(refinement_steps=2), tmp_path / "run", extend=True).run()
    assert not any("ended without closing" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "left",
    [b"\x00\xff\xfe garbage", b"pid \xff\xfe", b"pid " + b"9" * 5000, b"pid \n\n\t", b"x" * 10_000],
)
def test_a_lock_file_with_anything_in_it_is_taken_and_emptied(tmp_path, caplog, left):
    """The lock file's left-over text is shown only when it reads like a holder ("pid ..."),
    cut to 500 characters; anything else is taken over in silence; never a traceback."""
    import logging

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").write_bytes(left)  # invalid UTF-8 too
    with caplog.at_level(logging.WARNING, logger="intrabench.execution.runner"):
        plan, problems = Runner(_config(), tmp_path / "run").run()
    assert not problems and len(plan.units) == 2
    warned = [r.getMessage() for r in caplog.records if "ended without closing" in r.getMessage()]
    assert len(warned) == (1 if left.strip().startswith(b"pid ") else 0)
    assert all(len(message) < 1000 for message in warned)
    assert (tmp_path / "run" / ".lock").read_text() == ""
