"""Models in their own environments: a served model gives the rows of the same model in
process, bit for bit, over every way to reach it; every fault of a server fails its units in
one line and the run goes on; the wire refuses what is not its protocol."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench.config import RunConfig
from intrabench.errors import ConfigError
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results
from intrabench.serving.connection import ModelServerError, ServerConnection
from intrabench.serving.protocol import pack_mask, prompt_from_wire, prompt_to_wire, unpack_mask
from intrabench.serving.spec import RunsIn
from intrabench.serving.wire import Channel, WireError
from intrabench.types import Box2D, Box3D, Interaction, Lasso, Prompt, Scribble

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
KEYS = ["dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]
PHANTOMS = {"name": "demo-phantoms", "n_cases": 2}


def comparable(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows without what depends on the machine's speed (timings, peak memory)."""
    kept = [c for c in rows.columns if not c.endswith("_seconds") and c != "peak_host_mb"]
    return rows[kept].sort_values(KEYS).reset_index(drop=True)


def run_rows(
    tmp: Path,
    name: str,
    models: list,
    prompters=("box-3d", "center-points-per-volume"),
    refiners=("scribble",),
    steps: int = 2,
    **extra,
) -> tuple[pd.DataFrame, Runner]:
    config = RunConfig.model_validate(
        {
            "name": "served",
            "datasets": [PHANTOMS],
            "models": models,
            "prompters": list(prompters),
            "refiners": list(refiners),
            "refinement_steps": steps,
            **extra,
        }
    )
    config.validate_components()
    runner = Runner(config, tmp / name)
    runner.run()
    return load_results(tmp / name), runner


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "intrabench", "serve-model", *args]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory) -> pd.DataFrame:
    rows, _ = run_rows(
        tmp_path_factory.mktemp("in-process"), "run", ["region-growing-3d", "random-walker-2d"]
    )
    return comparable(rows)


def region_growing_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of region growing (or its double), without the model's name."""
    kept = rows[rows["model"].str.startswith(("region-growing-3d", "faulty-region-growing"))]
    assert len(kept)
    return kept.drop(columns="model").reset_index(drop=True)


@pytest.fixture()
def doubles(monkeypatch):
    """The serving tests' doubles, importable by the servers a test starts, and registered
    here only by their servers' descriptions (removed afterwards)."""
    from intrabench import registry

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    yield serve_command("--import", "tests.serving.served_doubles", "--stdio")
    registry.models.unregister("faulty-region-growing")


# -- the same rows, whatever the way ----------------------------------------------------------
@pytest.mark.parametrize("transfer", ["file", "stream"])
def test_a_model_served_from_another_python_gives_the_in_process_rows(
    tmp_path, in_process, transfer
):
    runs_in = {"python": sys.executable, "image_transfer": transfer}
    rows, _ = run_rows(
        tmp_path,
        "served",
        [
            {"name": "region-growing-3d", "runs_in": runs_in},
            {"name": "random-walker-2d", "runs_in": runs_in},
        ],
    )
    # 7 targets in the 2 phantom cases x 2 models x 2 prompters x 3 steps
    assert len(rows) == len(in_process) == 84
    pd.testing.assert_frame_equal(comparable(rows), in_process)


def test_serve_model_over_a_socket_gives_the_in_process_rows(tmp_path, in_process):
    servers = [
        subprocess.Popen(
            serve_command(name, "--listen", "127.0.0.1:0"), stderr=subprocess.PIPE, text=True
        )
        for name in ("region-growing-3d", "random-walker-2d")
    ]
    try:
        ports = []
        for server in servers:
            line = server.stderr.readline()
            ports.append(int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1)))
        rows, _ = run_rows(
            tmp_path,
            "socket",
            [
                {"name": "region-growing-3d", "runs_in": {"url": f"tcp://127.0.0.1:{ports[0]}"}},
                {"name": "random-walker-2d", "runs_in": {"url": f"tcp://127.0.0.1:{ports[1]}"}},
            ],
        )
    finally:
        for server in servers:
            server.kill()
            server.wait()
    pd.testing.assert_frame_equal(comparable(rows), in_process)


