"""Several episodes in flight, so the model loop never waits for the simulated user.

An episode alternates between the simulated user (prompt, correction) and the model (forward
pass), and each needs the other's last answer. Run one episode at a time and the model idles
while the user thinks. :class:`EpisodeScheduler` keeps up to ``in_flight`` episodes of one
(case, model) going: their model calls run here, in the order they become ready, and their user
calls run in a worker process (:mod:`intrabench.execution.user_worker`), so while one episode's
correction is computed the model predicts for another.

Results do not depend on the interleaving: every episode is a pure function of its seed (see
:mod:`intrabench.engine.episode`), and models keep per-episode state only in the ``previous``
prediction they are given (their caches are keyed by content, e.g. the crop or slice, and
their encoder batches are fixed blocks of slices, never "whatever is not cached yet").
Memory: each episode in flight holds its predictions until it ends.
"""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

from intrabench.engine.episode import (
    Answer,
    EpisodeProgram,
    ModelCall,
    StepResult,
    UserCall,
    ask_user,
    call_model,
    episode_program,
)
from intrabench.engine.group import EpisodeTask
from intrabench.execution import interrupts, user_worker
from intrabench.execution.lanes import Lane
from intrabench.execution.loop_clock import LoopClock
from intrabench.execution.subprocess_worker import WorkerDied
from intrabench.execution.user_worker import Introduction, PackedMask, UserNotLoadable
from intrabench.interfaces import Model


@dataclass(eq=False)
class _Running:
    task: EpisodeTask
    program: EpisodeProgram
    lane: Lane | None  # the worker that answers its user; None: answered here
    introduction: Introduction | None = None  # sent with the worker's first call


