"""A run folder's config.yaml is read with the config loader's guards (#72 item 6): an alias
bomb there cost 85-139 s and 4 GB in ``tables``, ``report`` and ``run --out``; a plain 10 MB
list of seeds took 100 s and 1.2 GB before a refusal that blamed aliases."""

from __future__ import annotations

import time

import pytest

from intrabench.cli import main
from intrabench.config import load_config, run_config
from intrabench.errors import ConfigError, UserError
from intrabench.io.run_directory import check_same_run
from tests.run_experience.test_hostile_configs import BOMB
from tests.run_helpers import run_config as run_through_cli

CONFIG = (
    "name: guarded\ndatasets: [{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}]\n"
    "models: [region-growing-3d]\nprompters: [box-3d]\n"
)
SEEDS_10_MB = "seeds: [" + ", ".join(str(i) for i in range(1_240_000)) + "]\n"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return run_through_cli(tmp_path_factory.mktemp("guard"), CONFIG)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOMB, "expands to more than 100,000 values (aliases repeated inside aliases?)"),
        (CONFIG + SEEDS_10_MB, "10.0 MB is more than a run's config.yaml may hold (1 MB)"),
    ],
)
def test_readers_of_a_run_folder_refuse_a_bomb_at_once(finished_run, capsys, text, message):
    kept = (finished_run / "config.yaml").read_text()
    (finished_run / "config.yaml").write_text(text)
    try:
        started = time.perf_counter()
        with pytest.raises(
            UserError,
            match=message.replace("(", r"\(")
            .replace(")", r"\)")
            .replace("?", r"\?")
            .replace(".", r"\."),
        ):
            run_config(finished_run)
        assert time.perf_counter() - started < 5  # before: 85-139 s (the bomb), 100 s (seeds)
        started = time.perf_counter()
        config = load_config_text(finished_run.parent, kept)
        check_same_run(finished_run, config)  # run --out: nothing to compare with, at once
        assert time.perf_counter() - started < 5
        capsys.readouterr()
        started = time.perf_counter()
        status = main(["tables", str(finished_run)])  # its time tables read the config
        err = capsys.readouterr().err
        assert time.perf_counter() - started < 20 and "Traceback" not in err
        assert status == 0 or (status == 2 and message.split(" (")[0] in err.splitlines()[-1])
    finally:
        (finished_run / "config.yaml").write_text(kept)


def load_config_text(folder, text):
    path = folder / "again.yaml"
    path.write_text(text)
    return load_config(path)


def test_a_config_file_over_1_mb_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG + SEEDS_10_MB)
    started = time.perf_counter()
    with pytest.raises(
        ConfigError,
        match=r"10\.0 MB is more than a config file may hold "
        r"\(1 MB\)",
    ):
        load_config(path)
    assert time.perf_counter() - started < 1


def test_a_long_plain_list_is_not_blamed_on_aliases(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(CONFIG + "seeds: [" + "0, " * 150_000 + "0]\n")  # 450 kB, no alias
    started = time.perf_counter()
    with pytest.raises(
        ConfigError,
        match=r"expands to more than 100,000 values \(a list of "
        r"seeds or cases this long\?\)",
    ) as error:
        load_config(path)
    assert "alias" not in str(error.value)
    assert time.perf_counter() - started < 5  # counted on parser events, stopped at the bound