def test_a_command_is_told_the_model_and_the_unit_keys_do_not_name_where_it_ran(
    tmp_path, in_process
):
    command = serve_command("--stdio")  # no name: INTRABENCH_SERVE_MODEL says it
    rows, _ = run_rows(
        tmp_path,
        "command",
        [
            {"name": "region-growing-3d", "runs_in": {"command": command}},
            {"name": "random-walker-2d", "runs_in": {"command": " ".join(command)}},
        ],
    )
    pd.testing.assert_frame_equal(comparable(rows), in_process)
    local, _ = run_rows(tmp_path, "local", ["region-growing-3d", "random-walker-2d"])
    assert sorted(p.name for p in (tmp_path / "command" / "units").iterdir()) == sorted(
        p.name for p in (tmp_path / "local" / "units").iterdir()
    )


def test_a_server_of_another_model_is_refused(tmp_path):
    runs_in = RunsIn(command=serve_command("random-walker-2d", "--stdio"))
    with pytest.raises(
        ModelServerError, match="serves model 'random-walker-2d', not 'region-growing-3d'"
    ):
        ServerConnection("region-growing-3d", {}, runs_in)


def test_a_propagation_prompter_queries_a_served_2d_model_slice_by_slice(tmp_path):
    models = [{"name": "random-walker-2d"}]
    served = [{"name": "random-walker-2d", "runs_in": {"python": sys.executable}}]
    local, _ = run_rows(
        tmp_path, "local", models, prompters=["box-propagation"], refiners=[], steps=0
    )
    remote, _ = run_rows(
        tmp_path, "remote", served, prompters=["box-propagation"], refiners=[], steps=0
    )
    assert len(local) == 7  # one row per target
    pd.testing.assert_frame_equal(comparable(remote), comparable(local))


def test_a_model_installed_only_where_it_runs_is_described_by_its_server(
    tmp_path, in_process, doubles
):
    from intrabench import registry

    spec = {
        "name": "faulty-region-growing",
        "runs_in": {"command": doubles},
        "marker": str(tmp_path / "never"),
        "at": 10**6,
    }
    assert "faulty-region-growing" not in registry.models.names()  # not imported here
    rows, _ = run_rows(tmp_path, "described", [spec])
    cls = registry.models.get("faulty-region-growing")
    assert cls.dimension == 3 and {"box3d", "point", "mask"} <= cls.accepts
    pd.testing.assert_frame_equal(
        region_growing_rows(comparable(rows)), region_growing_rows(in_process)
    )


# -- faults are unit failures -----------------------------------------------------------------
def test_a_server_killed_mid_run_fails_only_the_units_in_flight_and_a_rerun_redoes_them(
    tmp_path, in_process, doubles
):
    spec = {
        "name": "faulty-region-growing",
        "runs_in": {"command": doubles},
        "marker": str(tmp_path / "killed"),
        "at": 5,
    }
    rows, runner = run_rows(tmp_path, "run", [spec])
    assert (tmp_path / "killed").exists()
    assert 1 <= len(runner.failures) < 4  # the units in flight, not the run's 4
    causes = {failure.cause for failure in runner.failures}
    assert all("killed by signal 9" in cause or "was restarted" in cause for cause in causes)
    assert any("killed by signal 9" in cause for cause in causes)
    assert all("\n" not in cause for cause in causes)
    assert 0 < len(rows) < 42
    # the same command again: only the failed units run, and the rows are complete
    rows, runner = run_rows(tmp_path, "run", [spec])
    assert runner.failures == []
    pd.testing.assert_frame_equal(
        region_growing_rows(comparable(rows)), region_growing_rows(in_process)
    )


