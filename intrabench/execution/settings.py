"""How a run executes, apart from what it computes: one frozen object built at the boundary.

:class:`ExecutionSettings` holds every choice that changes how fast a run goes and where it
runs, never its rows: the executor (this process or Dask), its worker lanes, what is done
ahead, the Dask cluster. The command line builds it (:meth:`ExecutionSettings.from_sources`)
from its flags, an optional YAML file (``intrabench run --execution FILE``) and the
environment; the engine and the executors read the object, never ``argparse`` or
``os.environ``. docs/environment.md lists every environment variable IntraBench reads.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from intrabench.errors import ConfigError, UserError

#: local Dask worker processes per core at most (each imports the stack and holds its models)
WORKERS_PER_CORE = 4
#: the least memory a local Dask worker may be given (it imports numpy, SciPy, torch and the
#: models' code before its first task)
MIN_WORKER_MEMORY = 512 * 2**20
#: the environment variable naming the progress bar's least redraw interval (tqdm's own)
PROGRESS_INTERVAL_VARIABLE = "TQDM_MININTERVAL"

Background = Literal["process", "thread", "inline"]


@dataclass(frozen=True)
class DaskSettings:
    """Where a Dask run's tasks run: a running scheduler, a job-queue cluster, or a local
    cluster (``workers`` processes, or ``workers_per_gpu`` per device of ``gpus``)."""

    #: address of a running scheduler (``tcp://host:8786``)
    scheduler: str | None = None
    #: YAML file of a SLURM/PBS/LSF/SGE/HTCondor cluster (docs/scaling.md)
    cluster_config: Path | None = None
    #: worker processes of a local cluster (None: 2)
    workers: int | None = None
    #: device indices of a local GPU cluster, one worker (or ``workers_per_gpu``) each
    gpus: tuple[str, ...] = ()
    #: workers sharing each GPU (None: 1)
    workers_per_gpu: int | None = None
    #: memory bound per local worker (``8GB``; None: Dask's "auto")
    memory_limit: str | None = None
    #: resources each task needs (``("GPU=1",)``)
    task_resources: tuple[str, ...] = ()

    @property
    def gpu_workers(self) -> int:
        """How many workers ``gpus`` and ``workers_per_gpu`` start on this machine."""
        return max(1, len(self.gpus)) * max(1, self.workers_per_gpu or 1)


@dataclass(frozen=True)
class ExecutionSettings:
    """Every execution choice of a run; none of them changes a prompt, a metric or a key.

    ``None`` means "chosen for this machine" (docs/performance.md says how)."""

    #: ``local``: this process and its workers; ``dask``: a Dask cluster (:attr:`dask`)
    executor: Literal["local", "dask"] = "local"
    #: ``process``: worker processes beside the model loop; ``thread``: threads (tests);
    #: ``inline``: everything in the loop, one episode at a time
    background: Background = "process"
    #: interleaved episodes of one (case, model) (None: 4 per user worker)
    episodes_in_flight: int | None = None
    #: processes answering the simulated users (None: one per four cores, at most 4)
    user_workers: int | None = None
    #: processes computing metrics and writing rows (None: one per four cores, at least 1)
    finish_workers: int | None = None
    #: processes reading the next groups' cases (None: one per four cores, at least 1)
    reader_workers: int | None = None
    #: memory for cases kept for the next model (None: an eighth of the RAM)
    case_cache_bytes: int | None = None
    #: build the next model beside the current one's last group (None: where both fit)
    build_ahead: bool | None = None
    #: set up the next group's case beside the forward passes (None: GPU models)
    set_up_ahead: bool | None = None
    #: the progress bar's least redraw interval in seconds (``TQDM_MININTERVAL``)
    progress_interval_s: float = 0.5
    #: the cluster of ``executor: dask``
    dask: DaskSettings = field(default_factory=DaskSettings)

    @classmethod
    def from_sources(
        cls,
        flags: Mapping[str, Any] | None = None,
        file: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ExecutionSettings:
        """The settings from, in rising precedence, the defaults, the environment, the YAML
        file and the command line's flags. Checked: a value the run could not use is a
        :class:`UserError` in one line.

        Args:
            flags: The command line's execution flags by field name (the fields of this
                class and of :class:`DaskSettings`, e.g. ``workers``, ``gpus``); a value of
                None or ``[]`` is a flag not given. None: no flags.
            file: A YAML execution settings file (``intrabench run --execution FILE``): a
                flat mapping with the same keys. None: no file.
            environ: The environment to read (``TQDM_MININTERVAL``, docs/environment.md).
                None: ``os.environ``.

        Returns:
            The checked settings (:meth:`checked`).

        Raises:
            ConfigError: The file is not a mapping, or a flag or key is unknown or of the
                wrong kind.
            UserError: An option the run could not use (see :meth:`checked`), or a
                ``TQDM_MININTERVAL`` that is not a number.
        """
        values: dict[str, Any] = _from_environment(os.environ if environ is None else environ)
        if file is not None:
            values.update(_read_file(Path(file)))
        given = {k: v for k, v in (flags or {}).items() if v is not None and v != []}
        _refuse_unknown(given, "execution flags")
        values.update(given)
        return cls.of(values).checked()

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ExecutionSettings:
        """Settings from flat ``values`` (fields of this class and of :class:`DaskSettings`).

        Args:
            values: Field values by name, this class's and :class:`DaskSettings`' in one
                mapping (as a settings file or the flags give them); ``gpus`` may be a
                comma-separated string (``"0,1"``) or a list, ``task_resources`` a list and
                ``cluster_config`` a string path. Fields left out take their defaults.

        Returns:
            The settings, not yet checked (:meth:`checked`).
        """
        dask_names = {f.name for f in fields(DaskSettings)}
        dask = {k: v for k, v in values.items() if k in dask_names}
        if "gpus" in dask:
            dask["gpus"] = _devices(dask["gpus"])
        if dask.get("task_resources") is not None:
            dask["task_resources"] = tuple(dask["task_resources"])
        if dask.get("cluster_config") is not None:
            dask["cluster_config"] = Path(dask["cluster_config"])
        own = {k: v for k, v in values.items() if k not in dask_names}
        return cls(**own, dask=DaskSettings(**dask))

    def with_changes(self, **changes: Any) -> ExecutionSettings:
        """A copy with ``changes`` (fields of this class; None values are ignored).

        Args:
            **changes: New values by field name of this class (not of
                :class:`DaskSettings`; a whole ``dask=`` object may be given); a value of
                None keeps the current one.

        Returns:
            A new frozen settings object; this one is unchanged.
        """
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def checked(self) -> ExecutionSettings:
        """These settings, or :class:`UserError` naming the flag that cannot be used: Dask
        options without ``--executor dask``, a local cluster the machine cannot hold.

        Returns:
            This object itself, once checked.

        Raises:
            UserError: A Dask option with the local executor, ``--workers-per-gpu`` without
                ``--gpus``, more local workers than the machine takes (4 per core), an
                unreadable cluster config, task resources no local worker offers, or a
                memory limit under 512 MiB or not a size.
        """
        _check_executor_options(self)
        if self.executor == "dask":
            _check_local_cluster(self.dask)
        return self


def _devices(gpus: Any) -> tuple[str, ...]:
    """Device indices from ``"0,1"`` or a list, blanks dropped."""
    items = gpus.split(",") if isinstance(gpus, str) else list(gpus or ())
    return tuple(str(item).strip() for item in items if str(item).strip())


def _known_names() -> list[str]:
    return [f.name for f in fields(ExecutionSettings) if f.name != "dask"] + [
        f.name for f in fields(DaskSettings)
    ]


def _refuse_unknown(values: Mapping[str, Any], where: str) -> None:
    for key in values:
        if key not in _known_names():
            close = difflib.get_close_matches(str(key), _known_names(), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(
                f"{where}: unknown key '{key}'{hint}; valid keys: {', '.join(_known_names())}"
            )


def _read_file(path: Path) -> dict[str, Any]:
    """The flat mapping of an execution settings file (ConfigError in one line otherwise)."""
    from intrabench.config import read_yaml_file

    data = read_yaml_file(path, "execution settings file") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping like {{executor: dask, workers: 4}}")
    _refuse_unknown(data, str(path))
    kinds = {f.name: f.type for f in fields(ExecutionSettings)} | {
        f.name: f.type for f in fields(DaskSettings)
    }
    for key, value in data.items():
        if "int" in str(kinds[key]) and value is not None and type(value) is not int:
            raise ConfigError(f"{path}: {key} must be a whole number, got {value!r}")
        if type(value) is int and value < 0:  # a count of workers, slots or seconds
            raise ConfigError(f"{path}: {key} must be 0 or more, got {value}")
        if "bool" in str(kinds[key]) and value is not None and not isinstance(value, bool):
            raise ConfigError(f"{path}: {key} must be true or false, got {value!r}")
    if data.get("executor", "local") not in ("local", "dask"):
        raise ConfigError(f"{path}: executor must be local or dask, got {data['executor']!r}")
    if data.get("background", "process") not in ("process", "thread", "inline"):
        raise ConfigError(
            f"{path}: background must be process, thread or inline, got {data['background']!r}"
        )
    return dict(data)


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings the environment gives (docs/environment.md)."""
    text = environ.get(PROGRESS_INTERVAL_VARIABLE, "").strip()
    if not text:
        return {}
    try:
        return {"progress_interval_s": float(text)}
    except ValueError:
        raise UserError(
            f"{PROGRESS_INTERVAL_VARIABLE}={text!r}: not a number of seconds; unset it or "
            "give e.g. 0.5"
        ) from None


