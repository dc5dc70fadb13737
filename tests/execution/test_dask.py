"""A Dask run gives exactly the rows of a local run, also when a worker is killed mid-run."""

from __future__ import annotations

import os
import sys
import textwrap

import pandas as pd
import pytest

from intrabench.config import parse_config
from intrabench.execution.runner import Runner, run_distributed
from intrabench.execution.settings import DaskSettings
from intrabench.io.results import measured_columns

pytest.importorskip("distributed")

SPEC = {
    "name": "dask-equivalence",
    "seeds": [0, 1],
    "datasets": [{"name": "demo-phantoms", "n_cases": 3, "shape": [16, 48, 48]}],
    "models": ["region-growing-3d", "random-walker-2d"],
    "prompters": ["box-3d", {"name": "point-interpolation", "n_slices": 3}],
    "refiners": ["center-error-click"],
    "refinement_steps": 2,
}


def _rows(run_dir) -> pd.DataFrame:
    rows = pd.read_parquet(run_dir / "results.parquet")
    return rows.drop(columns=measured_columns(rows))


def _args(workers: int) -> DaskSettings:
    return DaskSettings(workers=workers, memory_limit="2GB")


def test_local_cluster_gives_identical_rows(tmp_path):
    config = parse_config(SPEC)
    Runner(config, tmp_path / "local").run()
    plan, problems = run_distributed(config, tmp_path / "dask", _args(workers=2))
    assert not problems
    local, distributed = _rows(tmp_path / "local"), _rows(tmp_path / "dask")
    assert len(local) == len(distributed) > 0
    pd.testing.assert_frame_equal(local, distributed)


CRASH_MODULE = textwrap.dedent('''
    """Test model: region growing whose process dies (os._exit) the first time it predicts."""
    import os
    from pathlib import Path

    from intrabench import registry
    from intrabench.interfaces import Model

    MARKER = Path(os.environ["INTRABENCH_CRASH_MARKER"])


    @registry.models.register
    class CrashOnce(Model):
        name = "crash-once-3d"
        dimension = 3
        accepts = frozenset({"point", "box3d", "mask"})

        def __init__(self):
            self.inner = registry.models.create("region-growing-3d")

        def set_case(self, image):
            self.inner.set_case(image)

        def predict(self, prompt, previous=None, update_slices=None):
            if not MARKER.exists():
                MARKER.write_text("crashed once")
                os._exit(1)   # the worker process dies without cleaning up
            return self.inner.predict(prompt, previous, update_slices)
''')


