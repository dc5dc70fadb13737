"""How many worker processes of each kind a machine gets (the defaults of
:class:`~intrabench.execution.settings.ExecutionSettings`' ``None`` values)."""

from __future__ import annotations

import os
from collections.abc import Callable

from intrabench import registry
from intrabench.config import RunConfig

#: Unix niceness of the workers whose work can wait (metrics and files, reading ahead): where
#: the CPU is short, the model loop and the simulated users, which feed the model, go first
BACKGROUND_NICENESS = 10


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it).

    Returns:
        The number of cores in this process's CPU affinity set; where the system has no
        affinity call, ``os.cpu_count()`` (2 where that is unknown).
    """
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2


def default_user_workers(
    sharing: int = 1, forward_frees_cpu: bool | Callable[[], bool] = False
) -> int:
    """Worker processes for simulated users: one per four cores, at most 4, none below four
    cores unless the models compute on a GPU (then one from two cores on).

    A correction on a large volume can take longer than a GPU forward pass, so big machines
    get several. With CPU models and fewer than four cores there is no spare core (the model
    loop, the results worker and the reader share them): a user worker there slowed the demo's
    CPU models by more than it saved (docs/performance.md), so prompts are computed in the
    model loop. A GPU model leaves the loop's core idle during its forward passes: a user
    worker computes the next prompts there (the GPU proxy's time between forward passes drops
    by more than half on two cores: docs/performance.md).

    Args:
        sharing: How many model loops on this machine split its cores (Dask GPU workers on
            one node); the count is taken from this loop's share, ``usable_cores() //
            sharing``. 1 (the default): the loop has the machine to itself.
        forward_frees_cpu: Whether every model of the run computes its forward passes off
            the CPU (:meth:`~intrabench.interfaces.Model.forward_frees_cpu`), or a function
            that says so, called only where the answer changes the count (a share of two or
            three cores): asking a model whose ``device`` is 'auto' imports torch (1-2 s
            before the first case is read).

    Returns:
        The number of user worker processes, 0 to 4; 0 means the prompts are computed in
        the model loop.
    """
    share = usable_cores() // max(1, sharing)
    if 2 <= share < 4 and (
        forward_frees_cpu() if callable(forward_frees_cpu) else forward_frees_cpu
    ):
        return 1
    return min(4, share // 4)


def default_reader_workers(sharing: int = 1) -> int:
    """Worker processes reading cases ahead: one per four cores (at least one, at most 4).

    A GPU node's model loop can finish a case faster than one process decodes the next (a
    compressed CT takes seconds; LiteMedSAM's forward passes for its lesions, a fraction of a
    second), so big machines read several cases ahead; one reader on small machines, where
    the cores are the models'.

    Args:
        sharing: How many model loops on this machine split its cores, as in
            :func:`default_user_workers`.

    Returns:
        The number of reader processes, 1 to 4.
    """
    return max(1, min(4, usable_cores() // max(1, sharing) // 4))


def models_free_cpu(config: RunConfig) -> bool:
    """Whether every model of ``config`` computes its forward passes off the CPU.

    Args:
        config: The run's configuration; each of its models is looked up in the model
            registry and asked with its build parameters.

    Returns:
        True where the run has at least one model and every one computes off the CPU
        (:meth:`~intrabench.interfaces.Model.forward_frees_cpu`); False for a run without
        models.
    """
    return bool(config.models) and all(
        registry.models.get(spec.name).forward_frees_cpu(spec.build_params)
        for spec in config.models
    )


def default_finish_workers(sharing: int = 1) -> int:
    """Worker processes for metrics, rows and files: one per four cores (at least one, at
    most 4).

    One worker keeps up with the model loop on small machines; a GPU node's model loop
    finishes units faster than one process computes their surface distances.

    Args:
        sharing: How many model loops on this machine split its cores, as in
            :func:`default_user_workers`.

    Returns:
        The number of finishing processes, 1 to 4.
    """
    return max(1, default_user_workers(sharing))