_DASK_FLAGS = (
    "scheduler",
    "cluster_config",
    "workers",
    "gpus",
    "workers_per_gpu",
    "memory_limit",
    "task_resources",
)


def _check_executor_options(settings: ExecutionSettings) -> None:
    """Options that would be silently ignored are errors instead."""
    dask = settings.dask
    given = [name for name in _DASK_FLAGS if getattr(dask, name) not in (None, ())]
    if settings.executor == "local" and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UserError(f"{flags}: only used with --executor dask")
    if dask.workers_per_gpu is not None and not dask.gpus:
        raise UserError("--workers-per-gpu: only used with --gpus")


def _check_local_cluster(dask: DaskSettings) -> None:
    """A local cluster the machine can hold: 1 to 4 workers per core, each with a memory
    bound it can start in; a cluster file and task resources that can be used."""
    cores = os.cpu_count() or 1
    most = WORKERS_PER_CORE * cores
    if dask.workers is not None and not 1 <= dask.workers <= most:
        raise UserError(
            f"--workers {dask.workers}: a local Dask cluster takes 1 to {most} worker "
            f"processes on this machine ({cores} cores)"
        )
    if dask.workers_per_gpu is not None and not 1 <= dask.workers_per_gpu <= most:
        raise UserError(
            f"--workers-per-gpu {dask.workers_per_gpu}: give 1 to {most} workers per GPU on "
            f"this machine ({cores} cores)"
        )
    if dask.cluster_config is not None:  # before the run's folder is written
        read_cluster_spec(dask.cluster_config)
    if dask.task_resources:  # tasks no local worker could start
        check_local_resources(dask, parse_resources(dask.task_resources))
    _check_memory_limit(dask.memory_limit)


