"""The execution settings: one frozen object built at the command line from its flags, an
optional file and the environment; the engine and the executors never see argparse."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from intrabench.cli import main
from intrabench.errors import ConfigError, UserError
from intrabench.execution.settings import DaskSettings, ExecutionSettings

ROOT = Path(__file__).resolve().parents[2]


def test_flags_win_over_the_file_and_the_file_over_the_environment(tmp_path):
    file = tmp_path / "execution.yaml"
    file.write_text("executor: dask\nworkers: 3\nuser_workers: 2\nprogress_interval_s: 2.0\n")
    settings = ExecutionSettings.from_sources(
        {"workers": 1, "gpus": None, "task_resources": []},
        file,
        environ={"TQDM_MININTERVAL": "0.25"},
    )
    assert settings.executor == "dask"
    assert settings.dask == DaskSettings(workers=1)  # the flag; None and [] are not given
    assert settings.user_workers == 2
    assert settings.progress_interval_s == 2.0  # the file's, over the environment's 0.25
    assert ExecutionSettings.from_sources({}, environ={"TQDM_MININTERVAL": "0.25"}) == (
        ExecutionSettings(progress_interval_s=0.25)
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.executor = "local"


def test_gpus_are_device_indices_and_count_the_workers():
    settings = ExecutionSettings.from_sources(
        {"executor": "dask", "gpus": " 0, 1,,2", "workers_per_gpu": 2}, environ={}
    )
    assert settings.dask.gpus == ("0", "1", "2")
    assert settings.dask.gpu_workers == 6


def test_an_unknown_key_of_the_file_is_one_line_with_the_close_name(tmp_path):
    file = tmp_path / "execution.yaml"
    file.write_text("executor: dask\nworker: 3\n")
    with pytest.raises(ConfigError, match=r"unknown key 'worker' \(did you mean 'workers'\?\)"):
        ExecutionSettings.from_sources({}, file, environ={})
    file.write_text("user_workers: two\n")
    with pytest.raises(ConfigError, match="user_workers must be a whole number, got 'two'"):
        ExecutionSettings.from_sources({}, file, environ={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("user_workers: -3\n", "user_workers must be 0 or more, got -3"),
        ("user_workers: .nan\n", "user_workers must be a whole number, got nan"),
        ("user_workers: {a: {b: [1, 2]}}\n", "user_workers must be a whole number, got {'a'"),
        ("[1, 2, 3]\n", "expected a mapping like"),
        ("garbage: [\n", "invalid YAML"),
    ],
)
def test_hostile_values_of_the_file_are_one_line(tmp_path, text, message):
    file = tmp_path / "execution.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        ExecutionSettings.from_sources({}, file, environ={})


def test_a_huge_file_is_refused_before_it_is_read(tmp_path):
    file = tmp_path / "execution.yaml"
    file.write_text("a" * 2_000_000)
    with pytest.raises(UserError, match="more than a execution settings file may hold"):
        ExecutionSettings.from_sources({}, file, environ={})


def test_dask_options_of_a_file_without_the_dask_executor_are_refused(tmp_path):
    file = tmp_path / "execution.yaml"
    file.write_text("workers: 3\n")
    with pytest.raises(UserError, match="--workers: only used with --executor dask"):
        ExecutionSettings.from_sources({}, file, environ={})
    with pytest.raises(UserError, match="TQDM_MININTERVAL='soon': not a number of seconds"):
        ExecutionSettings.from_sources({}, environ={"TQDM_MININTERVAL": "soon"})


def test_the_run_command_reads_the_execution_file(tmp_path, capsys):
    file = tmp_path / "execution.yaml"
    file.write_text("executor: dask\nworkers: 0\n")
    assert main(["run", "--execution", str(file), "--out", str(tmp_path / "run")]) == 2
    assert "--workers 0: a local Dask cluster takes 1 to" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before the run's folder is written


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_neither_the_engine_nor_the_executors_import_argparse():
    modules = sorted((ROOT / "intrabench" / "engine").glob("*.py"))
    modules += sorted((ROOT / "intrabench" / "execution").glob("*.py"))
    assert len(modules) > 20
    assert [m.name for m in modules if "argparse" in _imports(m)] == []


def test_run_is_a_command_module_like_the_others():
    from intrabench import cli
    from intrabench.commands import run

    assert not hasattr(cli, "cmd_run")
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--executor", "dask", "--workers", "2"])
    assert args.func is run.cmd_run
    assert run.execution_settings(args).dask.workers == 2


def test_the_runners_old_path_still_imports_with_one_warning():
    import importlib
    import sys

    from intrabench.execution.runner import Runner

    sys.modules.pop("intrabench.engine.runner", None)
    with pytest.warns(DeprecationWarning, match="intrabench.engine.runner moved to intrabench"):
        old = importlib.import_module("intrabench.engine.runner")
    assert old.Runner is Runner
