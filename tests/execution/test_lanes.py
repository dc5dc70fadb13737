"""The background lane, its worker subprocess, and cropped episode finishing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from intrabench import registry
from intrabench.config import parse_config
from intrabench.engine.episode import StepResult, run_episode
from intrabench.engine.finishing import crop_episode
from intrabench.evaluation.metrics import step_metrics
from intrabench.execution.lanes import Lane
from intrabench.execution.runner import Runner
from intrabench.execution.subprocess_worker import SubprocessExecutor, WorkerDied
from intrabench.interfaces import Model
from intrabench.io.results import measured_columns
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.types import Case, Prediction, Prompt, Target


def _fail(message: str) -> None:
    raise ValueError(message)


def _print_and_return(value: int) -> int:
    print("noise on stdout must not break the protocol")  # noqa: T201
    return value * 2


def _pid() -> int:
    return os.getpid()


def _sleep_then(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value


def test_subprocess_executor_runs_jobs_in_another_process_in_order():
    executor = SubprocessExecutor()
    try:
        futures = [executor.submit(_sleep_then, i, 0.02 * (3 - i)) for i in range(3)]
        assert [f.result(timeout=60) for f in futures] == [0, 1, 2]
        assert executor.submit(_print_and_return, 21).result(timeout=60) == 42
        assert executor.submit(_pid).result(timeout=60) != os.getpid()
        with pytest.raises(ValueError, match="bad input"):
            executor.submit(_fail, "bad input").result(timeout=60)
        assert executor.submit(_print_and_return, 1).result(timeout=60) == 2  # still alive
    finally:
        executor.shutdown()


def test_a_killed_worker_fails_its_jobs_instead_of_hanging():
    executor = SubprocessExecutor()
    try:
        pid = executor.submit(_pid).result(timeout=60)
        pending = executor.submit(_sleep_then, 1, 30)
        os.kill(pid, 9)
        with pytest.raises(WorkerDied):
            pending.result(timeout=60)
    finally:
        executor.shutdown()


def _niceness() -> int:
    return os.nice(0)


@pytest.mark.skipif(not hasattr(os, "nice"), reason="Unix niceness")
def test_background_workers_run_at_a_lower_priority_than_the_model_loop():
    from intrabench.execution.runner import BACKGROUND_NICENESS

    parent = os.nice(0)
    lowered, plain = Lane("process", niceness=BACKGROUND_NICENESS), Lane("process")
    try:
        expected = min(19, parent + BACKGROUND_NICENESS)
        # a worker at lowered priority starts last on a loaded machine: no short wall-clock
        # limit (60 s failed under load); the bound only keeps a hang from lasting forever
        assert lowered.submit(_niceness).result(timeout=900) == expected
        assert plain.submit(_niceness).result(timeout=900) == parent
    finally:
        lowered.close()
        plain.close()
    with pytest.raises(ValueError, match="niceness"):
        SubprocessExecutor(niceness=-1)


@pytest.mark.parametrize("chosen", [None, "3"])
def test_workers_start_one_blas_thread_unless_the_user_chose(monkeypatch, chosen):
    if chosen is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", chosen)
    executor = SubprocessExecutor()
    try:
        assert executor.submit(os.getenv, "OPENBLAS_NUM_THREADS").result(timeout=60) == (
            chosen or "1"
        )
    finally:
        executor.shutdown()


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_lane_keeps_order_and_raises_failures(mode):
    lane = Lane(mode, max_pending=2)
    try:
        futures = [lane.submit(_sleep_then, i, 0.01) for i in range(5)]
        lane.drain()
        assert [f.result() for f in futures] == list(range(5))
        if mode == "inline":
            with pytest.raises(ValueError, match="boom"):
                lane.submit(_fail, "boom")
        else:
            lane.submit(_fail, "boom")
            with pytest.raises(ValueError, match="boom"):
                lane.drain()
    finally:
        lane.close()


def test_lane_rejects_unknown_modes():
    with pytest.raises(ValueError, match="unknown lane mode"):
        Lane("gpu")  # type: ignore[arg-type]


# -- cropped finishing: metrics equal those on the full volume ---------------------------------


def _case(label: np.ndarray) -> Case:
    geometry = ImageGeometry(
        size=label.shape[::-1],
        spacing=(0.8, 0.7, 2.5),
        origin=(0, 0, 0),
        direction=(1, 0, 0, 0, 1, 0, 0, 0, 1),
    )
    image = Volume(
        array=np.zeros(label.shape, np.float32), spacing=(2.5, 0.7, 0.8), geometry=geometry
    )
    return Case(
        dataset="d",
        case_id="c",
        image=image,
        label=label.astype(np.uint8),
        targets=(Target("t1", 1, "lesion"),),
    )


@settings(max_examples=40, deadline=None)
@given(
    truth=arrays(bool, (7, 9, 8), elements=st.booleans()),
    first=arrays(bool, (7, 9, 8), elements=st.booleans()),
    second=arrays(bool, (7, 9, 8), elements=st.booleans()),
)
def test_metrics_on_a_cropped_episode_equal_full_volume_metrics(truth, first, second):
    truth[3, 4, 4] = True  # a target is never empty
    case = _case(truth)
    predictions = [Prediction(mask=first), Prediction(mask=second)]
    results = [
        StepResult(
            step=i,
            prompt=Prompt(),
            prediction=predictions[min(i, 1)],
            metrics={},
            effort=0,
            cumulative_effort=0,
            model_seconds=0.0,
            prompter_seconds=0.0,
            wall_seconds=0.0,
        )
        for i in range(3)
    ]
    cropped = crop_episode(case.target_mask(case.targets[0]), case.targets[0], results)
    assert cropped.results[1].prediction is cropped.results[2].prediction  # repeats stay shared
    for full, small in zip(results, cropped.results):
        expected = step_metrics(full.prediction.mask, truth, case.image.spacing)
        got = step_metrics(small.prediction.mask, cropped.ground_truth, case.image.spacing)
        assert got.keys() == expected.keys()
        for key in expected:
            assert got[key] == expected[key] or (np.isnan(got[key]) and np.isnan(expected[key]))
        rebuilt = np.zeros(truth.shape, bool)
        rebuilt[cropped.box] = small.prediction.mask
        assert np.array_equal(rebuilt, full.prediction.mask)


def test_an_episode_without_masks_keeps_its_prompts_metrics_and_shared_steps():
    truth = np.zeros((4, 5, 6), bool)
    truth[1:3, 1:4, 2:5] = True
    case = _case(truth)
    shared = Prediction(mask=truth.copy())
    results = [
        StepResult(
            step=i,
            prompt=Prompt(),
            prediction=shared,
            metrics={"dice": 1.0},
            effort=i,
            cumulative_effort=i,
            model_seconds=0.0,
            prompter_seconds=0.0,
            wall_seconds=0.0,
        )
        for i in range(2)
    ]
    cropped = crop_episode(case.target_mask(case.targets[0]), case.targets[0], results)
    light = cropped.without_masks()
    assert light.ground_truth.shape == (0, 0, 0) and light.box == cropped.box
    assert all(r.prediction.mask.size == 0 for r in light.results)
    assert light.results[0].prediction is light.results[1].prediction
    assert [(r.step, r.effort, r.metrics) for r in light.results] == [
        (r.step, r.effort, r.metrics) for r in cropped.results
    ]
    assert cropped.ground_truth.shape == (2, 3, 3)  # the original is left as it was


# -- the runner: the same rows and files whichever lane finishes the units ---------------------


def _without_timing(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=measured_columns(frame))


def test_inline_and_process_lanes_give_identical_rows_and_prediction_files(tmp_path):
    config = parse_config(
        {
            "name": "lanes",
            "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
            "models": ["random-walker-2d", "region-growing-3d"],
            "prompters": ["box-3d", {"name": "box-interpolation", "n_slices": 3}],
            "refiners": ["scribble"],
            "refinement_steps": 2,
            "save_predictions": True,
        }
    )
    for mode in ("inline", "process"):
        Runner(config, tmp_path / mode, background=mode).run()
    # two user workers, an odd number of episodes in flight: another interleaving
    Runner(config, tmp_path / "pool", user_workers=2, episodes_in_flight=3).run()
    # three results workers: units finish out of order, consolidation reads their files
    Runner(config, tmp_path / "finishers", finish_workers=3).run()
    inline = pd.read_parquet(tmp_path / "inline" / "results.parquet")
    assert len(inline) > 0
    for other in ("process", "pool", "finishers"):
        frame = pd.read_parquet(tmp_path / other / "results.parquet")
        pd.testing.assert_frame_equal(_without_timing(inline), _without_timing(frame))
    files = sorted(
        p.relative_to(tmp_path / "inline")
        for p in (tmp_path / "inline" / "predictions").rglob("*.nii.gz")
    )
    episodes = inline.groupby(["model", "prompter", "case", "target"]).ngroups
    assert len(files) == episodes >= 2 * 2 * 2  # one final prediction per episode
    import SimpleITK as sitk

    for relative in files:
        a = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "inline" / relative)))
        for other in ("process", "finishers"):
            b = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / other / relative)))
            assert np.array_equal(a, b)


def test_a_lane_pool_spreads_jobs_and_raises_failures():
    from intrabench.execution.lanes import LanePool

    pool = LanePool(3, "thread", max_pending=2)
    futures = [pool.submit(pow, 2, k) for k in range(12)]
    pool.drain()
    assert [f.result() for f in futures] == [2**k for k in range(12)]
    assert len(pool) == 3 and len(LanePool(3, "inline")) == 1
    pool.submit(divmod, 1, 0)
    with pytest.raises(ZeroDivisionError):
        pool.drain()
    pool.close()


def test_lanes_that_do_not_raise_failures_still_count_their_load():
    """A pool of such lanes (the case readers) spreads its jobs by load: with one slot each,
    a load counted as 0 sent every job to the first lane, which blocked on the second."""
    import threading

    from intrabench.execution.lanes import LanePool

    release = threading.Event()
    pool = LanePool(2, "thread", max_pending=1, raise_failures=False)
    first = pool.submit(release.wait, 10)
    assert [lane.load() for lane in pool.lanes] == [1, 0]
    second = pool.submit(release.wait, 10)  # to the idle lane, without waiting
    assert [lane.load() for lane in pool.lanes] == [1, 1]
    release.set()
    assert first.result() is True and second.result() is True
    failed = pool.submit(divmod, 1, 0)
    assert isinstance(failed.exception(), ZeroDivisionError)  # reported through its future
    pool.drain()  # and not raised
    assert [lane.load() for lane in pool.lanes] == [0, 0]
    pool.close()


# -- predictions are evaluated after the episode: editing one in place must fail loudly --------


class _EditsPreviousInPlace(Model):
    name = "test-edits-previous"
    dimension = 3
    accepts = frozenset({"box3d", "mask"})

    def set_case(self, image):
        self.shape = image.shape

    def predict(self, prompt, previous=None, update_slices=None):
        if previous is None:
            return Prediction(mask=np.zeros(self.shape, bool))
        previous.mask[0, 0, 0] = True  # the bug the read-only flag catches
        return previous


def test_a_model_editing_its_previous_mask_in_place_is_stopped():
    truth = np.zeros((6, 8, 8), bool)
    truth[2:4, 3:6, 3:6] = True
    case = _case(truth)
    model = _EditsPreviousInPlace()
    model.set_case(case.image)
    prompter = registry.prompters.create("box-3d", {})
    refiner = registry.refiners.create("scribble", {})
    with pytest.raises(ValueError, match="read-only"):
        run_episode(
            case,
            case.targets[0],
            model,
            prompter,
            "box-3d",
            refiner=refiner,
            refiner_key="scribble",
            steps=1,
        )


# -- the results worker dies mid-run: a clear error, nothing half-written, resume completes ----


def _worker_pids(module: str = "intrabench.engine.finishing") -> list[int]:
    """This process's worker subprocesses that preloaded ``module``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        parent = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")
        )
        if parent == os.getpid() and module.encode() in command:
            pids.append(int(entry))
    return pids


