"""The local executors: a run's groups in this process, its work spread over worker lanes.

:class:`PipelinedExecutor` runs the model loop in the calling thread; metrics, result rows,
prediction files and unit files are produced by results workers (:mod:`.lanes`), the next
groups' cases are read ahead by readers (:mod:`._read_ahead`), the simulated users of
interleaved episodes answer from user workers (:mod:`.scheduling`), the next model is built
ahead (:mod:`._model_ahead`), the next case set up ahead (:mod:`._case_ahead`) and used cases
kept for the next model (:mod:`._case_cache`). :class:`InProcessExecutor` does all the same work in the loop, one
episode at a time: same files, no overlap. What an episode does is
:mod:`intrabench.engine.episode`; what a unit's rows are, :mod:`intrabench.engine.finishing`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from intrabench import registry
from intrabench.attributes.cache import case_with_attributes
from intrabench.config import ComponentSpec, RunConfig
from intrabench.engine.failures import UnitFailure
from intrabench.engine.finishing import (
    CroppedEpisode,
    EpisodeEvaluation,
    UnitJob,
    crop_episode,
    evaluate_episode_isolated,
    finish_unit_isolated,
)
from intrabench.engine.group import EpisodeTask, episode_tasks
from intrabench.engine.plan import WorkUnit
from intrabench.engine.resources import PeakMemory, timed_set_case
from intrabench.engine.skipped_work import SkippedWork
from intrabench.errors import DataError, UserError
from intrabench.execution import interrupts
from intrabench.execution._case_ahead import CaseSetupAhead, sets_up_ahead
from intrabench.execution._case_cache import CaseCache, CaseIdentity
from intrabench.execution._model_ahead import NextModel, room_for_both
from intrabench.execution._read_ahead import ReadAhead, identity_of, reader_pool
from intrabench.execution.lanes import Lane, LaneMode, LanePool
from intrabench.execution.loop_clock import LoopClock
from intrabench.execution.progress import RunProgress
from intrabench.execution.scheduling import EpisodeScheduler
from intrabench.execution.settings import ExecutionSettings
from intrabench.execution.sizing import (
    BACKGROUND_NICENESS,
    default_finish_workers,
    default_user_workers,
    models_free_cpu,
)
from intrabench.execution.subprocess_worker import WorkerDied
from intrabench.interfaces import Dataset, Model
from intrabench.io.checkpoints import CheckpointError
from intrabench.io.results import (
    consolidate_run,
)
from intrabench.io.volume import Volume
from intrabench.serving.building import build_model
from intrabench.types import Case

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Evaluating:
    """A unit whose episodes have all ended, and the futures of their metrics."""

    job: UnitJob
    metrics: list[Future]


class _GroupSkipped(Exception):
    """A group that cannot run; ``problems``: its lines for the run's problems."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(*problems)
        self.problems = problems


@dataclass(eq=False)
class _GroupEpisodes:
    """One group's episodes as they end, by unit and in target order: the cropped episodes
    and the futures of their metrics; the units with a failed episode (dropped: the next run
    computes them again); the model process's peak memory and the case's set-up seconds."""

    identity: CaseIdentity
    case: Case
    units: list[WorkUnit]
    setup_seconds: float = 0.0
    memory: PeakMemory = field(default_factory=PeakMemory)
    failed: set[str] = field(default_factory=set)
    collected: dict[str, list[CroppedEpisode | None]] = field(init=False)
    measured: dict[str, list[Future | None]] = field(init=False)

    def __post_init__(self) -> None:
        targets = len(self.case.targets)
        self.collected = {unit.key: [None] * targets for unit in self.units}
        self.measured = {unit.key: [None] * targets for unit in self.units}

    def ended(self, unit: WorkUnit, index: int, episode: CroppedEpisode, metrics: Future) -> bool:
        """Keep ``unit``'s episode ``index`` and its metrics; whether it was the unit's last."""
        self.collected[unit.key][index] = episode
        self.measured[unit.key][index] = metrics
        return all(e is not None for e in self.collected[unit.key])

    def take(self, unit: WorkUnit) -> tuple[list[CroppedEpisode], list[Future]]:
        """``unit``'s episodes and their metrics, once all have ended; forgotten here."""
        return self.collected.pop(unit.key), self.measured.pop(unit.key)

    def drop(self, unit: WorkUnit) -> bool:
        """Drop ``unit`` after a failed episode; whether it was the unit's first failure."""
        if unit.key in self.failed:
            return False
        self.failed.add(unit.key)
        self.collected.pop(unit.key, None)
        self.measured.pop(unit.key, None)
        return True


