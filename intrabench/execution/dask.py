"""Running a plan on Dask: a local cluster, a running scheduler, or a SLURM/PBS/LSF cluster.

Work is submitted as one task per (dataset, case, model) group, so every prompter, refiner and
seed of a case reuses that case's image encodings on one worker. Each task writes its units'
result files atomically (rename), and a unit file is named by the unit's content hash: when a
worker dies, Dask re-runs its task elsewhere, finished units are skipped, and no row can be
written twice. A distributed run therefore gives exactly the rows of a local run.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intrabench.config import RunConfig
from intrabench.engine.failures import UnitFailure, write_failures
from intrabench.engine.plan import WorkUnit
from intrabench.engine.skipped_work import SkippedWork, write_skipped_work
from intrabench.errors import UserError
from intrabench.execution.lanes import LaneMode
from intrabench.execution.settings import (
    DaskSettings,
    ExecutionSettings,
    check_local_resources,
    parse_resources,
    read_cluster_spec,
)
from intrabench.execution.sizing import (
    default_finish_workers,
    default_user_workers,
    models_free_cpu,
)

if TYPE_CHECKING:
    from intrabench.execution.pipelined import PipelinedExecutor

#: per worker process: executors (with their loaded models) reused across tasks of one run
_WORKER_RUNNERS: dict[tuple[str, str, str], PipelinedExecutor] = {}


def execute_group_task(
    config_json: str,
    run_dir: str,
    units: list[WorkUnit],
    background: LaneMode = "inline",
    user_workers: int | None = None,
    finish_workers: int | None = None,
) -> tuple[list[str], list[UnitFailure], list[SkippedWork]]:
    """Dask task: run one (dataset, case, model) group inside a worker process.

    ``background="inline"`` (CPU clusters, where Dask already runs one task per core) does
    everything in the task; ``"process"`` (GPU workers, which have cores to spare) gives the
    task the local runner's user, results and reader workers, so the GPU keeps predicting
    while they prompt and evaluate. Either way the group's unit files are written when the
    task returns. The worker process keeps the executor (and its loaded models) for the
    run's next tasks.

    Args:
        config_json: The run's configuration as JSON (``RunConfig.model_dump_json()``); with
            ``run_dir`` and ``background`` it names the executor the worker reuses.
        run_dir: The run's folder, as a path string seen from the worker (a shared file
            system on a cluster); unit files are written under it.
        units: The work units of one (dataset, case, model) group, in plan order; those whose
            files are already written are skipped.
        background: ``"inline"``: everything in the task; ``"process"``: the local runner's
            worker processes beside the model loop (``"thread"`` is for tests).
        user_workers: This worker's share of the machine's user worker processes; None: the
            local default.
        finish_workers: This worker's share of the machine's results (metrics, rows, files)
            worker processes; None: the local default.

    Returns:
        ``(problems, failures, skipped)``: one line per case or model skipped for a problem,
        the group's failed units, and what it skipped for a problem (see
        :mod:`intrabench.engine.skipped_work`).
    """
    key = (config_json, run_dir, background)
    executor = _WORKER_RUNNERS.get(key)
    if executor is None:
        for previous in _WORKER_RUNNERS.values():
            previous.close()  # one run at a time per worker: stop the previous run's workers
        _WORKER_RUNNERS.clear()  # ... and free its models
        # a task runs one group, whose case it reads itself: one reader (the
        # local run's default of one per four cores would only start idle processes)
        settings = ExecutionSettings(
            background=background,
            user_workers=user_workers,
            finish_workers=finish_workers,
            reader_workers=1,
        )
        executor = _worker_executor(RunConfig.model_validate_json(config_json), run_dir, settings)
        _WORKER_RUNNERS[key] = executor
    executor.start_workers()
    before, skipped_before = len(executor.failures), len(executor.skipped)
    problems = executor.execute_group(units)
    return problems, executor.failures[before:], executor.skipped[skipped_before:]


def _worker_executor(
    config: RunConfig, run_dir: str, settings: ExecutionSettings
) -> PipelinedExecutor:
    """The executor of a worker's tasks: in-process (CPU workers) or pipelined (GPU workers),
    skipping the units whose files are written (:func:`~intrabench.engine.resume.needs_work`)."""
    from intrabench import registry
    from intrabench.engine.resume import needs_work
    from intrabench.execution.pipelined import InProcessExecutor, PipelinedExecutor
    from intrabench.io.results import ResultsStore

    config.import_modules()
    datasets = {
        spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
    }
    check = functools.partial(needs_work, ResultsStore(Path(run_dir)), config, Path(run_dir))
    kind = InProcessExecutor if settings.background == "inline" else PipelinedExecutor
    return kind(config, Path(run_dir), datasets, settings, check)


def _devices(gpus: str | list[str] | tuple[str, ...]) -> list[str]:
    """Device indices from ``--gpus`` ("0,1" or a list), blanks dropped."""
    return [g.strip() for g in (gpus.split(",") if isinstance(gpus, str) else gpus) if g.strip()]


def make_client(dask: DaskSettings) -> tuple[Any, Any]:
    """(client, cluster or None) for ``dask``'s scheduler, cluster file or local cluster.

    Args:
        dask: The run's Dask settings; the first given of ``scheduler``, ``cluster_config``
            and ``gpus`` decides, else a local cluster of ``workers`` single-threaded
            processes (2 where None) with ``memory_limit`` each (Dask's "auto" where None).

    Returns:
        ``(client, cluster)``: a connected ``distributed.Client`` and the cluster it started,
        or None for a running scheduler (not this run's to close). The caller closes both.

    Raises:
        UserError: The scheduler cannot be reached (30 s), dask-jobqueue is not installed
            for a cluster file, or the file's options do not fit its cluster class.
    """
    from distributed import Client, LocalCluster

    if dask.scheduler:
        try:
            return Client(dask.scheduler, timeout="30s"), None
        except OSError as error:
            raise UserError(
                f"cannot reach the Dask scheduler at {dask.scheduler}: {error}"
            ) from None
    if dask.cluster_config:
        return _jobqueue_client(Path(dask.cluster_config))
    if dask.gpus:
        cluster = gpu_cluster(dask.gpus, dask.memory_limit, dask.workers_per_gpu or 1)
        return Client(cluster), cluster
    cluster = LocalCluster(
        n_workers=dask.workers or 2,
        threads_per_worker=1,
        processes=True,
        memory_limit=dask.memory_limit or "auto",
        dashboard_address=None,
    )
    return Client(cluster), cluster


def gpu_cluster(
    gpus: str | list[str] | tuple[str, ...],
    memory_limit: str | None = None,
    workers_per_gpu: int = 1,
) -> Any:
    """A local cluster with ``workers_per_gpu`` single-threaded workers per GPU, each seeing
    only its device (``CUDA_VISIBLE_DEVICES``) and offering the resource ``GPU=1``.

    More than one worker per GPU keeps the card busy while a worker does CPU work (simulated
    user, metrics, reading); each worker holds its own copy of the model in GPU memory.

    Args:
        gpus: Device indices, ``"0,1"`` or a list (``--gpus``); blanks are dropped.
        memory_limit: Memory bound per worker, a Dask size (``"8GB"``); None: Dask's "auto".
        workers_per_gpu: Worker processes sharing each device, at least 1.

    Returns:
        A ``distributed.SpecCluster`` (not yet connected to a client) whose workers are named
        ``gpu-<device>`` (``gpu-<device>-<index>`` with several per device).

    Raises:
        UserError: No device index is given, or ``workers_per_gpu`` is below 1.
    """
    from distributed import Nanny, Scheduler, SpecCluster

    devices = _devices(gpus)
    if not devices:
        raise UserError("--gpus: name at least one device index, e.g. --gpus 0,1")
    if workers_per_gpu < 1:
        raise UserError(f"--workers-per-gpu must be at least 1, got {workers_per_gpu}")
    workers = {
        f"gpu-{device}" + (f"-{index}" if workers_per_gpu > 1 else ""): {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "resources": {"GPU": 1},
                "memory_limit": memory_limit or "auto",
                "env": {"CUDA_VISIBLE_DEVICES": device},
            },
        }
        for device in devices
        for index in range(workers_per_gpu)
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler)


def _jobqueue_client(path: Path) -> tuple[Any, Any]:
    """A dask-jobqueue cluster from a YAML spec (:func:`read_cluster_spec`)."""
    from distributed import Client

    class_name, jobs, options = read_cluster_spec(path)
    try:
        import dask_jobqueue
    except ImportError:
        raise UserError(
            "cluster execution needs dask-jobqueue: pip install 'intrabench[cluster]'"
        ) from None
    try:
        cluster = getattr(dask_jobqueue, class_name)(**options)
    except (TypeError, ValueError) as error:  # an option the cluster class does not take
        raise UserError(f"{path}: options for {class_name}: {error}") from None
    cluster.scale(jobs=jobs)
    return Client(cluster), cluster


class DaskExecutor:
    """Every group as one Dask task (:func:`execute_group_task`) on the cluster of
    ``settings.dask``; the problems, failures and skipped work gathered here, failures.csv
    and problems.csv written also when the run stops. The runner consolidates the rows."""

    #: the rows are consolidated by the runner, once every task has returned
    consolidates = False

    def __init__(self, config: RunConfig, out: Path, settings: ExecutionSettings) -> None:
        self.config, self.out, self.dask = config, Path(out), settings.dask
        self.failures: list[UnitFailure] = []
        self.skipped: list[SkippedWork] = []
        self.executed: int | None = None  # written by the tasks: counted by none
        self.resources = parse_resources(self.dask.task_resources)
        if self.dask.gpus and not self.resources:
            self.resources = {"GPU": 1.0}
        check_local_resources(self.dask, self.resources)  # before any worker starts

    def run_groups(
        self, groups: list[list[WorkUnit]], unit_keys: list[str], progress: Any = None
    ) -> list[str]:
        """Run ``groups`` on the cluster; the problems (cases or models skipped). The
        progress is Dask's task bar, not ``progress``.

        Args:
            groups: The groups to run, each the work units of one (dataset, case, model) in
                plan order; each becomes one Dask task.
            unit_keys: The keys of every unit of the run; not used here (the runner
                consolidates the rows, :attr:`consolidates`).
            progress: Not used: a tqdm bar of finished tasks is drawn on stderr instead.

        Returns:
            One line per case or model skipped for a problem, a task that failed included
            (as ``task <key> failed: ...``), in the order the tasks finished.
        """
        client, cluster = make_client(self.dask)
        try:
            return self._submit_all(client, groups)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
            write_failures(self.out, self.failures)
            write_skipped_work(self.out, self.skipped)

    def close(self) -> None:
        """Nothing is held between runs (the cluster is closed by :meth:`run_groups`)."""

    def _task_workers(self) -> tuple[LaneMode, int | None, int | None]:
        """GPU workers hand prompting and finishing to subprocesses on their spare cores, and
        share the machine's user workers between them; CPU workers do all in the task."""
        if not self.dask.gpus:
            return "inline", None, None
        sharing = self.dask.gpu_workers
        users = default_user_workers(
            sharing=sharing, forward_frees_cpu=functools.partial(models_free_cpu, self.config)
        )
        return "process", users, default_finish_workers(sharing=sharing)

    def _submit_all(self, client: Any, groups: list[list[WorkUnit]]) -> list[str]:
        from distributed import as_completed
        from tqdm import tqdm

        if self.config.imports:  # modules with decorator-registered components, every worker
            client.register_plugin(
                _import_modules_plugin(self.config.imports), name="intrabench-imports"
            )
        config_json = self.config.model_dump_json()
        background, user_workers, finish_workers = self._task_workers()
        print(
            f"IntraBench on Dask ({client.dashboard_link or client.scheduler.address}): "
            f"{len(groups)} tasks",
            file=sys.stderr,
        )
        futures = {
            client.submit(
                execute_group_task,
                config_json,
                str(self.out),
                group,
                background,
                user_workers,
                finish_workers,
                key=f"intrabench-{group[0].key}",
                resources=self.resources or None,
                pure=False,
            ): group
            for group in groups
        }
        problems: list[str] = []
        bar = tqdm(total=len(futures), unit="task", file=sys.stderr, disable=not futures or None)
        for future in as_completed(futures):
            problems.extend(self._gather(future, futures[future]))
            bar.update(1)
        bar.close()
        return problems

    def _gather(self, future: Any, group: list[WorkUnit]) -> list[str]:
        """A finished task's problems; a task that failed is skipped work, not the run's end."""
        try:
            problems, failures, skipped = future.result()
        except Exception as error:  # a failing case must not stop the others
            problem = f"task {future.key} failed: {type(error).__name__}: {error}"
            first = group[0]
            self.skipped.append(
                SkippedWork(
                    dataset=first.dataset.key,
                    case=first.case_id,
                    model=first.model.key,
                    units=len(group),
                    problem=problem,
                )
            )
            return [problem]
        self.failures.extend(failures)
        self.skipped.extend(skipped)
        return problems


def _import_modules_plugin(modules: list[str]) -> Any:
    """A Dask worker plugin importing the config's modules in every (also restarted) worker."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class ImportModules(WorkerPlugin):
        def __init__(self, names: list[str]) -> None:
            self.names = list(names)

        def setup(self, worker: Any) -> None:
            import importlib

            for name in self.names:
                importlib.import_module(name)

    return ImportModules(modules)