class _KillsResultsWorker(Model):
    name = "test-kills-results-worker"
    dimension = 3
    accepts = frozenset({"box3d"})
    calls = 0
    kill_at = 0

    def __init__(
        self,
        kill_at: int = 0,
        worker: str = "intrabench.engine.finishing",
        seconds_per_call: float = 0.0,
    ):
        self.kill_at = kill_at
        self.worker = worker
        self.seconds_per_call = seconds_per_call

    def set_case(self, image):
        self.shape = image.shape

    def predict(self, prompt, previous=None, update_slices=None):
        type(self).calls += 1
        time.sleep(self.seconds_per_call)
        if type(self).calls == self.kill_at:
            for pid in _worker_pids(self.worker):
                os.kill(pid, 9)
            time.sleep(0.5)
        mask = np.zeros(self.shape, bool)
        box = prompt.box3d
        mask[box.z_min : box.z_max + 1, box.y_min : box.y_max + 1, box.x_min : box.x_max + 1] = True
        return Prediction(mask=mask)


registry.models.register(_KillsResultsWorker)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the worker through /proc")
def test_a_killed_results_worker_stops_the_run_cleanly_and_the_rerun_completes(tmp_path, capsys):
    from intrabench.cli import main

    config = tmp_path / "run.yaml"
    spec = {
        "name": "killed",
        "datasets": [{"name": "demo-phantoms", "n_cases": 6}],
        "prompters": ["box-3d"],
    }
    config.write_text(
        json.dumps(
            {**spec, "models": [{"name": "test-kills-results-worker", "kill_at": 8, "label": "m"}]}
        )
    )
    _KillsResultsWorker.calls = 0
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "background worker process was killed by signal 9" in err
    assert "re-run the same command to resume" in err
    units = tmp_path / "run" / "units"
    assert len(list(units.glob("*.parquet"))) < 6
    assert not list(units.glob(".*partial*"))

    config.write_text(
        json.dumps({**spec, "models": [{"name": "test-kills-results-worker", "label": "m"}]})
    )
    # the model's parameters changed: continuing that folder must be asked for
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    assert "pass --extend" in capsys.readouterr().err
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--extend"]) == 0
    assert len(list(units.glob("*.parquet"))) == 6
    fresh = tmp_path / "fresh"
    assert main(["run", str(config), "--out", str(fresh)]) == 0
    pd.testing.assert_frame_equal(
        _without_timing(pd.read_parquet(tmp_path / "run" / "results.parquet")),
        _without_timing(pd.read_parquet(fresh / "results.parquet")),
    )