class EpisodeScheduler:
    """Runs episodes of the model's current case, up to ``in_flight`` at a time.

    ``users``: the lanes whose workers answer user calls; an episode stays with one worker,
    new episodes go to the least busy. With no lanes (or ``in_flight=1``) everything runs in
    this process, one episode after the other, exactly like :func:`~intrabench.engine.episode.
    run_episode`. ``imports``: the run's plugin modules, for the workers. Initial prompts of
    prompters that query the model (propagation) are always computed here (their forward
    passes count as ``simulated user here`` on ``clock``). ``clock``: where the loop's time
    goes, by phase (:mod:`intrabench.execution.loop_clock`; a new one when not given).
    """

    def __init__(
        self,
        model: Model,
        users: Lane | Sequence[Lane] | None = None,
        in_flight: int = 1,
        imports: Iterable[str] = (),
        clock: LoopClock | None = None,
    ) -> None:
        if in_flight < 1:
            raise ValueError("in_flight must be >= 1")
        self.model = model
        lanes = [users] if isinstance(users, Lane) else list(users or [])
        self.users = [lane for lane in lanes if lane.mode != "inline"] if in_flight > 1 else []
        self.in_flight = in_flight if self.users else 1
        self.imports = list(imports)
        #: user calls answered by the workers / in this process, over every :meth:`run`
        self.answered_by_worker = 0
        self.answered_here = 0
        #: forward passes made so far (numbers each call: 0 is the case's cold call)
        self.model_calls = 0
        self.clock = clock if clock is not None else LoopClock()

    def run(
        self,
        tasks: Iterable[EpisodeTask],
        done: Callable[[EpisodeTask, list[StepResult]], None],
        failed: Callable[[EpisodeTask, Exception], None] | None = None,
    ) -> None:
        """Run every task; ``done(task, results)`` is called as each episode ends (in any
        order; metrics left empty). Without ``failed`` the first model or user failure is
        raised; with it, ``failed(task, error)`` is called, that episode is dropped and the
        others go on (``failed`` may raise to stop everything).

        Args:
            tasks: The episodes to run (made lazily, so only those in flight hold a ground
                truth).
            done: Called with each finished episode's task and its step results.
            failed: Called with an episode's task and the error that stopped it; None raises
                the first error.
        """
        _Run(self, tasks, done, failed).loop()

    def _answer_here(self, episode: _Running, call: UserCall) -> Answer:
        self.answered_here += 1
        return ask_user(episode.task.user, episode.task.ground_truth, call, self.model)

    def _assign_worker(self, episode: _Running, running: list[_Running]) -> None:
        """Give ``episode`` to the started worker with the fewest episodes, unless it must stay
        here: no worker ready yet (their imports take a second), or a user that cannot be
        pickled (e.g. a prompter class defined inside a function)."""
        ready = [lane for lane in self.users if lane.ready()]
        if not ready:
            return
        try:
            user = pickle.dumps(episode.task.user, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            return
        load = {id(lane): 0 for lane in ready}
        for other in running:
            if other.lane is not None and id(other.lane) in load:
                load[id(other.lane)] += 1
        episode.lane = min(ready, key=lambda lane: load[id(lane)])
        episode.introduction = Introduction(
            tuple(self.imports), user, PackedMask.pack(episode.task.ground_truth)
        )

    def _ask_worker(self, episode: _Running, call: UserCall) -> Future:
        prediction = None if call.prediction is None else PackedMask.pack(call.prediction)
        introduction, episode.introduction = episode.introduction, None  # sent once
        return episode.lane.submit(
            user_worker.answer, episode.task.key, call.step, prediction, call.history, introduction
        )


class _Run:
    """One :meth:`EpisodeScheduler.run`: its episodes not started yet, running, ready for a
    forward pass and waiting for a user worker's answer."""

    def __init__(
        self,
        scheduler: EpisodeScheduler,
        tasks: Iterable[EpisodeTask],
        done: Callable[[EpisodeTask, list[StepResult]], None],
        failed: Callable[[EpisodeTask, Exception], None] | None,
    ) -> None:
        self.scheduler = scheduler
        self.clock = scheduler.clock
        self.done = done
        self.failed = failed
        self.pending: Iterator[EpisodeTask] = iter(tasks)
        self.exhausted = False  # every task started
        self.running: list[_Running] = []
        self.ready: deque[tuple[_Running, ModelCall]] = deque()
        self.waiting: dict[Future, tuple[_Running, UserCall]] = {}

    def loop(self) -> None:
        """Until every episode has ended: a forward pass for the next ready episode, else the
        next answers of the user workers; new episodes as others end."""
        self.start_more()
        while self.running:
            interrupts.check()  # a Ctrl-C or kill whose first raise was swallowed
            if self.ready:
                self.forward_pass()
            else:
                self.take_answers()
            self.start_more()

    def fail(self, episode: _Running, error: Exception) -> None:
        """``episode`` failed: raised without a ``failed`` callback, else dropped."""
        if self.failed is None:
            raise error
        if episode in self.running:
            self.running.remove(episode)
        self.failed(episode.task, error)

    def advance(self, episode: _Running, answer: Answer | None) -> None:
        """Give ``answer`` to ``episode``'s program and take its next call: queued for the
        model, sent to its user worker or answered here (straight back into the program);
        ``done`` when the program ends."""
        clock = self.clock
        while True:
            try:
                call = next(episode.program) if answer is None else episode.program.send(answer)
            except StopIteration as finished:
                self.running.remove(episode)
                with clock.phase("handing episodes to the metrics"):
                    self.done(episode.task, finished.value)
                return
            if isinstance(call, ModelCall):
                self.ready.append((episode, call))
                return
            if episode.lane is not None and not (
                call.step == 0 and episode.task.user.prompter.needs_model
            ):
                with clock.phase("sending to user workers"):
                    self.waiting[self.scheduler._ask_worker(episode, call)] = (episode, call)
                return
            with clock.phase("simulated user here"):
                answer = self.scheduler._answer_here(episode, call)

    def start_more(self) -> None:
        """Start episodes until ``in_flight`` run or every task has started."""
        while not self.exhausted and len(self.running) < self.scheduler.in_flight:
            with self.clock.phase("starting episodes"):  # the target's mask is built here
                task = next(self.pending, None)
                if task is None:
                    self.exhausted = True
                    return
                episode = _Running(
                    task,
                    episode_program(
                        task.steps, task.refine, task.keep_previous_prompts, task.target_class
                    ),
                    None,
                )
                self.scheduler._assign_worker(episode, self.running)
            self.running.append(episode)
            try:
                self.advance(episode, None)
            except Exception as error:  # noqa: BLE001 - isolated per episode (fail)
                self.fail(episode, error)

    def forward_pass(self) -> None:
        """The model's call for the first ready episode, its answer given to the episode."""
        scheduler = self.scheduler
        episode, call = self.ready.popleft()
        index = scheduler.model_calls
        scheduler.model_calls += 1
        try:
            with self.clock.phase("forward passes"):
                answer = call_model(scheduler.model, call, index, episode.task.ground_truth.shape)
            self.advance(episode, answer)
        except Exception as error:  # noqa: BLE001
            self.fail(episode, error)

    def take_answers(self) -> None:
        """Wait for the user workers' next answers and give each to its episode (a user the
        worker cannot load is answered here from now on; a dead worker is raised)."""
        with self.clock.phase("waiting for simulated users"):
            finished, _ = wait(list(self.waiting), return_when=FIRST_COMPLETED)
        for future in finished:
            episode, call = self.waiting.pop(future)
            try:
                try:
                    answer = future.result()
                    self.scheduler.answered_by_worker += 1
                except UserNotLoadable:  # its user is answered here from now on
                    episode.lane = None
                    with self.clock.phase("simulated user here"):
                        answer = self.scheduler._answer_here(episode, call)
                self.advance(episode, answer)
            except WorkerDied:
                raise  # the worker is gone: every episode it held is lost
            except Exception as error:  # noqa: BLE001
                self.fail(episode, error)
