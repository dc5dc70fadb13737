"""The executor interface: how a run's groups of work units are executed.

A group is the units of one (dataset, case, model), in plan order; an executor runs every
unit of the groups it is given that still needs work, writes each unit's file once its rows
are complete, and collects what failed (:attr:`Executor.failures`) and what was skipped for a
problem with its case or model (:attr:`Executor.skipped`). The rows do not depend on the
executor: every episode is a pure function of its seed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from intrabench.engine.failures import UnitFailure
from intrabench.engine.plan import WorkUnit
from intrabench.engine.skipped_work import SkippedWork
from intrabench.execution.settings import ExecutionSettings

if TYPE_CHECKING:
    from intrabench.config import RunConfig
    from intrabench.execution.progress import RunProgress
    from intrabench.interfaces import Dataset


class Executor(Protocol):
    """What the runner asks of an executor."""

    #: whether :meth:`run_groups` consolidates the run's rows itself (else the runner does)
    consolidates: bool
    failures: list[UnitFailure]
    skipped: list[SkippedWork]
    #: units whose files this executor wrote (None where it cannot count them: Dask)
    executed: int | None

    def run_groups(
        self,
        groups: list[list[WorkUnit]],
        unit_keys: list[str],
        progress: RunProgress | None = None,
    ) -> list[str]:
        """Execute ``groups``; the problems (one line each) of the work skipped.

        Args:
            groups: The groups to run, each the work units of one (dataset, case, model) in
                plan order (units that need no work may be among them).
            unit_keys: The keys of every unit of the run, whose rows make ``results.csv`` when
                the executor consolidates them (:attr:`consolidates`).
            progress: The progress line to advance, or None for none.

        Returns:
            One line per group skipped for a problem with its case or its model.
        """

    def close(self) -> None:
        """Stop every worker and thread; also after an error or Ctrl-C."""


def make_executor(
    config: RunConfig,
    run_dir: Path,
    datasets: dict[str, Dataset],
    settings: ExecutionSettings,
    needs_work: Callable[[WorkUnit], bool],
) -> Executor:
    """The executor ``settings`` choose: Dask, in-process (``background="inline"``) or
    pipelined (worker processes or threads beside the model loop).

    Args:
        config: The run's config.
        run_dir: The run folder.
        datasets: The run's built datasets by key (the in-process executors read cases from
            them; Dask workers build their own).
        settings: The run's execution settings (``executor``, ``background``, ...).
        needs_work: Whether a unit is still to be computed (resume; see
            :func:`~intrabench.engine.resume.needs_work`).

    Returns:
        The executor, not started; the caller closes it.
    """
    if settings.executor == "dask":
        from intrabench.execution.dask import DaskExecutor

        return DaskExecutor(config, run_dir, settings)
    from intrabench.execution.pipelined import InProcessExecutor, PipelinedExecutor

    if settings.background == "inline":
        return InProcessExecutor(config, run_dir, datasets, settings, needs_work)
    return PipelinedExecutor(config, run_dir, datasets, settings, needs_work)
