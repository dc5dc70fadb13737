"""Run a config into its run folder: plan, resume, execute, consolidate.

A work unit is (dataset, case, model, prompter, refiner, seed): every target of one case for
one model and prompting scheme (:mod:`intrabench.engine.plan`). The runner plans the run,
keeps the units whose files are already written (resume), hands the others, grouped by
(dataset, case, model), to the executor its :class:`~intrabench.execution.settings.
ExecutionSettings` choose (:mod:`intrabench.execution`), and consolidates the rows into
``results.parquet`` and ``results.csv``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from itertools import groupby
from pathlib import Path
from typing import Any

import yaml

from intrabench import registry
from intrabench.config import RunConfig
from intrabench.engine.failures import UnitFailure, write_failures
from intrabench.engine.plan import Plan, WorkUnit, make_plan
from intrabench.engine.resume import needs_work
from intrabench.engine.skipped_work import SkippedWork, write_skipped_work
from intrabench.errors import ConfigError
from intrabench.execution.base import Executor, make_executor
from intrabench.execution.loop_clock import LoopClock
from intrabench.execution.progress import RunProgress
from intrabench.execution.settings import DaskSettings, ExecutionSettings
from intrabench.execution.sizing import (  # noqa: F401 - the names users import from here
    BACKGROUND_NICENESS,
    default_finish_workers,
    default_reader_workers,
    default_user_workers,
    models_free_cpu,
    usable_cores,
)
from intrabench.interfaces import Dataset
from intrabench.io.results import ResultsStore, ensure_writable, write_frame, write_run_metadata
from intrabench.io.run_directory import RunLock, check_output_directory, check_same_run

log = logging.getLogger(__name__)


class Runner:
    """Runs ``config`` into ``run_dir``, resuming from the unit files already there.

    ``settings`` choose the executor and its workers (default: this process, its worker
    processes sized to the machine); keyword ``overrides`` change single fields of them
    (``Runner(config, out, background="inline")``). ``extend``: continue a run folder whose
    recorded config differs (``intrabench run --extend``). ``progress`` makes the progress
    line from the units to run.
    """

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        progress: Callable[[list[WorkUnit]], RunProgress] | None = None,
        *,
        settings: ExecutionSettings | None = None,
        extend: bool = False,
        **overrides: Any,
    ) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress
        self.extend = extend
        self.settings = (settings or ExecutionSettings()).with_changes(**overrides)
        self.store = ResultsStore(self.run_dir)
        self._lock = RunLock(self.run_dir)
        config.import_modules()  # plugins first: their datasets and models are named below
        self.datasets: dict[str, Dataset] = {
            spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
        }
        #: the executor of this run's groups (:func:`~intrabench.execution.base.make_executor`)
        self.executor: Executor = make_executor(
            config, self.run_dir, self.datasets, self.settings, self.needs_work
        )

    @property
    def failures(self) -> list[UnitFailure]:
        """Units that failed (also in ``failures.csv``)."""
        return self.executor.failures

    @property
    def skipped(self) -> list[SkippedWork]:
        """Groups skipped for a problem with their case or model (``problems.csv``)."""
        return self.executor.skipped

    @property
    def executed(self) -> int | None:
        """Units executed (unit files written) by :meth:`run`; None on Dask."""
        return self.executor.executed

    @property
    def loop_clock(self) -> LoopClock:
        """Where the local model loop's time went, by phase."""
        return self.executor.loop_clock

    def plan(self) -> Plan:
        """The run's plan (:func:`~intrabench.engine.plan.make_plan`) for its config and
        datasets.

        Returns:
            Every work unit of the config, finished or not, and the skipped combinations.
        """
        return make_plan(self.config, self.datasets)

    def prepare(self, executor: str | None = None) -> tuple[Plan, list[list[WorkUnit]]]:
        """Plan the run, write its metadata, and group the unfinished units by (dataset, case,
        model). A refusal here (a differing config, an unmet need) releases the run's lock as
        a closed run does. ``executor``: the name recorded (default: the settings')."""
        check_output_directory(self.run_dir)  # before anything is written there
        ensure_writable(self.run_dir)
        self._lock.acquire()
        if self._lock.unclosed:
            log.warning(
                "the previous run in %s (%s) ended without closing: the system killed "
                "it (out of memory? dmesg names the process it killed), kill -9, or the "
                "machine stopped. Its finished units are kept; the rest runs now",
                self.run_dir,
                self._lock.unclosed,
            )
        try:
            return self._plan_pending(executor or self.settings.executor)
        except BaseException:
            self._lock.release()
            raise

    def _plan_pending(self, executor: str) -> tuple[Plan, list[list[WorkUnit]]]:
        identity = self.config.without_runtime()  # the machine's runtime does not name the run
        check_same_run(self.run_dir, identity, extend=self.extend)
        plan = self.plan()
        from intrabench.engine.model_needs import unmet_needs

        # units not done yet (a done unit met its model's needs when it ran); is_done, not
        # needs_work: no prediction folders searched twice
        unmet = unmet_needs([u for u in plan.units if not self.store.is_done(u.key)], self.datasets)
        if unmet:  # before a model is built or a unit fails for it
            raise ConfigError("; ".join(unmet))
        config_text = yaml.safe_dump(identity.model_dump(mode="json"), sort_keys=False)
        keys = [u.key for u in plan.units]  # what results are this run's
        from intrabench.evaluation.metric_registry import metric_names

        extra = {"units": len(keys), "executor": executor, "unit_keys": keys}
        # the metric set: a resume computed with another one is refused here
        write_run_metadata(self.run_dir, config_text, {**extra, "metrics": metric_names()})
        import pandas as pd

        columns = ["dataset", "model", "prompter", "refiner", "reason"]
        write_frame(self.run_dir / "skipped.csv", pd.DataFrame(plan.skipped, columns=columns))
        self.store.set_aside_damaged(keys)  # once per run, not per group
        pending = [u for u in plan.units if self.needs_work(u)]
        return plan, [list(g) for _, g in groupby(pending, key=lambda u: u.group)]

    def needs_work(self, unit: WorkUnit) -> bool:
        """Whether ``unit`` is to be (re)computed (:func:`~intrabench.engine.resume.needs_work`).

        Args:
            unit: A work unit of the plan.

        Returns:
            True when it has no unit file here, or its saved predictions are missing.
        """
        return needs_work(self.store, self.config, self.run_dir, unit)

    def finish(self, plan: Plan) -> None:
        """Consolidate the plan's rows and close the run (after :meth:`prepare`).

        Args:
            plan: The plan :meth:`prepare` returned; its units' rows make ``results.csv``.
        """
        self.store.consolidate([u.key for u in plan.units])
        self._lock.release()

    def close(self) -> None:
        """Stop the executor's workers (what they hold is written first) and close the run."""
        self.executor.close()
        self._lock.release()

    def run(self) -> tuple[Plan, list[str]]:
        """Execute every unfinished unit; returns the plan and the problems (cases or models
        skipped). Failed units are in :attr:`failures` (and ``failures.csv``), executed ones
        counted in :attr:`executed`.

        Returns:
            (the plan, one line per group skipped for a problem with its case or its model).
        """
        plan, groups = self.prepare()  # first: a bad run directory fails before any worker starts
        keys = [u.key for u in plan.units]
        progress = self.progress([u for g in groups for u in g]) if self.progress else None
        started = time.perf_counter()
        try:
            problems = self.executor.run_groups(groups, keys, progress)
            if groups and not self.executor.consolidates:
                self.store.consolidate(keys)
        finally:
            self.close()  # also on Ctrl-C: finished episodes still reach their unit files
            write_failures(self.run_dir, self.failures)
            write_skipped_work(self.run_dir, self.skipped)
            if progress is not None:
                progress.close()
        log.info("executed %s units in %.1f s", self.executed, time.perf_counter() - started)
        if not groups:
            self.finish(plan)
        return plan, problems


def run_distributed(
    config: RunConfig,
    out: Path,
    settings: ExecutionSettings | DaskSettings,
    extend: bool = False,
) -> tuple[Plan, list[str]]:
    """Run ``config`` on Dask (:mod:`intrabench.execution.dask`): the local runner's results
    store and resume.

    Args:
        config: The run's config.
        out: The run folder.
        settings: The run's execution settings, or its Dask cluster settings alone; the
            executor is set to ``dask`` either way.
        extend: Whether a changed config may continue the run folder (``--extend``).

    Returns:
        As :meth:`Runner.run`: the plan and the problems of the work skipped.
    """
    if isinstance(settings, DaskSettings):
        settings = ExecutionSettings(dask=settings)
    return Runner(config, out, settings=settings.with_changes(executor="dask"), extend=extend).run()