def test_a_hung_server_fails_its_unit_after_timeout_s_and_the_run_goes_on(tmp_path, doubles):
    spec = {
        "name": "faulty-region-growing",
        "runs_in": {"command": doubles, "timeout_s": 1.5},
        "marker": str(tmp_path / "hung-marker"),
        "at": 2,
        "fault": "hang",
    }
    started = time.perf_counter()
    rows, runner = run_rows(tmp_path, "hung", [spec], prompters=["box-3d"], refiners=[], steps=0)
    assert time.perf_counter() - started < 60
    assert len(runner.failures) == 1
    assert "stopped answering: nothing for 1.5 s" in runner.failures[0].cause
    failed_case = runner.failures[0].case
    assert len(rows) > 0 and failed_case not in set(rows["case"])


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("http", "answered b'HTTP/1.1 400 Bad'"),
        ("version", "speaks model protocol 99"),
        ("exit", "exited with code 3; its last line: this environment has no torch"),
    ],
)
def test_a_server_that_is_not_this_protocol_is_refused_in_one_line(kind, expected):
    runs_in = RunsIn(
        command=[sys.executable, str(HERE / "garbage_server.py"), kind], start_timeout_s=20
    )
    with pytest.raises(ModelServerError) as raised:
        ServerConnection("region-growing-3d", {}, runs_in)
    assert expected in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_silent_server_and_a_missing_command_and_an_unreachable_url_are_one_line():
    silent = RunsIn(
        command=[sys.executable, str(HERE / "garbage_server.py"), "silent"], start_timeout_s=1
    )
    with pytest.raises(ModelServerError, match="nothing for 1 s"):
        ServerConnection("m", {}, silent)
    with pytest.raises(ModelServerError, match="cannot start the model server of 'm'"):
        ServerConnection("m", {}, RunsIn(command=["/nonexistent/python"]))
    with pytest.raises(ModelServerError, match="cannot reach the model server of 'm'"):
        ServerConnection("m", {}, RunsIn(url="tcp://127.0.0.1:1", start_timeout_s=2))


def test_a_garbage_server_in_a_run_fails_its_units_and_the_run_ends(tmp_path):
    runs_in = {"command": [sys.executable, str(HERE / "garbage_server.py"), "exit"]}
    config = RunConfig.model_validate(
        {
            "name": "garbage",
            "datasets": [PHANTOMS],
            "prompters": ["box-3d"],
            "models": [{"name": "region-growing-3d", "runs_in": runs_in}],
        }
    )
    runner = Runner(config, tmp_path / "run")
    runner.run()
    assert len(runner.failures) == 2  # one unit per case, each one line
    assert all("exited with code 3" in f.cause for f in runner.failures)


def test_runs_in_is_checked_when_the_config_is_read():
    def problem(runs_in) -> str:
        with pytest.raises(Exception) as raised:
            RunConfig.model_validate(
                {
                    "name": "x",
                    "datasets": ["demo-phantoms"],
                    "prompters": ["box-3d"],
                    "models": [{"name": "region-growing-3d", "runs_in": runs_in}],
                }
            )
        return str(raised.value)

    assert "exactly one of python, command, container or url" in problem({})
    assert "exactly one of" in problem({"python": "/x", "url": "tcp://h:1"})
    assert "tcp://HOST:PORT" in problem({"url": "http://host:80"})
    assert "port 1-65535" in problem({"url": "tcp://host:99999"})
    assert "greater than 0" in problem({"python": "/x", "timeout_s": 0})
    assert "finite" in problem({"python": "/x", "timeout_s": float("inf")})
    assert "cannot be split" in problem({"command": "serve 'unbalanced"})
    assert "Extra inputs" in problem({"python": "/x", "timeot_s": 3})


def test_an_unknown_model_whose_server_cannot_start_is_a_config_error():
    config = RunConfig.model_validate(
        {
            "name": "x",
            "datasets": ["demo-phantoms"],
            "prompters": ["box-3d"],
            "models": [{"name": "not-here-model", "runs_in": {"command": ["/nonexistent/serve"]}}],
        }
    )
    with pytest.raises(ConfigError, match="not installed here, and its server cannot say"):
        config.validate_components()


