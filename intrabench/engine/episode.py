"""One interactive episode: initial prompt -> predict -> metrics -> refine -> ... .

An episode is a pure function of its inputs and seed: the prompter and refiner draw from
generators derived from (seed, dataset, case, target, prompter/refiner, step), so episodes can
run in any order, on any worker, and give the same rows.

The episode's logic is written once, as a *program* (:func:`episode_program`): a generator that
yields what it needs next, a :class:`UserCall` (the simulated clinician's next prompt) or a
:class:`ModelCall` (a forward pass), and is sent back an :class:`Answer`. Who answers, and when,
is up to the driver: :func:`run_episode` answers every call at once in this process; the
runner's :class:`~intrabench.execution.scheduling.EpisodeScheduler` answers model calls in the
model loop and user calls in a worker process, switching to another episode while one waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from intrabench.engine.resources import synchronize_device
from intrabench.engine.simulated_user import SimulatedUser
from intrabench.evaluation.metric_registry import surface_metric_names
from intrabench.evaluation.metrics import step_metrics, surface_at
from intrabench.interfaces import Model, Prompter, Refiner
from intrabench.types import Case, Prediction, Prompt, Target


@dataclass(eq=False)
class StepResult:
    """What happened at one step (0 = initial prompt, k = k-th refinement)."""

    step: int
    prompt: Prompt
    prediction: Prediction
    metrics: dict[str, float]
    effort: int
    cumulative_effort: int
    model_seconds: float
    prompter_seconds: float
    wall_seconds: float
    converged: bool = False
    #: seconds the user waited for the model at this step: its forward pass(es), CUDA
    #: synchronised (step 0: also the propagation prompter's model calls); 0 once converged
    latency_seconds: float = float("nan")
    #: the order of this step's forward pass among the model calls of its (case, model)
    #: group (0: the first, the cold call); -1 when not counted
    model_call_index: int = -1


@dataclass(frozen=True)
class UserCall:
    """The episode needs the simulated user's prompt for ``step`` (0: the initial prompt, k: the
    k-th correction of ``prediction``, the boolean (z, y, x) mask of the previous step)."""

    step: int
    prediction: np.ndarray | None = None
    history: tuple[Prompt, ...] = ()


@dataclass(frozen=True)
class ModelCall:
    """The episode needs a forward pass: ``model.predict(prompt, previous, update_slices)``."""

    step: int
    prompt: Prompt
    previous: Prediction | None = None
    update_slices: list[int] | None = None
    #: the target's class (``Target.class_name``), for models that take class prompts
    target_class: str | None = None


@dataclass(frozen=True)
class Answer:
    """The reply to a call: a :class:`Prompt` (``None``: nothing left to correct) or a
    :class:`Prediction`; ``seconds`` spent producing it, ``model_seconds`` of which inside the
    model (propagation prompters call the model too)."""

    value: Any
    seconds: float
    model_seconds: float = 0.0
    call_index: int = -1


Call = UserCall | ModelCall
EpisodeProgram = Generator[Call, Answer, list[StepResult]]


@dataclass
class _StepClock:
    """Time spent on one step: the answers' seconds plus the program's own bookkeeping."""

    resumed: float = field(default_factory=time.perf_counter)
    spent: float = 0.0

    def pause(self) -> None:
        self.spent += time.perf_counter() - self.resumed

    def resume(self, answer: Answer) -> Answer:
        self.resumed = time.perf_counter()
        self.spent += answer.seconds
        return answer


def episode_program(
    steps: int, refine: bool, keep_previous_prompts: bool = True, target_class: str | None = None
) -> EpisodeProgram:
    """The steps of one episode, as a generator of the calls it needs.

    The program yields a :class:`UserCall` (the simulated user's prompt or correction) or a
    :class:`ModelCall` (a prediction) and is sent each answer; a driver runs it in this
    process or across workers. A perfect prediction stops the interaction (the user answers
    ``None``); the remaining steps repeat it with zero added effort and ``converged=True``.

    Args:
        steps: The number of refinement steps.
        refine: Whether the episode refines (False: only the initial prompt and prediction).
        keep_previous_prompts: Whether each step's interactions are merged with the earlier
            ones before the model sees them.
        target_class: The target's class, passed with each model call (class-prompted models).

    Returns:
        ``1 + steps`` step results when ``refine``, else one, metrics left empty (see
        :func:`evaluate_steps`). ``wall_seconds`` of a step is the time spent on it: its calls
        plus bookkeeping, not the time other episodes ran in between.
    """
    clock = _StepClock()
    clock.pause()
    asked = yield UserCall(step=0)
    answer = clock.resume(asked)
    prompt: Prompt = answer.value
    prompter_seconds = answer.seconds - _finite(answer.model_seconds)
    model_in_prompter = answer.model_seconds
    clock.pause()
    predicted = clock.resume((yield ModelCall(step=0, prompt=prompt, target_class=target_class)))
    prediction: Prediction = predicted.value
    results = [
        StepResult(
            step=0,
            prompt=prompt,
            prediction=prediction,
            metrics={},
            effort=prompt.effort,
            cumulative_effort=prompt.effort,
            model_seconds=_finite(model_in_prompter) + predicted.model_seconds,
            prompter_seconds=prompter_seconds,
            wall_seconds=0.0,
            latency_seconds=_finite(model_in_prompter) + predicted.seconds,
            model_call_index=predicted.call_index,
        )
    ]
    clock.pause()
    results[-1].wall_seconds = clock.spent
    if not refine:
        return results

    accumulated = prompt
    history = [prompt]
    converged = False
    for step in range(1, steps + 1):
        clock = _StepClock()
        new: Prompt | None = None
        prompter_seconds = 0.0
        if not converged:
            clock.pause()
            answer = clock.resume(
                (yield UserCall(step=step, prediction=prediction.mask, history=tuple(history)))
            )
            new, prompter_seconds = answer.value, answer.seconds
        if new is None or new.is_empty:
            converged = True
            results.append(_repeat(results[-1], step, prompter_seconds))
            clock.pause()
            results[-1].wall_seconds = clock.spent
            continue
        history.append(new)
        accumulated = accumulated.merged_with(new) if keep_previous_prompts else new
        clock.pause()
        predicted = clock.resume(
            (
                yield ModelCall(
                    step=step,
                    prompt=accumulated if keep_previous_prompts else new,
                    previous=prediction,
                    update_slices=new.slices(),
                    target_class=target_class,
                )
            )
        )
        prediction = predicted.value
        results.append(
            StepResult(
                step=step,
                prompt=new,
                prediction=prediction,
                metrics={},
                effort=new.effort,
                cumulative_effort=results[-1].cumulative_effort + new.effort,
                model_seconds=predicted.model_seconds,
                prompter_seconds=prompter_seconds,
                wall_seconds=0.0,
                latency_seconds=predicted.seconds,
                model_call_index=predicted.call_index,
            )
        )
        clock.pause()
        results[-1].wall_seconds = clock.spent
    return results


def call_model(
    model: Model, call: ModelCall, call_index: int = -1, shape: tuple[int, ...] | None = None
) -> Answer:
    """Answer ``call`` with ``model`` (its case already set); the mask comes back read-only,
    checked to be a boolean array of the case's ``shape`` (:func:`checked_prediction`).

    Step 0 calls ``model.predict(prompt)``; a later step also passes the previous prediction and
    the slices the new interactions lie on. The device is synchronised before and after, so the
    wall time covers the whole forward pass.

    Args:
        model: The model, ``set_case`` already called for the case.
        call: The forward pass the episode asks for.
        call_index: The call's order among its (case, model) group's model calls (0: the first,
            cold call; -1: not counted); the caller counts.
        shape: The case's (z, y, x) shape the mask must have; None: not checked.

    Returns:
        The answer: the prediction (mask made read-only), the call's wall seconds (CUDA
        synchronised), the seconds the model reports inside itself, and ``call_index``.

    Raises:
        ModelOutputError: The model returned no boolean mask of ``shape``.
    """
    synchronize_device()
    started = time.perf_counter()
    model.reset_timer()
    if call.target_class is not None:
        model.set_target_class(call.target_class)
    if call.step == 0:
        prediction = model.predict(call.prompt)
    else:
        prediction = model.predict(
            call.prompt, previous=call.previous, update_slices=call.update_slices
        )
    synchronize_device()
    return Answer(
        _frozen(checked_prediction(prediction, shape, model)),
        time.perf_counter() - started,
        model.model_seconds(),
        call_index,
    )


def ask_user(
    user: SimulatedUser, ground_truth: np.ndarray, call: UserCall, model: Model | None = None
) -> Answer:
    """Answer ``call`` in this process; ``model`` serves propagation prompters.

    At step 0 a 2D model's ``segment_slice`` is handed to the initial prompter (propagation
    prompters segment slices with it); the model's own seconds spent there are reported apart.

    Args:
        user: The episode's simulated user (its prompter, refiner and rngs).
        ground_truth: The target's mask, boolean (z, y, x).
        call: The prompt the episode asks for (step 0: initial; k: correction of
            ``call.prediction``).
        model: The episode's model, set to the case; None when no prompter needs it.

    Returns:
        The answer: the prompt (None or empty: nothing left to correct), the seconds spent
        producing it, and the model seconds inside them (step 0 only; 0 otherwise).
    """
    if call.step == 0:
        segment_slice = (
            model.segment_slice  # type: ignore[attr-defined] - 2D models have it
            if model is not None and model.dimension == 2
            else None
        )
        if model is not None:
            model.reset_timer()
        started = time.perf_counter()
        prompt = user.initial(ground_truth, segment_slice)
        seconds = time.perf_counter() - started
        return Answer(prompt, seconds, model.model_seconds() if model is not None else 0.0)
    started = time.perf_counter()
    prompt = user.refine(ground_truth, call.prediction, call.step, list(call.history))
    return Answer(prompt, time.perf_counter() - started)


def run_episode(
    case: Case,
    target: Target,
    model: Model,
    prompter: Prompter,
    prompter_key: str,
    refiner: Refiner | None = None,
    refiner_key: str = "",
    steps: int = 0,
    keep_previous_prompts: bool = True,
    seed: int = 0,
    metric_fn: Callable[..., dict[str, float]] | None = step_metrics,
    ground_truth: np.ndarray | None = None,
) -> list[StepResult]:
    """Run one episode for ``target`` of ``case`` here, call after call.

    Args:
        case: The case; ``model.set_case(case.image)`` must already be called.
        target: The target to segment.
        model: The model to prompt.
        prompter: The initial prompter.
        prompter_key: The prompter's key, part of the episode's rng derivation.
        refiner: The refiner, or None for the initial prompt only.
        refiner_key: The refiner's key, part of the rng derivation of each step.
        steps: The number of refinement steps (with a refiner).
        keep_previous_prompts: Whether each step's interactions are merged with the earlier
            ones.
        seed: The run seed the rngs derive from.
        metric_fn: The per-step metrics; None leaves them empty, to be filled later by
            :func:`evaluate_steps` (the runner does that in a worker process).
        ground_truth: ``case.target_mask(target)`` (bool (z, y, x)) when the caller already
            has it.

    Returns:
        ``1 + steps`` step results when a refiner is given, otherwise one (see
        :func:`episode_program`).
    """
    if ground_truth is None:
        ground_truth = case.target_mask(target)
    user = SimulatedUser(
        prompter=prompter,
        prompter_key=prompter_key,
        refiner=refiner,
        refiner_key=refiner_key,
        seed=seed,
        identity=(case.dataset, case.case_id, target.target_id),
        spacing=case.image.spacing,
        model_dimension=model.dimension,
    )
    program = episode_program(
        steps if refiner is not None else 0,
        refiner is not None,
        keep_previous_prompts,
        target.class_name,
    )
    results = drive(
        program,
        lambda call: (
            call_model(model, call, shape=ground_truth.shape)
            if isinstance(call, ModelCall)
            else ask_user(user, ground_truth, call, model)
        ),
    )
    if metric_fn is not None:
        evaluate_steps(results, ground_truth, case.image.spacing, metric_fn)
    return results


def drive(program: EpisodeProgram, answer: Callable[[Call], Answer]) -> list[StepResult]:
    """Run ``program`` to its end, answering each call with ``answer``.

    Args:
        program: A fresh episode program (:func:`episode_program`), not yet started.
        answer: Answers one call (a :class:`UserCall` or :class:`ModelCall`), synchronously.

    Returns:
        The program's step results.
    """
    call = next(program)
    while True:
        try:
            call = program.send(answer(call))
        except StopIteration as finished:
            return finished.value


def evaluate_steps(
    results: list[StepResult],
    ground_truth: np.ndarray,
    spacing: tuple[float, float, float],
    metric_fn: Callable[..., dict[str, float]] = step_metrics,
    surface_metrics_at: str | Sequence[int] = "all",
) -> list[float]:
    """Fill the metrics of an episode run with ``metric_fn=None``, in place.

    Steps that repeat a converged prediction share its metrics (0 s) unless they need the
    surface metrics it was computed without; a step computed without them gets NaN for each
    surface metric.

    Args:
        results: The episode's step results, in step order; their ``metrics`` are replaced.
        ground_truth: The target's mask, boolean (z, y, x).
        spacing: The voxel spacing in mm, (z, y, x), for the surface metrics.
        metric_fn: Computes one step's metrics from (mask, ground truth, spacing) and the
            keyword ``with_surface``, as :func:`~intrabench.evaluation.metrics.step_metrics`
            does.
        surface_metrics_at: The run's setting of that name: "all", "final",
            "initial-and-final", or the step numbers that get the surface metrics (NSD, HD95;
            :func:`~intrabench.evaluation.metrics.surface_at`).

    Returns:
        The seconds spent on each step's metrics, in the order of ``results``.
    """
    seconds: list[float] = []
    previous: StepResult | None = None
    previous_surface = True
    last_step = results[-1].step if results else 0
    for result in results:
        started = time.perf_counter()
        surface = surface_at(surface_metrics_at, result.step, last_step)
        if (
            previous is not None
            and result.prediction is previous.prediction
            and (not surface or previous_surface)
        ):
            result.metrics = dict(previous.metrics)
            if not surface:
                result.metrics.update(dict.fromkeys(surface_metric_names(), float("nan")))
        else:
            result.metrics = metric_fn(
                result.prediction.mask, ground_truth, spacing, with_surface=surface
            )
            previous_surface = surface
        seconds.append(time.perf_counter() - started)
        previous = result
    return seconds


class ModelOutputError(ValueError):
    """A model returned something that is not a prediction of the case: the unit fails with
    this one line instead of an error deep in the metrics (or a silent threshold)."""


def checked_prediction(prediction: Any, shape: tuple[int, ...] | None, model: Any) -> Prediction:
    """``prediction`` when its mask is a boolean numpy array of ``shape`` (the case's (z, y,
    x) grid; None: not checked), else ModelOutputError naming what came back. Without the
    check a probability map (float) would be scored as if every voxel above 0 were foreground,
    and a mask of another shape would fail deep in the metrics ("operands could not be
    broadcast").

    Args:
        prediction: What the model's ``predict`` returned.
        shape: The case's (z, y, x) shape; None: the shape is not checked.
        model: The model, named in the error line (its ``name``, else its class).

    Returns:
        ``prediction`` itself, unchanged.

    Raises:
        ModelOutputError: No numpy mask, a mask of another shape, or a non-boolean mask.
    """
    name = getattr(model, "name", type(model).__name__)
    mask = getattr(prediction, "mask", None)
    if not isinstance(mask, np.ndarray):
        raise ModelOutputError(
            f"model '{name}' returned {type(prediction).__name__} with a "
            f"{type(mask).__name__} mask; return Prediction(mask=<a boolean "
            "numpy array>)"
        )
    if shape is not None and mask.shape != tuple(shape):
        raise ModelOutputError(
            f"model '{name}' returned a mask of shape {mask.shape} for a "
            f"case of shape {tuple(shape)} (z, y, x); return a mask on the "
            "case's whole canonical grid"
        )
    if mask.dtype != bool:
        raise ModelOutputError(
            f"model '{name}' returned a {mask.dtype} mask; masks are "
            "boolean (threshold probabilities or logits in the model)"
        )
    return prediction


def _frozen(prediction: Prediction) -> Prediction:
    """Make the mask read-only: it is evaluated after the episode, so a model editing its
    ``previous`` mask in place would silently change earlier steps' results."""
    prediction.mask.setflags(write=False)
    return prediction


def _finite(value: float) -> float:
    return 0.0 if value != value else value  # NaN -> 0


def _repeat(last: StepResult, step: int, prompter_seconds: float) -> StepResult:
    return StepResult(
        step=step,
        prompt=Prompt(),
        prediction=last.prediction,
        metrics=dict(last.metrics),
        effort=0,
        cumulative_effort=last.cumulative_effort,
        model_seconds=0.0,
        prompter_seconds=prompter_seconds,
        wall_seconds=0.0,
        converged=True,
        latency_seconds=0.0,
    )
