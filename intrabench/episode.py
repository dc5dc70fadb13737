"""One interactive episode: initial prompt -> predict -> metrics -> refine -> ... .

An episode is a pure function of its inputs and seed: the prompter and refiner draw from
generators derived from (seed, dataset, case, target, prompter/refiner, step), so episodes can
run in any order, on any worker, and give the same rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from intrabench.metrics import step_metrics
from intrabench.protocols import Model, PromptContext, Prompter, RefineContext, Refiner
from intrabench.seeding import derive_rng
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
    """Run one episode for ``target`` of ``case``; ``model.set_case`` must already be called.

    Returns ``1 + steps`` results when a refiner is given (a perfect prediction stops the
    interaction; the remaining steps repeat it with zero added effort and ``converged=True``),
    otherwise one result. With ``metric_fn=None`` the metrics are left empty, to be filled
    later by :func:`evaluate_steps` (the runner does that in a worker process).
    ``ground_truth``: ``case.target_mask(target)`` when the caller already has it.
    """
    if ground_truth is None:
        ground_truth = case.target_mask(target)
    spacing = case.image.spacing
    segment_slice = getattr(model, "segment_slice", None) if model.dimension == 2 else None
    identity = (case.dataset, case.case_id, target.target_id)

    results: list[StepResult] = []
    wall = time.perf_counter()
    model.reset_timer()
    started = time.perf_counter()
    context = PromptContext(
        ground_truth=ground_truth,
        spacing=spacing,
        rng=derive_rng(seed, *identity, prompter_key, "initial"),
        segment_slice=segment_slice,
    )
    prompt = prompter.initial(context)
    prompt_seconds_total = time.perf_counter() - started
    model_in_prompter = model.model_seconds()
    prediction = _frozen(model.predict(prompt))
    effort = prompt.effort
    results.append(
        StepResult(
            step=0,
            prompt=prompt,
            prediction=prediction,
            metrics=metric_fn(prediction.mask, ground_truth, spacing) if metric_fn else {},
            effort=effort,
            cumulative_effort=effort,
            model_seconds=model.model_seconds(),
            prompter_seconds=prompt_seconds_total - _finite(model_in_prompter),
            wall_seconds=time.perf_counter() - wall,
        )
    )
    if refiner is None:
        return results

    accumulated = prompt
    history = [prompt]
    converged = bool(np.array_equal(prediction.mask, ground_truth))
    for step in range(1, steps + 1):
        wall = time.perf_counter()
        model.reset_timer()
        new: Prompt | None = None
        refiner_seconds = 0.0
        if not converged:
            started = time.perf_counter()
            new = refiner.refine(
                RefineContext(
                    ground_truth=ground_truth,
                    prediction=prediction.mask,
                    spacing=spacing,
                    rng=derive_rng(seed, *identity, prompter_key, refiner_key, step),
                    step=step,
                    model_dimension=model.dimension,
                    history=history,
                )
            )
            refiner_seconds = time.perf_counter() - started
        if new is None or new.is_empty:
            converged = True
            results.append(_repeat(results[-1], step, wall))
            continue
        history.append(new)
        accumulated = accumulated.merged_with(new) if keep_previous_prompts else new
        step_prompt = accumulated if keep_previous_prompts else new
        prediction = _frozen(model.predict(step_prompt, previous=prediction,
                                           update_slices=new.slices()))
        effort = new.effort
        results.append(
            StepResult(
                step=step,
                prompt=new,
                prediction=prediction,
                metrics=metric_fn(prediction.mask, ground_truth, spacing) if metric_fn else {},
                effort=effort,
                cumulative_effort=results[-1].cumulative_effort + effort,
                model_seconds=model.model_seconds(),
                prompter_seconds=refiner_seconds,
                wall_seconds=time.perf_counter() - wall,
            )
        )
        converged = bool(np.array_equal(prediction.mask, ground_truth))
    return results


def evaluate_steps(
    results: list[StepResult],
    ground_truth: np.ndarray,
    spacing: tuple[float, float, float],
    metric_fn: Callable[..., dict[str, float]] = step_metrics,
) -> list[float]:
    """Fill the metrics of an episode run with ``metric_fn=None``; returns the seconds spent per
    step. Steps that repeat a converged prediction share its metrics (0 s)."""
    seconds: list[float] = []
    previous: StepResult | None = None
    for result in results:
        started = time.perf_counter()
        if previous is not None and result.prediction is previous.prediction:
            result.metrics = dict(previous.metrics)
        else:
            result.metrics = metric_fn(result.prediction.mask, ground_truth, spacing)
        seconds.append(time.perf_counter() - started)
        previous = result
    return seconds


def _frozen(prediction: Prediction) -> Prediction:
    """Make the mask read-only: it is evaluated after the episode, so a model editing its
    ``previous`` mask in place would silently change earlier steps' results."""
    prediction.mask.setflags(write=False)
    return prediction


def _finite(value: float) -> float:
    return 0.0 if value != value else value  # NaN -> 0


def _repeat(last: StepResult, step: int, wall: float) -> StepResult:
    return StepResult(
        step=step,
        prompt=Prompt(),
        prediction=last.prediction,
        metrics=dict(last.metrics),
        effort=0,
        cumulative_effort=last.cumulative_effort,
        model_seconds=0.0,
        prompter_seconds=0.0,
        wall_seconds=time.perf_counter() - wall,
        converged=True,
    )