def test_a_container_runs_intrabench_serve_model_inside():
    from intrabench.serving.connection import server_command

    docker = RunsIn(
        container={"engine": "docker", "image": "team/model:1", "options": ["--gpus", "all"]}
    )
    assert server_command("sam2", {"variant": "t"}, docker) == [
        "docker",
        "run",
        "-i",
        "--rm",
        "--gpus",
        "all",
        "team/model:1",
        "intrabench",
        "serve-model",
        "sam2",
        "--params",
        '{"variant": "t"}',
        "--stdio",
    ]
    apptainer = RunsIn(container={"engine": "apptainer", "image": "model.sif", "options": ["--nv"]})
    assert server_command("sam2", {}, apptainer)[:4] == ["apptainer", "exec", "--nv", "model.sif"]
    assert not docker.transfers_files() and RunsIn(python="/p").transfers_files()


@pytest.fixture()
def disc_kind(monkeypatch):
    """The ``disc`` kind of tests/serving/served_kinds.py registered here, and importable by
    the servers a test starts (removed afterwards)."""
    import importlib

    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    plugin = importlib.import_module("tests.serving.served_kinds")
    plugin.register()
    yield plugin
    plugin.unregister()


def test_an_added_prompt_kind_reaches_a_served_model_over_the_loopback_server(tmp_path, disc_kind):
    """A kind a plugin registers on both sides crosses the wire: the served model gets the
    prompter's discs and gives the in-process rows."""
    server = subprocess.Popen(
        serve_command(
            "test-disc-model", "--import", "tests.serving.served_kinds", "--listen", "127.0.0.1:0"
        ),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(re.search(r"127\.0\.0\.1:(\d+)", server.stderr.readline()).group(1))
        served, _ = run_rows(
            tmp_path,
            "served",
            [{"name": "test-disc-model", "runs_in": {"url": f"tcp://127.0.0.1:{port}"}}],
            prompters=["test-disc"],
            refiners=[],
            steps=0,
        )
    finally:
        server.kill()
        server.wait()
    local, _ = run_rows(
        tmp_path, "local", ["test-disc-model"], prompters=["test-disc"], refiners=[], steps=0
    )
    assert len(served) == 7  # one row per target of the 2 phantom cases
    assert set(served["interactions_disc"]) == {1} and set(served["initial_effort"]) == {2}
    assert (served["dice"] > 0).all()  # the model segmented the discs it was sent
    saved = Prompt.from_json(served["prompt_json"].iloc[0])
    assert [e.kind for e in saved.typed_elements()] == ["disc"]
    pd.testing.assert_frame_equal(comparable(served), comparable(local))


def prompt_of_one_click() -> Prompt:
    return Prompt(points=[[3, 4, 5]], point_labels=[1])


def test_the_extras_of_a_slice_prompt_cross_the_wire(disc_kind):
    from intrabench.serving.protocol import slice_prompt_from_wire, slice_prompt_to_wire

    disc = disc_kind.Disc(3, 10, 12, 2)
    prompt = Prompt(points=[[3, 4, 5]], point_labels=[1], extras=(disc,)).on_slice(3)
    data = slice_prompt_to_wire(prompt)
    assert data["elements"] == [{"kind": "disc", "zyx": [3, 10, 12], "radius": 2, "label": 1}]
    back = slice_prompt_from_wire(data)
    assert back.extras == (disc,) and back.key() == prompt.key()
    assert "elements" not in slice_prompt_to_wire(prompt_of_one_click().on_slice(3))
    with pytest.raises(ValueError, match="unknown prompt element kind 'ring'"):
        slice_prompt_from_wire({**data, "elements": [{"kind": "ring"}]})


# -- the wire ---------------------------------------------------------------------------------
def test_prompts_cross_the_wire_unchanged():
    prompt = Prompt(
        points=[[1, 2, 3], [4, 5, 6]],
        point_labels=[1, 0],
        boxes={3: Box2D(1, 2, 5, 6)},
        box3d=Box3D(0, 1, 2, 3, 4, 5),
        scribbles=(Scribble(np.array([[1, 1, 1], [1, 1, 2]]), 0),),
        lassos=(Lasso(2, np.array([[0, 0], [0, 4], [4, 4]]), 1),),
        interactions=(Interaction("click"), Interaction("box2d")),
        effort_label="7",
        order=(
            ("box2d", 3),
            ("point", 1),
            ("point", 0),
            ("box3d", 0),
            ("scribble", 0),
            ("lasso", 0),
        ),
        click_maps=(("recorded", 2),),
    )
    back = prompt_from_wire(prompt_to_wire(prompt))
    assert back.to_json() == prompt.to_json()
    assert back.interactions == prompt.interactions and back.effort == 3
    assert back.effort_label == "7" and back.click_maps == (("recorded", 2),)
    with pytest.raises(ValueError, match="geometry"):
        prompt_from_wire({"points": []})


def test_masks_travel_as_their_box_and_packed_bits():
    mask = np.zeros((4, 9, 11), dtype=bool)
    mask[1:3, 2:7, 3:4] = True
    mask[2, 6, 9] = True
    box, bits = pack_mask(mask, ((slice(1, 3), slice(2, 7), slice(3, 10))))
    assert box == [[1, 3], [2, 7], [3, 10]] and bits.nbytes == (2 * 5 * 7 + 7) // 8
    back, region = unpack_mask(box, bits, mask.shape)
    assert np.array_equal(back, mask) and region == (slice(1, 3), slice(2, 7), slice(3, 10))
    assert unpack_mask(None, np.zeros(0, np.uint8), (2, 2, 2))[0].sum() == 0
    for bad, message in (
        ([[0, 5], [0, 9], [0, 11]], "not inside the image"),
        ([[1, 3], [2, 7]], "not inside"),
        ("xx", "not \\[start, stop\\]"),
        ([[1, 3], [2, 7], [3, 11]], "do not fit"),
    ):
        with pytest.raises(ValueError, match=message):
            unpack_mask(bad, bits, mask.shape)


def _pipe_channel() -> tuple[Channel, int]:
    read_fd, write_fd = os.pipe()
    return Channel(read_fd, write_fd, peer="the test's pipe"), write_fd


def test_the_wire_round_trips_arrays_and_refuses_garbage():
    channel, write_fd = _pipe_channel()
    image = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    channel.send({"op": "x", "n": 1}, {"image": image, "flags": np.array([True, False])})
    header, arrays = channel.receive(timeout=5)
    assert header["op"] == "x" and np.array_equal(arrays["image"], image)
    assert arrays["flags"].dtype == bool
    with pytest.raises(TypeError, match="only bool, integer and float"):
        channel.send({}, {"names": np.array(["a"], dtype=object)})
    cases = [
        (b"GET / HTTP/1.1\r\n\r\n", "not a message of the IntraBench model protocol"),
        (b"IBM1" + (10**9).to_bytes(4, "little") + (0).to_bytes(8, "little"), "-byte header"),
        (b"IBM1" + (2).to_bytes(4, "little") + (10**15).to_bytes(8, "little"), "-byte payload"),
        (b"IBM1" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + b"{x}", "not JSON"),
        (
            b"IBM1" + (2).to_bytes(4, "little") + (0).to_bytes(8, "little") + b"[]",
            "not a JSON object",
        ),
    ]
    for data, message in cases:
        channel, write_fd = _pipe_channel()
        os.write(write_fd, data)
        with pytest.raises(WireError, match=message):
            channel.receive(timeout=2)
    bad_array = b'{"arrays":[{"name":"a","dtype":"<f4","shape":[1000],"offset":0,"nbytes":4000}]}'
    channel, write_fd = _pipe_channel()
    os.write(
        write_fd,
        b"IBM1"
        + len(bad_array).to_bytes(4, "little")
        + (8).to_bytes(8, "little")
        + bad_array
        + b"\0" * 8,
    )
    with pytest.raises(WireError, match="do not fit the payload"):
        channel.receive(timeout=2)
    channel, write_fd = _pipe_channel()
    os.write(write_fd, b"IBM1")  # and then nothing: a server that stops half-way
    with pytest.raises(WireError, match="nothing for 0.3 s"):
        channel.receive(timeout=0.3)
    os.close(write_fd)
    channel, write_fd = _pipe_channel()
    os.close(write_fd)
    with pytest.raises(WireError, match="closed the connection"):
        channel.receive(timeout=2)