def _check_memory_limit(limit: str | None) -> None:
    if limit is None or str(limit).strip().lower() == "auto":
        return
    from dask.utils import parse_bytes

    try:
        size = parse_bytes(str(limit))
    except (ValueError, TypeError):
        raise UserError(
            f"--memory-limit '{limit}': not a size; give e.g. 8GB, 512MiB or auto"
        ) from None
    if size < MIN_WORKER_MEMORY:
        raise UserError(
            f"--memory-limit {limit}: a worker needs at least {MIN_WORKER_MEMORY // 2**20} MiB"
        )


def parse_resources(items: tuple[str, ...] | list[str] | None) -> dict[str, float]:
    """``NAME=AMOUNT`` items as a mapping (an amount left out is 1).

    Args:
        items: The ``--task-resources`` items, e.g. ``("GPU=1", "MEMORY=8e9")`` or ``["GPU"]``;
            None or empty: no resources.

    Returns:
        The amount each task needs by resource name, as floats (``{"GPU": 1.0}``).

    Raises:
        UserError: An amount that is not a number.
    """
    resources: dict[str, float] = {}
    for item in items or []:
        name, _, amount = item.partition("=")
        try:
            resources[name] = float(amount or 1)
        except ValueError:
            raise UserError(f"--task-resources: expected NAME=AMOUNT, got '{item}'") from None
    return resources