class PipelinedExecutor:
    """Executes groups of work units in this process, with worker lanes beside the model loop.

    ``settings``' ``None`` values are chosen for this machine (:mod:`.sizing`). A unit counts
    as done only once its file is written, so an interrupted run resumes where its files
    stop. ``needs_work`` says whether a unit of a group is still to be computed.
    """

    #: the rows are consolidated by the results worker, after the last group
    consolidates = True

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        datasets: dict[str, Dataset],
        settings: ExecutionSettings,
        needs_work: Callable[[WorkUnit], bool],
    ) -> None:
        background: LaneMode = settings.background
        self.config = config
        self.run_dir = Path(run_dir)
        self.datasets = datasets
        self.needs_work = needs_work
        #: units that failed in this process (see :mod:`intrabench.engine.failures`)
        self.failures: list[UnitFailure] = []
        #: groups skipped for a problem with their case or model (``problems.csv``)
        self.skipped: list[SkippedWork] = []
        #: units executed (unit files written)
        self.executed = 0
        self._counting = threading.Lock()
        self._models: dict[str, Model] = {}
        self._next_model = NextModel()  # the next model, built ahead (see _model_ahead)
        self.build_ahead = settings.build_ahead if background == "process" else False
        self._case_ahead = CaseSetupAhead()  # the next case's set-up (see _case_ahead)
        self.set_up_ahead = settings.set_up_ahead if background == "process" else False
        self._unusable_models: dict[str, str] = {}
        self._cases = CaseCache(settings.case_cache_bytes)
        self._finishers = self._finisher_pool(settings.finish_workers, background)
        #: the cases of the next groups, read by the reader workers (see _read_ahead)
        self._read_ahead = ReadAhead(
            config, reader_pool(config, settings.reader_workers, background), self._cases
        )
        #: units whose episodes have all ended, waiting for their episodes' metrics
        self._evaluating: list[_Evaluating] = []
        # attributes of cases read in this process, measured beside the model loop
        self._attribute_thread = ThreadPoolExecutor(1, thread_name_prefix="intrabench-attributes")
        self._attributes: dict[CaseIdentity, Future] = {}
        self._progress: RunProgress | None = None
        self._consolidating = False  # run_groups() consolidates through the results worker
        #: where the model loop's time went, by phase (:mod:`intrabench.execution.loop_clock`)
        self.loop_clock = LoopClock()
        self._set_up_users(settings, background)

    def _set_up_users(self, settings: ExecutionSettings, background: LaneMode) -> None:
        """The user workers (none unless they are processes) and the episodes in flight."""
        user_workers = settings.user_workers
        if user_workers is None and background == "process":
            user_workers = default_user_workers(
                forward_frees_cpu=functools.partial(models_free_cpu, self.config)
            )
        self.user_workers = user_workers if background == "process" else 0
        if self.user_workers < 0:
            raise ValueError("user_workers must be >= 0")
        # prompting is sequential within an episode: a few episodes in flight per user worker
        # keep the model busy while the workers compute the others' next prompts
        self.episodes_in_flight = settings.episodes_in_flight or max(1, 4 * self.user_workers)
        # one episode at a time leaves nothing to overlap: then no user worker is started
        self._users = self._user_lanes(background) if self.episodes_in_flight > 1 else []

    @staticmethod
    def _finisher_pool(workers: int | None, background: LaneMode) -> LanePool:
        """The results workers. A queued job holds only cropped episodes
        (:mod:`intrabench.engine.finishing`): a deep queue is cheap and lets the workers catch
        up during slow units instead of blocking fast ones."""
        workers = default_finish_workers() if workers is None else workers
        if workers < 1:
            raise ValueError("finish_workers must be >= 1")
        return LanePool(
            workers,
            background,
            max_pending=64,
            name="intrabench-results",
            preload=("intrabench.engine.finishing",),
            niceness=BACKGROUND_NICENESS,
        )

    def _user_lanes(self, background: LaneMode) -> list[Lane]:
        """The user workers, each preloading the run's prompter and refiner modules."""
        modules = {registry.prompters.get(spec.name).__module__ for spec in self.config.prompters}
        modules |= {registry.refiners.get(spec.name).__module__ for spec in self.config.refiners}
        preload = ("intrabench.execution.user_worker", *sorted(modules))
        return [
            Lane(
                background,
                max_pending=self.episodes_in_flight + 2,
                name="intrabench-users",
                preload=preload,
                raise_failures=False,
            )
            for _ in range(self.user_workers)
        ]

    def _model(self, spec: ComponentSpec) -> Model:
        """The model for ``spec``; the previously used model is released first (one in memory)."""
        if spec.key not in self._models:
            self._models.clear()
            self._models[spec.key] = build_model(spec)
        return self._models[spec.key]

    def _build_next_ahead(self, current: ComponentSpec, next_unit: WorkUnit | None) -> None:
        """Start building the next group's model beside ``current``'s last group, when it is
        another model and there is room for both (:mod:`.model_ahead`); the model then sets
        up that group's case too, when the case is in memory or being read
        (:mod:`.case_ahead`; unless ``set_up_ahead`` is False)."""
        following = next_unit.model if next_unit is not None else None
        if (
            following is None
            or following.key == current.key
            or following.key in self._unusable_models
            or self.build_ahead is False
            or self._next_model.key == following.key
        ):
            return
        if self.build_ahead or room_for_both(current, following):
            image_of = self._image_of(next_unit) if self.set_up_ahead is not False else None
            self._next_model.start(following, image_of)

    def _image_of(self, unit: WorkUnit) -> Callable[[], Volume] | None:
        """A function giving ``unit``'s case image from memory or from its reader (it waits
        for the read), or None when the case is neither kept nor being read."""
        identity = identity_of(unit)
        kept = self._cases.get(identity)
        if kept is not None:
            return lambda: kept.image
        reading = self._read_ahead.reading(identity)
        if reading is not None:
            return lambda: reading.result().image
        return None

    def _set_up_next_ahead(
        self, model: Model, current: WorkUnit, following: WorkUnit | None
    ) -> None:
        """Start ``model``'s set-up of ``following``'s case in a thread, when the next group
        uses the same model on another case that is in memory or being read, and the model
        splits its set-up out and computes off the CPU (or ``set_up_ahead`` says so)."""
        if (
            following is None
            or following.model.key != current.model.key
            or self.set_up_ahead is False
            or not sets_up_ahead(model)
        ):
            return
        identity = (following.dataset.key, following.case_id)
        if identity == (current.dataset.key, current.case_id):
            return
        if self.set_up_ahead is None and not type(model).forward_frees_cpu(
            current.model.build_params
        ):
            return
        image_of = self._image_of(following)
        if image_of is not None:
            self._case_ahead.start(model, image_of)

    def _prepare_model(self, spec: ComponentSpec) -> float:
        """Build ``spec``'s model and read its weights (:meth:`Model.prepare`); the seconds it
        took. A failure is not reported here: :meth:`execute_group` meets it again (building
        the model anew, or at its first use) and reports it."""
        started = time.perf_counter()
        built = self._next_model.take(spec.key)  # built and prepared ahead: wait for it
        if built is not None:
            self._models.clear()
            self._models[spec.key] = built
            return time.perf_counter() - started
        try:
            self._model(spec).prepare()
        except Exception as error:  # noqa: BLE001 - reported where the model is used
            log.debug(
                "preparing model '%s' failed (%s: %s); left for its first use",
                spec.key,
                type(error).__name__,
                error,
            )
        return time.perf_counter() - started

    def _case(self, unit: WorkUnit) -> Case:
        """``unit``'s case: the current one, the one read ahead, or read now (DataError)."""
        identity = identity_of(unit)
        case = self._cases.get(identity)  # the same case for the next model, or a kept one
        self._read_ahead.used(identity)
        if case is not None:
            return case
        with self.loop_clock.phase("waiting for cases"):
            case = self._read_ahead.take(
                unit, functools.partial(self.datasets[unit.dataset.key].load, unit.case_id)
            )
        if self.config.target_attributes and case.attributes is None:
            # a case read here (not ahead): its attributes are wanted with its first unit's
            # rows, not by its forward passes; hashing a CT case for the attribute cache takes
            # a while (SHA-256 releases the GIL), so it runs beside them
            self._attributes[identity] = self._attribute_thread.submit(
                case_with_attributes, case, self.datasets[unit.dataset.key]
            )
        self._cases.put(identity, case, keep=self._read_ahead.wanted_next)
        return case

    def _attributes_of(self, identity: CaseIdentity, case: Case) -> dict | None:
        """``case``'s target attributes, once measured (see :meth:`_case`)."""
        pending = self._attributes.pop(identity, None)
        if pending is not None:
            pending.result()  # its error, if any, is raised here, as it was when read
        return case.attributes

    def _first_case(self, unit: WorkUnit) -> None:
        """Read ``unit``'s case into memory now; a bad case is left for :meth:`execute_group`
        to report (it reads it again)."""
        with contextlib.suppress(DataError):
            self._case(unit)

    def execute_group(
        self, units: list[WorkUnit], wait: bool = True, following: WorkUnit | None = None
    ) -> list[str]:
        """Run the units of one (dataset, case, model) group; returns failed-case messages.

        With ``wait`` (the default) the group's unit files are written when this returns;
        otherwise call :meth:`wait` before relying on them.

        Args:
            units: The work units of one (dataset, case, model) group, in plan order.
            wait: Whether to wait for the group's unit files to be written.
            following: The next group's first unit, whose case the model may set up beside
                this group's forward passes; None for none.

        Returns:
            One line per problem that skipped the group (its case unreadable or without
            targets, its model not buildable or its checkpoint unusable); [] when it ran, or when
            its model's problem was reported for an earlier group.
        """
        try:
            case, model = self._case_and_model(units)
        except _GroupSkipped as skipped:
            return skipped.problems
        try:  # weights are read at first use: a bad file stops this model, not the run
            ran = self._run_episodes(units, case, model, following)
        except CheckpointError as error:
            self._unusable_models[units[0].model.key] = str(error)
            return [f"model '{units[0].model.key}' skipped: {error}"]
        if ran and wait:
            self.wait()
        return []

    def _case_and_model(self, units: list[WorkUnit]) -> tuple[Case, Model]:
        """The group's case and model. Raises :class:`_GroupSkipped`, the group recorded as
        skipped (``problems.csv``), when the case cannot be read or has no targets, or the
        model cannot be built (or could not before: then it is not reported again)."""
        first = units[0]
        where = f"{first.dataset.key}/{first.case_id}"
        try:
            case = self._case(first)
        except DataError as error:
            raise self._skip(units, str(error), f"{where}: skipped: {error}") from None
        if not case.targets:
            problem = "the label has no targets"
            raise self._skip(units, problem, f"{where}: skipped: {problem}")
        if self._progress is not None:  # the ETA's seconds per target scale with them
            self._progress.case_targets(first, len(case.targets))
        if first.model.key in self._unusable_models:
            raise self._skip(units, self._unusable_models[first.model.key])
        try:
            model = self._model(first.model)
        except UserError as error:  # e.g. a missing checkpoint: the other models still run
            self._unusable_models[first.model.key] = str(error)
            line = f"model '{first.model.key}' skipped: {error}"
            raise self._skip(units, str(error), line) from None
        return case, model

    def _skip(self, units: list[WorkUnit], problem: str, *lines: str) -> _GroupSkipped:
        """Record the group of ``units`` as skipped for ``problem``; the exception that ends
        it, with ``lines`` for the run's problems (none: reported already)."""
        first = units[0]
        self.skipped.append(
            SkippedWork(
                dataset=first.dataset.key,
                case=first.case_id,
                model=first.model.key,
                units=len(units),
                problem=problem,
            )
        )
        return _GroupSkipped(list(lines))

    def _run_episodes(
        self, units: list[WorkUnit], case: Case, model: Model, following: WorkUnit | None
    ) -> bool:
        """Set ``model`` on the group's case and run the episodes of the units still to be
        computed, interleaved (:mod:`.scheduling`); whether they ran. A case the model cannot
        take fails those units instead; a bad checkpoint or a user error is raised."""
        first = units[0]
        scheduler = EpisodeScheduler(
            model, self._users, self.episodes_in_flight, self.config.imports, clock=self.loop_clock
        )
        pending = [unit for unit in units if self.needs_work(unit)]
        group = _GroupEpisodes((first.dataset.key, case.case_id), case, pending)
        try:
            with self.loop_clock.phase("model set_case"):
                self._case_ahead.wait()  # this case's set-up, when it was started ahead
                group.setup_seconds = timed_set_case(model, case)
        except (CheckpointError, UserError):
            raise
        except Exception as error:  # noqa: BLE001 - the model cannot take this case
            for unit in pending:
                self._fail(UnitFailure.of(unit, error))
            return False
        self._set_up_next_ahead(model, first, following)
        scheduler.run(
            episode_tasks(pending, case, model.dimension, group.failed),
            functools.partial(self._episode_done, group),
            functools.partial(self._episode_failed, group),
        )
        return True

    def _episode_done(self, group: _GroupEpisodes, task: EpisodeTask, results: list) -> None:
        """An episode of ``group`` ended: its crop's metrics are computed now, in the results
        workers (a unit's last episode does not wait for the metrics of all the others at the
        end of the run), and its unit is handed on after its last episode."""
        group.memory.sample()
        unit, index, target = task.tag
        if unit.key in group.failed:
            return
        episode = crop_episode(task.ground_truth, target, results)
        metrics = self._finishers.submit(
            evaluate_episode_isolated,
            EpisodeEvaluation(unit=unit, spacing=group.case.image.spacing, episode=episode),
        )
        if group.ended(unit, index, episode, metrics):  # the unit's last episode
            episodes, measured = group.take(unit)
            self._evaluating.append(_Evaluating(self._unit_job(group, unit, episodes), measured))
        self._submit_evaluated()

    def _episode_failed(self, group: _GroupEpisodes, task: EpisodeTask, error: Exception) -> None:
        """An episode of ``group`` failed: its unit fails (once), its other episodes dropped."""
        if isinstance(error, (CheckpointError, WorkerDied)):
            raise error  # the model's weights or a worker: not this unit's fault
        unit, _, target = task.tag
        if group.drop(unit):
            self._fail(UnitFailure.of(unit, error, target.target_id))

    def _unit_job(
        self, group: _GroupEpisodes, unit: WorkUnit, episodes: list[CroppedEpisode]
    ) -> UnitJob:
        """The job that writes ``unit``'s rows and files from its ended ``episodes``."""
        image = group.case.image
        return UnitJob(
            run_name=self.config.name,
            run_dir=self.run_dir,
            unit=unit,
            case_id=group.case.case_id,
            spacing=image.spacing,
            shape=image.shape,
            geometry=image.geometry,
            attributes=self._attributes_of(group.identity, group.case),
            save_predictions=self.config.save_predictions,
            episodes=episodes,
            keep_rows=(
                self._consolidating
                and self._finishers.mode == "process"
                and len(self._finishers) == 1
            ),
            resources=group.memory.snapshot(group.setup_seconds),
        )

    def _submit_evaluated(self, wait: bool = False) -> None:
        """Hand every unit whose episodes' metrics are all back to the results workers, for
        its rows and files; with ``wait``, wait for those metrics first (every unit goes)."""
        waiting: list[_Evaluating] = []
        try:
            while self._evaluating:  # each unit leaves the list once, even if a worker died
                evaluating = self._evaluating.pop(0)
                if not wait and not all(future.done() for future in evaluating.metrics):
                    waiting.append(evaluating)
                    continue
                self._submit_unit(evaluating)
        finally:
            self._evaluating[:0] = waiting

    def _submit_unit(self, evaluating: _Evaluating) -> None:
        """Fill the unit's metrics from its episodes' (all done) and queue its rows and files;
        an error in an episode's metrics fails the unit instead."""
        job = evaluating.job
        outcomes = [future.result() for future in evaluating.metrics]  # WorkerDied: raised
        problem = next((outcome for outcome in outcomes if isinstance(outcome, str)), None)
        if problem is not None:
            self._fail(UnitFailure.of(job.unit, problem))
            return
        for episode, steps in zip(job.episodes, outcomes):
            for result, (metrics, _) in zip(episode.results, steps):
                result.metrics = metrics
        job.metric_seconds = [[seconds for _, seconds in steps] for steps in outcomes]
        if not job.save_predictions:  # the crops went to the metrics already: not again
            job.episodes = [episode.without_masks() for episode in job.episodes]
        future = self._finishers.submit(finish_unit_isolated, job)
        future.add_done_callback(functools.partial(self._finished, job.unit))

    def _fail(self, failure: UnitFailure) -> None:
        with self._counting:  # also called from the results workers' reader threads
            self.failures.append(failure)
            if self._progress is not None:
                self._progress.failed()

    def _finished(self, unit: WorkUnit, future: Future) -> None:
        """A finishing job is done (in a worker's reader thread): count it, or record why it
        failed (a worker that died is raised by the lane instead)."""
        if future.cancelled() or future.exception() is not None:
            return
        outcome = future.result()
        if isinstance(outcome, str):  # the unit's one-line cause
            self._fail(UnitFailure.of(unit, outcome))
        else:
            with self._counting:
                self.executed += 1

    def start_workers(self) -> None:
        """Start the background workers (no-op when inline or already started); until a user
        worker has imported its modules, prompts are computed in the model loop."""
        self._finishers.start()
        self._read_ahead.readers.start()
        for lane in self._users:
            lane.start()

    def wait(self) -> None:
        """Block until every queued metric and file of this runner is written."""
        with self.loop_clock.phase("waiting for results workers"):
            self._submit_evaluated(wait=True)
            self._finishers.drain()

    def close(self) -> None:
        """Write what the background lanes hold (finished episodes) and stop them."""
        with contextlib.suppress(Exception):  # e.g. after Ctrl-C: units whose metrics are due
            self._submit_evaluated(wait=True)
        self._next_model.close()
        self._case_ahead.close()
        self._finishers.close()
        self._read_ahead.readers.close()
        self._attribute_thread.shutdown(wait=True)
        self._attributes.clear()
        self._cases.clear()
        for lane in self._users:
            lane.close()

    def run_groups(
        self,
        groups: list[list[WorkUnit]],
        unit_keys: list[str],
        progress: RunProgress | None = None,
    ) -> list[str]:
        """Execute ``groups`` (each one (dataset, case, model)); returns the problems (cases
        or models skipped). With groups, the run's rows (``unit_keys``) are consolidated by
        the results worker at the end. Call :meth:`close` afterwards, also on an error.

        Args:
            groups: The groups to run, each the units of one (dataset, case, model).
            unit_keys: The keys of every unit of the run, whose rows are consolidated.
            progress: The progress line to advance, or None.

        Returns:
            One line per group skipped for a problem with its case or its model.
        """
        self._progress = progress
        problems: list[str] = []
        self.loop_clock.start()
        try:
            if groups:
                self._start_run(groups)
            for index in range(len(groups)):
                interrupts.check()  # a Ctrl-C or kill whose first raise was swallowed
                problems.extend(self._run_group(groups, index))
            if groups:
                self._consolidate_at_the_end(unit_keys)
            self.wait()
        finally:
            self.loop_clock.stop()  # the closing is not the loop's (Ctrl-C: it waits)
        log.debug("%s", "\n".join(self.loop_clock.lines()))
        return problems

    def _start_run(self, groups: list[list[WorkUnit]]) -> None:
        """Start the workers and the reading of the first cases, and build the first model
        beside the first case."""
        # every worker imports its modules now, while this process builds the first model
        # and reads the first case: that start waits on files and compilers and leaves a core
        # idle, whereas the same imports beside the first forward passes slowed them (started
        # after the model was built, the whole LiteMedSAM benchmark run was longer:
        # docs/performance.md)
        self.start_workers()
        self._read_ahead.start(groups)
        # the first model's network is built and its weights read beside the first case
        # (seconds each on a GPU node: a checkpoint of a few GB, a CT decoded); the first
        # group starts here for the progress line: its ETA counts down
        if self._progress is not None:
            self._progress.start_group(groups[0])
        with ThreadPoolExecutor(1, thread_name_prefix="intrabench-model") as builder:
            prepared = builder.submit(self._prepare_model, groups[0][0].model)
            self._first_case(groups[0][0])
            with self.loop_clock.phase("building models"):  # what the case left
                build_seconds = prepared.result()
        if self._progress is not None:
            self._progress.model_built(groups[0], build_seconds)
        self._consolidating = True

    def _run_group(self, groups: list[list[WorkUnit]], index: int) -> list[str]:
        """Run group ``index`` of ``groups``, its model built first when it is not in memory
        and the next cases and model started ahead; the group's problems."""
        group = groups[index]
        # the case in memory is still the previous group's here: compare with this group's,
        # or a case that comes back after another is read twice. A reader still busy with
        # this group's case holds the loop here: that is its wait too
        with self.loop_clock.phase("waiting for cases"):
            self._read_ahead.read_ahead_of(groups, index)
        if self._progress is not None and index > 0:
            self._progress.start_group(group)
        spec = group[0].model
        if spec.key not in self._models and spec.key not in self._unusable_models:
            # built here, not in the group's seconds: the ETA keeps builds apart
            with self.loop_clock.phase("building models"):
                build_seconds = self._prepare_model(spec)
            if self._progress is not None:
                self._progress.model_built(group, build_seconds)
        following = groups[index + 1][0] if index + 1 < len(groups) else None
        self._build_next_ahead(spec, following)
        started = time.perf_counter()
        problems = self.execute_group(group, wait=False, following=following)
        if self._progress is not None:
            self._progress.finish_group(group, time.perf_counter() - started)
        return problems

    def _consolidate_at_the_end(self, unit_keys: list[str]) -> None:
        """After the last group: the run's rows consolidated by the first results worker, once
        every unit is written (a single worker holds the rows it wrote: it consolidates them;
        with several, after all of them have written their units)."""
        if self._progress is not None:
            self._progress.finishing(
                "every unit handed on: finishing the last episodes' "
                "metrics, then writing results.csv and .parquet"
            )
        self.wait()
        self._finishers.first.submit(consolidate_run, self.run_dir, unit_keys)


class InProcessExecutor(PipelinedExecutor):
    """Every group's work in the model loop, one episode at a time (no worker process): the
    executor of Dask's CPU tasks, which may not start processes and whose cluster already
    fills the cores. The same files as :class:`PipelinedExecutor`."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        datasets: dict[str, Dataset],
        settings: ExecutionSettings,
        needs_work: Callable[[WorkUnit], bool],
    ) -> None:
        super().__init__(
            config, run_dir, datasets, settings.with_changes(background="inline"), needs_work
        )
