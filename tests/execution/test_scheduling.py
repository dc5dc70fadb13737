"""Interleaved episodes with the simulated users in a worker process give the serial results."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from intrabench import registry
from intrabench.engine.episode import StepResult, run_episode
from intrabench.engine.simulated_user import SimulatedUser
from intrabench.execution.lanes import Lane
from intrabench.execution.scheduling import EpisodeScheduler, EpisodeTask
from intrabench.execution.user_worker import PackedMask
from intrabench.interfaces import Prompter
from intrabench.types import Case, Prompt, interactions


@pytest.fixture(scope="module")
def phantom() -> Case:
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 1})
    return dataset.load(dataset.case_ids()[0])


def _started_user_lane():
    lane = Lane(
        "process",
        max_pending=16,
        preload=("intrabench.execution.user_worker",),
        raise_failures=False,
    )
    lane.start()
    yield lane
    lane.close()


users = pytest.fixture(_started_user_lane, name="users")
second_users = pytest.fixture(_started_user_lane, name="second_users")


def _wait_until_ready(lane: Lane) -> None:
    import time

    deadline = time.monotonic() + 60
    while not lane.ready():
        assert time.monotonic() < deadline, "the worker never finished starting"
        time.sleep(0.02)


def _task(
    case: Case,
    target_index: int,
    prompter: Prompter,
    prompter_key: str,
    model_dimension: int,
    steps: int = 3,
) -> EpisodeTask:
    target = case.targets[target_index]
    user = SimulatedUser(
        prompter=prompter,
        prompter_key=prompter_key,
        refiner=registry.refiners.create("scribble", {}),
        refiner_key="scribble",
        seed=7,
        identity=(case.dataset, case.case_id, target.target_id),
        spacing=case.image.spacing,
        model_dimension=model_dimension,
    )
    return EpisodeTask(
        key=f"{prompter_key}/{target_index}",
        user=user,
        ground_truth=case.target_mask(target),
        steps=steps,
        refine=True,
        keep_previous_prompts=True,
        tag=(prompter_key, target_index),
    )


def _serial(case: Case, task: EpisodeTask, model) -> list[StepResult]:
    target_index = task.tag[1]
    return run_episode(
        case,
        case.targets[target_index],
        model,
        task.user.prompter,
        task.user.prompter_key,
        task.user.refiner,
        "scribble",
        steps=task.steps,
        seed=7,
        metric_fn=None,
    )


def _user_calls(results: list[StepResult]) -> int:
    """The initial prompt, each correction, and the call that found nothing left to correct."""
    refinements = results[1:]
    return 1 + sum(not r.converged for r in refinements) + any(r.converged for r in refinements)


def _same(interleaved: list[StepResult], serial: list[StepResult]) -> None:
    assert len(interleaved) == len(serial)
    for a, b in zip(interleaved, serial):
        assert (a.step, a.effort, a.cumulative_effort, a.converged) == (
            b.step,
            b.effort,
            b.cumulative_effort,
            b.converged,
        )
        assert a.prompt.summary() == b.prompt.summary()
        assert np.array_equal(a.prediction.mask, b.prediction.mask)
        if isinstance(a.prediction.feedback, dict):  # a 2D network's logits per slice: bitwise
            assert sorted(a.prediction.feedback) == sorted(b.prediction.feedback)
            for z, logits in a.prediction.feedback.items():
                assert np.array_equal(logits, b.prediction.feedback[z]), z
        # a step's time is what was spent on it, not the other episodes' time in between
        assert a.wall_seconds >= a.model_seconds + a.prompter_seconds - 1e-6


class _CountingLane:
    """Counts the answers asked of a lane (wraps its submit)."""

    def __init__(self, lane: Lane) -> None:
        self.asked = 0
        submit = lane.submit

        def counted(fn, *args):
            self.asked += 1
            return submit(fn, *args)

        lane.submit = counted  # type: ignore[method-assign]


#: a tiny random SAM whose encoder batches blocks of 3 slices: interleaving changes which
#: episode asks for a slice first, and must not change what the slice's embedding is
_TINY_SAM = {"weights": "random", "tiny": True, "device": "cpu", "batch_size": 3}


@pytest.mark.parametrize(
    "model_name,params,prompter_names",
    [
        ("region-growing-3d", {}, ["box-3d", "center-points-per-volume"]),
        # point-propagation queries the 2D model while prompting: its initial prompt stays here
        ("random-walker-2d", {}, ["box-per-slice", "point-propagation"]),
        ("sam", _TINY_SAM, ["center-points-per-volume", "box-per-slice"]),
    ],
)
@pytest.mark.parametrize("n_workers", [1, 2])
def test_interleaved_episodes_equal_serial_episodes(
    phantom, users, second_users, model_name, params, prompter_names, n_workers
):
    """Every interleaved episode equals the same episode run alone on a fresh model: results
    depend neither on the interleaving nor on which episodes ran before (for tiny SAM this
    failed before its encoder batched fixed blocks of slices)."""
    model = registry.models.create(model_name, params)
    model.set_case(phantom.image)
    lanes = [users, second_users][:n_workers]
    counters = [_CountingLane(lane) for lane in lanes]
    for lane in lanes:
        _wait_until_ready(lane)
    tasks = [
        _task(phantom, index, registry.prompters.create(name, {}), name, model.dimension)
        for name in prompter_names
        for index in range(len(phantom.targets))
    ]
    finished: dict[tuple, list[StepResult]] = {}
    scheduler = EpisodeScheduler(model, lanes, in_flight=3)
    scheduler.run(tasks, lambda task, results: finished.setdefault(task.tag, results))
    assert all(counter.asked > 0 for counter in counters)  # every worker took episodes
    assert set(finished) == {task.tag for task in tasks}
    assert scheduler.answered_by_worker + scheduler.answered_here == sum(
        _user_calls(finished[t.tag]) for t in tasks
    )
    propagating = sum(1 for t in tasks if t.user.prompter.needs_model)
    assert scheduler.answered_here == propagating  # only those initial prompts stay here
    assert scheduler.answered_by_worker > 0
    # the loop's clock named each piece of work once per time it was done
    entries = scheduler.clock.entries
    assert entries["forward passes"] == scheduler.model_calls
    assert entries["sending to user workers"] == scheduler.answered_by_worker
    assert entries.get("simulated user here", 0) == scheduler.answered_here
    assert entries["handing episodes to the metrics"] == len(tasks)
    assert entries["starting episodes"] == len(tasks) + 1  # the last finds none left
    assert entries["waiting for simulated users"] >= 1
    assert sum(scheduler.clock.seconds.values()) <= scheduler.clock.wall + 1e-9
    for task in tasks:  # each episode alone, on a model whose caches start empty
        alone = registry.models.create(model_name, params)
        alone.set_case(phantom.image)
        _same(finished[task.tag], _serial(phantom, task, alone))


class _Deepest(Prompter):
    """A click on the deepest voxel (a plugin prompter for the tests below)."""

    name = "test-deepest"
    kinds = frozenset({"point"})

    def initial(self, context):
        from scipy.ndimage import distance_transform_edt

        depth = distance_transform_edt(context.ground_truth)
        z, y, x = np.unravel_index(int(np.argmax(depth)), depth.shape)
        return Prompt(
            points=[[z, y, x]],
            point_labels=[1],
            interactions=interactions("click", 1),
            effort_label="1",
        )


def _answered_here_only(case: Case, users: Lane, prompter: Prompter) -> None:
    """Run one episode of ``prompter`` with a worker at hand, and check that every user call was
    answered in this process and the results equal a serial run."""
    model = registry.models.create("region-growing-3d", {})
    model.set_case(case.image)
    _wait_until_ready(users)
    task = _task(case, 0, prompter, "here-only", 3)
    finished = []
    scheduler = EpisodeScheduler(model, users, in_flight=2)
    scheduler.run([task], lambda t, r: finished.append(r))
    _same(finished[0], _serial(case, task, model))
    assert scheduler.answered_by_worker == 0
    assert scheduler.answered_here == _user_calls(finished[0]) >= 2


def test_a_user_the_worker_cannot_import_is_answered_here(phantom, users):
    # a module that exists only in this process: the worker is asked first, cannot unpickle
    # the prompter, and from then on the episode is answered here
    module = types.ModuleType("intrabench_test_only_here")
    prompter_class = type("OnlyHere", (_Deepest,), {"__module__": module.__name__})
    module.OnlyHere = prompter_class
    sys.modules[module.__name__] = module
    try:
        _answered_here_only(phantom, users, prompter_class())
    finally:
        del sys.modules[module.__name__]


def test_a_user_that_cannot_be_pickled_is_answered_here(phantom, users):
    class Local(_Deepest):  # defined in a function: pickle cannot name it
        pass

    _answered_here_only(phantom, users, Local())


def test_episodes_started_before_the_worker_is_ready_run_here(phantom):
    lane = Lane(
        "process",
        max_pending=8,
        preload=("intrabench.execution.user_worker",),
        raise_failures=False,
    )
    try:
        assert not lane.ready()  # not started
        lane.start()
        model = registry.models.create("region-growing-3d", {})
        model.set_case(phantom.image)
        task = _task(phantom, 0, registry.prompters.create("box-3d", {}), "box-3d", 3)
        finished = []
        scheduler = EpisodeScheduler(model, lane, in_flight=2)
        scheduler.run([task], lambda t, r: finished.append(r))
        _same(finished[0], _serial(phantom, task, model))
        assert scheduler.answered_by_worker == 0  # nobody waited for the worker's imports
        _wait_until_ready(lane)
        assert lane.ready()
    finally:
        lane.close()


@pytest.mark.parametrize("mode", ["thread", "inline"])
def test_lanes_without_start_up_cost_become_ready(mode):
    lane = Lane(mode)
    lane.start()
    _wait_until_ready(lane)
    lane.close()


@settings(max_examples=60, deadline=None)
@given(
    mask=arrays(
        bool,
        st.tuples(st.integers(1, 6), st.integers(1, 7), st.integers(1, 5)),
        elements=st.booleans(),
    )
)
def test_packed_masks_unpack_exactly(mask):
    packed = PackedMask.pack(mask)
    assert np.array_equal(packed.unpack(), mask)
    if mask.any():
        assert packed.values.sum() == mask.sum()
        assert packed.values.shape == tuple(s.stop - s.start for s in packed.box)
    else:
        assert packed.box is None


@pytest.mark.parametrize(
    "cores,expected", [(1, 0), (2, 0), (3, 0), (4, 1), (8, 2), (16, 4), (128, 4)]
)
def test_user_workers_follow_the_core_count(monkeypatch, cores, expected):
    import os

    from intrabench.execution import runner

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert runner.default_user_workers() == expected


@pytest.mark.parametrize("cores,expected", [(1, 0), (2, 1), (3, 1), (4, 1), (8, 2), (16, 4)])
def test_gpu_models_get_a_user_worker_from_two_cores_on(monkeypatch, cores, expected):
    """A GPU model leaves the loop's core idle during its forward passes: a user worker uses
    it, on small machines too (issue #13)."""
    import os

    from intrabench.execution import runner

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert runner.default_user_workers(forward_frees_cpu=True) == expected


def test_which_models_free_the_cpu():
    from intrabench import registry
    from intrabench.config import parse_config
    from intrabench.execution.runner import models_free_cpu

    assert not registry.models.get("region-growing-3d").forward_frees_cpu({})
    assert registry.models.get("sam").forward_frees_cpu({"device": "cuda"})
    assert registry.models.get("sam").forward_frees_cpu({"device": "cuda:1"})
    assert not registry.models.get("sam").forward_frees_cpu({"device": "cpu"})
    assert not registry.models.get("sam").forward_frees_cpu({})  # auto, and no GPU here
    assert registry.models.get("synthetic-network").forward_frees_cpu({})

    def config(*models):
        return parse_config(
            {
                "name": "n",
                "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
                "models": list(models),
                "prompters": ["box-3d"],
            }
        )

    assert models_free_cpu(config("synthetic-network", {"name": "sam-med3d", "device": "cuda"}))
    assert not models_free_cpu(config("synthetic-network", "region-growing-3d"))


def test_without_user_workers_episodes_run_one_at_a_time(tmp_path):
    from intrabench.config import parse_config
    from intrabench.execution.runner import Runner

    config = parse_config(
        {
            "name": "n",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": ["region-growing-3d"],
            "prompters": ["box-3d"],
        }
    )
    assert Runner(config, tmp_path / "a", user_workers=0).executor.episodes_in_flight == 1
    assert Runner(config, tmp_path / "b", user_workers=2).executor.episodes_in_flight == 8
    assert Runner(config, tmp_path / "c", background="inline").executor.user_workers == 0


@pytest.mark.parametrize("cores,asked", [(1, False), (2, True), (3, True), (4, False), (16, False)])
def test_whether_models_free_the_cpu_is_asked_only_where_it_changes_the_count(
    monkeypatch, cores, asked
):
    """Asking a model on device 'auto' imports torch (1-2 s before the first case is read): a
    machine of four cores or more gets the same user workers either way."""
    import os

    from intrabench.execution import runner

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    questions = []

    def frees() -> bool:
        questions.append(cores)
        return True

    assert runner.default_user_workers(forward_frees_cpu=frees) == runner.default_user_workers(
        forward_frees_cpu=True
    )
    assert bool(questions) is asked