def test_consolidating_rows_kept_in_memory_equals_reading_the_unit_files(tmp_path):
    from intrabench.io.results import ResultsStore, consolidate_run

    store = ResultsStore(tmp_path)
    rows_a = [
        {
            "run": "r",
            "dataset": "d",
            "case": "c",
            "target": "t",
            "model": "m",
            "prompter": "p",
            "refiner": "none",
            "seed": 0,
            "step": 0,
            "dice": 0.5,
            "prompt_n_points": 3,
            "note": None,
        }
    ]
    rows_b = [
        {**rows_a[0], "prompter": "q", "step": s, "dice": 0.25 * s, "prompt_n_boxes": s}
        for s in range(3)
    ]
    store.write_unit("a", rows_a, keep=True)  # kept, as the results worker does
    store.write_unit("b", rows_b)  # on disk only, as from an earlier run
    assert consolidate_run(tmp_path, ["a", "b"]) == 4
    from_memory = pd.read_parquet(tmp_path / "results.parquet")
    from_files = ResultsStore(tmp_path).consolidate(["a", "b"])  # nothing kept any more
    pd.testing.assert_frame_equal(from_memory, from_files)
    assert from_memory["prompt_n_points"].tolist()[0] == 3


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the worker through /proc")
def test_a_killed_user_worker_stops_the_run_and_the_rerun_completes(tmp_path):
    def config(**model):
        return parse_config(
            {
                "name": "killed-user",
                "datasets": [{"name": "demo-phantoms", "n_cases": 4}],
                "prompters": ["box-3d"],
                "models": [{"name": "test-kills-results-worker", "label": "m", **model}],
            }
        )

    _KillsResultsWorker.calls = 0
    # slow calls: the user worker has started (and answers prompts) before it is killed
    killing = config(kill_at=6, worker="intrabench.execution.user_worker", seconds_per_call=0.4)
    with pytest.raises(WorkerDied, match="killed by signal 9"):
        Runner(killing, tmp_path / "run", user_workers=1).run()
    units = tmp_path / "run" / "units"
    assert len(list(units.glob("*.parquet"))) < 4
    assert not list(units.glob(".*partial*"))
    Runner(config(), tmp_path / "run", user_workers=1, extend=True).run()
    assert len(list(units.glob("*.parquet"))) == 4
    Runner(config(), tmp_path / "fresh", background="inline").run()
    pd.testing.assert_frame_equal(
        _without_timing(pd.read_parquet(tmp_path / "run" / "results.parquet")),
        _without_timing(pd.read_parquet(tmp_path / "fresh" / "results.parquet")),
    )
