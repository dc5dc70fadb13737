"""Hostile and careless configs: one clear line each, fast, never a traceback (#50 items 5, 9)."""

from __future__ import annotations

import time

import pytest

from intrabench.cli import main
from intrabench.config import load_config
from intrabench.errors import ConfigError, UserError

BASE = (
    "name: hostile\ndatasets: [{name: demo-phantoms, n_cases: 1, shape: [12, 32, 32]}]\n"
    "models: [region-growing-3d]\nprompters: [box-3d]\n"
)

BOMB = """name: bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
datasets: [demo-phantoms]
models: [{name: region-growing-3d, multiplier: *h}]
prompters: [box-3d]
"""


def _write(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="expands to more than 100,000 values"):
        load_config(_write(tmp_path, BOMB))
    assert time.perf_counter() - started < 5  # before: 98 s and 6.8 GB


def test_deep_nesting_is_one_line(tmp_path, capsys):
    deep = BASE + "extra: " + "[" * 5000 + "]" * 5000 + "\n"
    assert main(["run", str(_write(tmp_path, deep)), "--dry-run"]) != 0
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "Traceback" not in err


def test_an_error_quotes_a_value_briefly(tmp_path, capsys):
    long = BASE.replace(
        "models: [region-growing-3d]",
        "models: [{name: region-growing-3d, multiplier: [" + "1, " * 20000 + "1]}]",
    )
    assert main(["run", str(_write(tmp_path, long)), "--dry-run"]) != 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "multiplier" in line and len(line) < 400


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ("seeds: [99999999999999999999999]\n", "seeds must be whole numbers from 0 to 2^63 - 1"),
        ("seeds: [-1]\n", "seeds must be whole numbers from 0 to 2^63 - 1"),
        ("nsd_tolerance_mm: .inf\n", "nsd_tolerance_mm"),
        ("time_model: {seconds: {click: .inf}}\n", "seconds"),
        (
            "time_model: {waiting: table, latency_table: {region-growing-3d: {warm: -120}}}\n",
            "latency is a number of seconds from 0",
        ),
        (
            "time_model: {waiting: table, latency_table: {region-growing-3d: {clik: 1.0}}}\n",
            "unknown key 'clik'",
        ),
    ],
)
def test_values_that_cannot_be_right_are_refused(tmp_path, replace, message):
    with pytest.raises(
        UserError, match=message.replace("^", r"\^").replace(".", r"\.").replace("(", r"\(")
    ):
        load_config(_write(tmp_path, BASE + replace))


def test_empty_cases_and_huge_phantom_counts_say_what_is_wrong(tmp_path, capsys):
    empty = BASE.replace("shape: [12, 32, 32]}", "shape: [12, 32, 32], cases: []}")
    with pytest.raises(ConfigError, match="cases"):
        load_config(_write(tmp_path, empty))
    huge = BASE.replace("n_cases: 1", "n_cases: 100000000")
    started = time.perf_counter()
    assert main(["run", str(_write(tmp_path, huge)), "--dry-run"]) != 0
    assert "n_cases must be from 1 to 10,000" in capsys.readouterr().err
    assert time.perf_counter() - started < 10


def test_duplicate_seeds_are_found_in_linear_time():
    from intrabench.config import RunConfig

    seeds = list(range(40_000)) + [7]
    started = time.perf_counter()
    with pytest.raises(Exception, match=r"seeds listed twice: \[7\]"):
        RunConfig.model_validate(
            {
                "seeds": seeds,
                "datasets": ["demo-phantoms"],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
            }
        )
    assert time.perf_counter() - started < 5  # before: 43 s


def test_a_latency_table_file_with_nan_is_refused(tmp_path):
    import json

    from intrabench.timing.waiting import load_table

    table = tmp_path / "lat.json"
    table.write_text(json.dumps({"models": {"m": {"first": 1.0, "warm": float("nan")}}}))
    with pytest.raises(UserError, match=r"m\.warm = nan: a latency is a number of seconds"):
        load_table(str(table))