def test_killed_worker_is_redone_without_duplicates(tmp_path, monkeypatch):
    (tmp_path / "crash_once_model.py").write_text(CRASH_MODULE)
    monkeypatch.setenv("INTRABENCH_CRASH_MARKER", str(tmp_path / "crashed"))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = {
        **SPEC,
        "imports": ["crash_once_model"],
        "models": ["crash-once-3d"],
        "refiners": [],
        "seeds": [0],
    }
    config = parse_config(spec)
    (tmp_path / "crashed").write_text("already")  # local reference run: no crash
    Runner(config, tmp_path / "local").run()
    (tmp_path / "crashed").unlink()
    plan, problems = run_distributed(config, tmp_path / "dask", _args(workers=2))
    assert (tmp_path / "crashed").exists(), "the fault was not injected"
    assert not problems
    rows = _rows(tmp_path / "dask")
    keys = ["dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]
    assert not rows.duplicated(keys).any()
    pd.testing.assert_frame_equal(_rows(tmp_path / "local"), rows)


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("process-killing test needs POSIX")


def _gpu_cluster_workers(gpus: str, n_workers: int, **options) -> tuple[list, list]:
    """(sorted CUDA_VISIBLE_DEVICES, resources) of the workers of ``gpu_cluster(gpus)``."""
    from distributed import Client

    from intrabench.execution.dask import gpu_cluster

    with gpu_cluster(gpus, **options) as cluster, Client(cluster) as client:
        client.wait_for_workers(n_workers)
        visible = sorted(client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values())
        resources = [w["resources"] for w in client.scheduler_info()["workers"].values()]
    return visible, resources


def test_gpu_cluster_pins_one_device_per_worker():
    visible, resources = _gpu_cluster_workers("0,1", 2)
    assert visible == ["0", "1"]
    assert resources == [{"GPU": 1}, {"GPU": 1}]


def test_gpu_cluster_can_share_a_device_between_workers():
    visible, resources = _gpu_cluster_workers("3", 2, workers_per_gpu=2)
    assert visible == ["3", "3"]
    assert resources == [{"GPU": 1}, {"GPU": 1}]


def test_workers_per_gpu_must_be_positive():
    from intrabench.errors import UserError
    from intrabench.execution.dask import gpu_cluster

    with pytest.raises(UserError, match="at least 1"):
        gpu_cluster("0", workers_per_gpu=0)


def test_gpu_workers_prompt_and_finish_in_subprocesses_with_identical_rows(tmp_path):
    # "--gpus 0" on a CPU machine: the classical models ignore the device; what changes is that
    # tasks run with the runner's user, results and reader workers beside them
    config = parse_config(SPEC)
    Runner(config, tmp_path / "local", background="inline").run()
    args = DaskSettings(workers=1, memory_limit="2GB", gpus=("0",))
    plan, problems = run_distributed(config, tmp_path / "dask", args)
    assert not problems
    pd.testing.assert_frame_equal(_rows(tmp_path / "local"), _rows(tmp_path / "dask"))


def test_a_process_mode_task_starts_its_workers_and_writes_its_units(tmp_path):
    from intrabench.execution import dask as execution

    config = parse_config(SPEC)
    runner = Runner(config, tmp_path / "tasks")
    plan, groups = runner.prepare(executor="dask")
    try:
        for group in groups:
            assert execution.execute_group_task(
                config.model_dump_json(), str(tmp_path / "tasks"), group, "process"
            ) == ([], [], [])
            assert all(runner.store.is_done(unit.key) for unit in group)  # written on return
        [executor] = execution._WORKER_RUNNERS.values()
        assert executor._finishers.mode == "process" and executor._finishers.first.ready()
        assert all(lane.ready() for lane in executor._users)
    finally:
        for executor in execution._WORKER_RUNNERS.values():
            executor.close()
        execution._WORKER_RUNNERS.clear()
    runner.finish(plan)
    Runner(config, tmp_path / "local", background="inline").run()
    pd.testing.assert_frame_equal(_rows(tmp_path / "local"), _rows(tmp_path / "tasks"))


def test_gpu_workers_share_the_machines_user_workers(monkeypatch):
    from intrabench.execution import runner

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)), raising=False)
    args = DaskSettings(gpus=("0", "1", "2", "3"))
    assert args.gpu_workers == 4
    assert runner.default_user_workers(sharing=args.gpu_workers) == 2  # 32 cores / 4 / 4
    args = DaskSettings(gpus=("0", "1", "2", "3"), workers_per_gpu=2)
    assert runner.default_user_workers(sharing=args.gpu_workers) == 1
    assert runner.default_user_workers() == 4  # alone on the machine: at most 4


def test_a_dask_run_keeps_the_work_it_skipped_as_a_local_run_does(tmp_path):
    """problems.csv: the groups skipped for a bad case, with their unit counts, also on Dask."""
    import numpy as np
    import SimpleITK as sitk
    import yaml

    label = np.zeros((6, 16, 16), np.uint8)
    label[2:4, 4:9, 4:9] = 1
    for name in ("images", "labels"):
        (tmp_path / "data" / name).mkdir(parents=True)
    for case, image in (
        ("good", np.zeros(label.shape, np.float32)),
        ("bad", np.full(label.shape, np.nan, np.float32)),
    ):
        sitk.WriteImage(
            sitk.GetImageFromArray(image), str(tmp_path / "data" / "images" / f"{case}.nii")
        )
        sitk.WriteImage(
            sitk.GetImageFromArray(label), str(tmp_path / "data" / "labels" / f"{case}.nii")
        )
    spec = tmp_path / "data" / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "own",
                "images": "images/{case}.nii",
                "labels": "labels/{case}.nii",
                "classes": {"lesion": 1},
            }
        )
    )
    config = parse_config(
        {**SPEC, "datasets": [{"name": "folder", "spec": str(spec)}], "seeds": [0]}
    )
    _, local_problems = Runner(config, tmp_path / "local").run()
    _, problems = run_distributed(config, tmp_path / "dask", _args(workers=2))
    assert set(problems) == set(local_problems) and len(set(problems)) == 1
    local = pd.read_csv(tmp_path / "local" / "problems.csv")
    distributed = pd.read_csv(tmp_path / "dask" / "problems.csv")
    assert (
        local.sort_values("model").values.tolist()
        == distributed.sort_values("model").values.tolist()
    )
    # the 2D model takes both prompters, the 3D one only box-3d
    assert dict(zip(local.model, local.units)) == {"random-walker-2d": 2, "region-growing-3d": 1}
    assert (local.case == "bad").all()