def check_local_resources(dask: DaskSettings, resources: dict[str, float]) -> None:
    """UserError when the local cluster's workers cannot offer what each task asks
    (``--task-resources``): such tasks would wait forever. The local cluster's workers offer
    GPU=1 each with ``--gpus``, nothing otherwise; a scheduler's or a job queue's workers are
    started elsewhere, with their own ``--resources``.

    Args:
        dask: The run's Dask settings; with a ``scheduler`` or a ``cluster_config`` nothing
            is checked.
        resources: What each task needs by resource name (:func:`parse_resources`).

    Raises:
        UserError: A resource a task needs more of than a local worker offers.
    """
    if dask.scheduler or dask.cluster_config:
        return
    offered = {"GPU": 1.0} if dask.gpus else {}
    lacking = {
        name: amount for name, amount in resources.items() if amount > offered.get(name, 0.0)
    }
    if lacking:
        asked = ", ".join(f"{name}={amount:g}" for name, amount in lacking.items())
        have = ", ".join(f"{name}={amount:g}" for name, amount in offered.items()) or "none"
        raise UserError(
            f"--task-resources {asked}: the local cluster's workers offer {have}, "
            "so no task could start; use --gpus for GPU workers, or --scheduler "
            "with workers started with --resources"
        )


def read_cluster_spec(path: Path) -> tuple[str, int, dict[str, Any]]:
    """(dask-jobqueue cluster class name, jobs, options) of a cluster config ({kind:
    slurm|pbs|lsf|sge|htcondor, jobs: N, options: {...}}); UserError in one line for anything
    else (checked before the run's folder is written).

    Args:
        path: The YAML cluster config (``--cluster-config``, docs/scaling.md).

    Returns:
        ``(class_name, jobs, options)``: the dask-jobqueue class to start (``"SLURMCluster"``,
        ...), the number of jobs to scale to (1 where left out, at least 1), and the
        keyword arguments for that class (the file's ``options``, a copy).

    Raises:
        UserError: The file is not such a mapping, its ``kind`` is not one of the five, or
            ``jobs`` is not a whole number of at least 1.
    """
    from intrabench.config import read_yaml_file

    spec = read_yaml_file(path, "cluster config") or {}
    if not isinstance(spec, dict) or not isinstance(spec.get("options", {}), dict):
        raise UserError(
            f"{path}: expected a mapping like {{kind: slurm, jobs: 4, options: "
            "{cores: 8, memory: 32GB, ...}}"
        )
    kind = str(spec.get("kind", "")).lower()
    classes = {
        "slurm": "SLURMCluster",
        "pbs": "PBSCluster",
        "lsf": "LSFCluster",
        "sge": "SGECluster",
        "htcondor": "HTCondorCluster",
    }
    if kind not in classes:
        raise UserError(f"{path}: kind must be one of {', '.join(classes)}, got '{kind}'")
    jobs = spec.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UserError(f"{path}: jobs must be a whole number >= 1, got {jobs!r}")
    return classes[kind], jobs, dict(spec.get("options", {}))
