"""From finished episodes to result rows, prediction files and unit files.

This is the work that does not feed the next model call, so the runner does it beside the
model loop (in a worker process, see :mod:`intrabench.execution.lanes`). To keep what crosses
the process boundary small, an episode is handed over *cropped*: every prediction and the
ground truth are cut to one box (z, y, x slices of the canonical volume) that holds all of
their voxels. Metrics are translation-invariant and look only at the union bounding box (see
:mod:`intrabench.evaluation.metrics`), so they are bit-identical to metrics on the full
volume, and a prediction file is rebuilt exactly (zeros outside the box) on the case's
original grid.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from intrabench import training_data
from intrabench.engine.episode import StepResult, evaluate_steps
from intrabench.evaluation.metric_registry import (
    EvaluationProtocol,
    Metric,
    registered_metrics,
    registered_protocols,
)
from intrabench.io.run_paths import (
    inside_run,
    prediction_file_name,
    prediction_folder,
    step_prediction_file_name,
)
from intrabench.io.volume import ImageGeometry, write_on_grid
from intrabench.masks import bounding_box, union_of_boxes
from intrabench.types import INTERACTION_COST, Prediction, Prompt, Target

if TYPE_CHECKING:
    from intrabench.engine.plan import WorkUnit
    from intrabench.engine.resources import CaseResources

Box = tuple[slice, slice, slice]


@dataclass(eq=False)
class CroppedEpisode:
    """One episode, cut to ``box``: ``ground_truth`` and every step's ``prediction.mask`` are
    boolean (z, y, x) crops of that box; feedback is dropped. Steps that repeat a prediction
    share the same :class:`Prediction` object (pickling keeps that)."""

    target: Target
    box: Box
    ground_truth: np.ndarray
    results: list[StepResult]

    def without_masks(self) -> CroppedEpisode:
        """This episode with empty crops (shape (0, 0, 0)) for the ground truth and every
        prediction: what finishing needs once the metrics are filled and no prediction is
        saved (the rows read prompts and metrics only), so the crops do not travel twice.

        Returns:
            A copy of the episode with those empty crops; steps that shared a prediction still
            share one (emptied) :class:`Prediction`.
        """
        empty = np.zeros((0, 0, 0), dtype=bool)
        emptied: dict[int, Prediction] = {}
        for result in self.results:
            emptied.setdefault(id(result.prediction), Prediction(mask=empty))
        return replace(
            self,
            ground_truth=empty,
            results=[replace(r, prediction=emptied[id(r.prediction)]) for r in self.results],
        )


@dataclass(eq=False)
class UnitJob:
    """Everything needed to finish one work unit away from the case and the model."""

    run_name: str
    run_dir: Path
    unit: WorkUnit
    case_id: str
    spacing: tuple[float, float, float]
    shape: tuple[int, int, int]
    geometry: ImageGeometry
    save_predictions: bool | str
    episodes: list[CroppedEpisode]
    #: the case's target attributes by target id (``attr_<name>`` columns), or None
    attributes: dict[str, dict[str, Any]] | None = None
    #: keep the rows in the finishing process for its consolidation (see ResultsStore.write_unit)
    keep_rows: bool = False
    #: the (case, model) group's set-up time and peak memory so far (engine.resources)
    resources: CaseResources | None = None
    #: seconds each step's metrics took, by episode, when the episodes' metrics were filled
    #: already (:func:`evaluate_episode_isolated`); None: :func:`finish_unit` computes them
    metric_seconds: list[list[float]] | None = None
    #: the metric declarations registered where the job was made (they travel with it, so a
    #: worker process computes the metrics its parent registered)
    metrics: tuple[Metric, ...] = field(default_factory=registered_metrics)
    #: the protocols registered where the job was made, by name (as ``metrics``: a protocol
    #: a plugin registered in the parent is known in a worker process too)
    protocols: dict[str, EvaluationProtocol] = field(default_factory=registered_protocols)


@dataclass(eq=False)
class EpisodeEvaluation:
    """One finished episode's metrics to compute, as soon as the episode ends (a unit's last
    episode does not wait for the others' metrics at the end of a run)."""

    unit: WorkUnit
    spacing: tuple[float, float, float]
    episode: CroppedEpisode
    #: as :attr:`UnitJob.metrics`
    metrics: tuple[Metric, ...] = field(default_factory=registered_metrics)
    #: as :attr:`UnitJob.protocols`
    protocols: dict[str, EvaluationProtocol] = field(default_factory=registered_protocols)


def evaluate_episode_isolated(job: EpisodeEvaluation) -> list[tuple[dict[str, float], float]] | str:
    """Every step's metrics of ``job.episode`` and the seconds they took, as
    :func:`finish_unit` computes them; or the one-line cause of an error (the unit fails).

    Args:
        job: The finished episode (cropped), its unit, the case's spacing (mm, (z, y, x)) and
            the metrics and protocols registered where it was made.

    Returns:
        One (metric name to value, seconds) pair per step, in step order; or, when computing
        them raised, the error's one-line cause (:func:`~intrabench.errors.one_line_cause`).
    """
    from intrabench.engine.failures import one_line_cause

    try:
        results = job.episode.results
        seconds = evaluate_steps(
            results,
            job.episode.ground_truth,
            job.spacing,
            unit_metric_function(job.unit, job.metrics, job.protocols),
            job.unit.surface_metrics_at,
        )
        return [(result.metrics, spent) for result, spent in zip(results, seconds)]
    except Exception as error:  # noqa: BLE001 - reported as this unit's failure
        return one_line_cause(error)


def crop_episode(
    ground_truth: np.ndarray, target: Target, results: list[StepResult]
) -> CroppedEpisode:
    """Cut an episode to the bounding box of its target (``ground_truth``, boolean (z, y, x))
    and all of its predictions.

    Costs copies of the crops: the boxes of the engine's masks (frozen) are remembered
    from their first measurement (:func:`~intrabench.masks.bounding_box`); any
    other mask costs one bounding-box pass (reading only the empty margins along z).

    Args:
        ground_truth: The target's mask, boolean (z, y, x), on the case's canonical grid.
        target: The target the episode segmented.
        results: The episode's step results, predictions on the same grid.

    Returns:
        The cropped episode: the box (three half-open slices, (z, y, x); empty slices when no
        mask has a voxel), the ground truth's crop and the results with their predictions'
        crops (C-contiguous copies; steps that shared a prediction share its crop).
    """
    distinct: dict[int, Prediction] = {}
    for result in results:
        distinct.setdefault(id(result.prediction), result.prediction)
    box = union_of_boxes(
        bounding_box(m) for m in (ground_truth, *(p.mask for p in distinct.values()))
    )
    if box is None:  # nothing anywhere: empty crops
        box = (slice(0, 0),) * 3
    cropped = {
        key: Prediction(mask=np.ascontiguousarray(p.mask[box])) for key, p in distinct.items()
    }
    return CroppedEpisode(
        target=target,
        box=box,  # type: ignore[arg-type]
        ground_truth=np.ascontiguousarray(ground_truth[box]),
        results=[replace(r, prediction=cropped[id(r.prediction)]) for r in results],
    )


def rows_for_episode(
    run_name: str, unit: WorkUnit, case_id: str, target: Target, results: list[StepResult]
) -> list[dict[str, Any]]:
    """One result row per step; ``results`` must have their metrics filled.

    Args:
        run_name: The run's name (the ``run`` column).
        unit: The work unit the episode belongs to (dataset, model, prompter, refiner, seed and
            protocol columns).
        case_id: The case id.
        target: The episode's target.
        results: The episode's step results, in step order, metrics filled (they must include
            ``true_positives``, ``false_positives`` and ``false_negatives``, voxel counts).

    Returns:
        One row (column name to value) per step: the key columns, the metrics, effort, the
        seconds (model, prompter, wall, latency), interaction counts, slices scrolled, target
        and predicted voxel counts, the prompt's summary and its JSON.
    """
    rows = []
    # the target's size is already in the metrics (TP + FN): no second full-volume pass
    ground_truth_voxels = int(
        results[0].metrics["true_positives"] + results[0].metrics["false_negatives"]
    )
    initial_label = results[0].prompt.effort_label
    refinement_label = next(
        (r.prompt.effort_label for r in results[1:] if r.prompt.effort_label), ""
    )
    label = initial_label if unit.refiner is None else f"{initial_label}/{refinement_label or '-'}"
    previous_slices: list[int] = []
    # was this dataset in the model's training data (intrabench/training_data.py)
    in_training_data = training_data.status(
        unit.model.name, unit.dataset.name, dict(unit.model.params)
    )
    for result in results:
        scrolled, previous_slices = slices_scrolled(result.prompt, previous_slices)
        row: dict[str, Any] = {
            "run": run_name,
            "dataset": unit.dataset.key,
            "case": case_id,
            "target": target.target_id,
            "target_class": target.class_name,
            "target_kind": target.kind,
            "target_label": target.value_in_file,
            "target_number": int(target.label_value),
            "model": unit.model.key,
            "prompter": unit.prompter_key,
            "refiner": unit.refiner_key,
            "seed": unit.seed,
            "step": result.step,
            "keep_previous_prompts": unit.keep_previous_prompts if unit.refiner else None,
            "protocol": unit.protocol,
            "in_training_data": in_training_data,
            **_click_columns(unit, result.prompt),
            **result.metrics,
            "effort": result.effort,
            "cumulative_effort": result.cumulative_effort,
            "initial_effort": results[0].effort,
            "effort_label": label,
            "model_seconds": result.model_seconds,
            "prompter_seconds": result.prompter_seconds,
            "wall_seconds": result.wall_seconds,
            "latency_seconds": result.latency_seconds,
            "latency_first_call": result.model_call_index == 0,
            "converged": result.converged,
            **interaction_counts(result.prompt),
            "slices_scrolled": scrolled,
            "target_voxels": ground_truth_voxels,
            "predicted_voxels": int(
                result.metrics["true_positives"] + result.metrics["false_positives"]
            ),
            **{f"prompt_{k}": v for k, v in result.prompt.summary().items()},
            # this step's new prompt (step 0: the initial one), to draw it (Prompt.from_json)
            "prompt_json": result.prompt.to_json(),
        }
        rows.append(row)
    return rows


def interaction_counts(prompt: Prompt) -> dict[str, int]:
    """``interactions_<kind>``: how many interactions of each kind the step's prompt took.

    Args:
        prompt: The step's new prompt.

    Returns:
        ``interactions_<kind>`` to its count, for every kind of ``INTERACTION_COST`` (0 for
        kinds the prompt does not use).
    """
    counts = dict.fromkeys(INTERACTION_COST, 0)
    for interaction in prompt.interactions:
        counts[interaction.kind] += 1
    return {f"interactions_{kind}": count for kind, count in counts.items()}


def slices_scrolled(prompt: Prompt, previous: list[int]) -> tuple[int, list[int]]:
    """(axial slices the user scrolls through for this step's prompt, the slices it touched).

    The user visits the slices of the prompt's elements (:meth:`Prompt.visited_slices`: its
    clicks, scribbles, lassos, drawn 2D boxes and elements of added kinds) in ascending z:
    from the last slice of the previous step to the nearer end of this step's range, then
    across it (max - min). A 3D box's slices are not visited one by one (its cost is the
    box's); an empty prompt scrolls nothing.

    Args:
        prompt: The step's new prompt.
        previous: The slices (z indices, ascending) the previous step's prompt touched; [] at
            the first step.

    Returns:
        (the number of slices scrolled, the z indices this prompt touches, ascending); an
        empty prompt gives (0, ``previous``), so the next step scrolls from where the user is.
    """
    touched = prompt.visited_slices()
    if not touched:
        return 0, previous
    span = touched[-1] - touched[0]
    if previous:
        last = previous[-1]
        span += min(abs(last - touched[0]), abs(last - touched[-1]))
    return int(span), touched


def _click_columns(unit: WorkUnit, prompt: Prompt) -> dict[str, Any]:
    """A robustness run's columns: the click strategy, the prompter without it, the
    clickability model, and the click regions of the step's prompt whose map came from it
    (``click_map_regions``) and from its fallback (``click_map_fallbacks``: a ``recorded``
    map without clicks there); none outside robustness runs."""
    if unit.click_group is None:
        return {}
    fallbacks = sum(n for source, n in prompt.click_maps if source.startswith("fallback:"))
    return {
        "click_group": unit.click_group,
        "click_prompter": unit.prompter.key,
        "clickability": unit.clickability.key if unit.clickability else "",
        "click_groups": unit.n_groups,
        "click_map_regions": sum(n for _source, n in prompt.click_maps),
        "click_map_fallbacks": fallbacks,
    }


def metrics_for_protocol(protocol: str) -> Callable[..., dict[str, float]]:
    """The per-step metric function of a run's ``protocol`` (its registered
    :class:`~intrabench.evaluation.metric_registry.EvaluationProtocol`).

    Args:
        protocol: A registered protocol's name (the config's ``protocol:``).

    Returns:
        Its metric function, called as :func:`~intrabench.evaluation.metrics.step_metrics`
        (prediction and ground truth masks, spacing in mm, keywords).
    """
    from intrabench.evaluation.metric_registry import protocol as registered_protocol

    return registered_protocol(protocol).metric_function()


def unit_metric_function(
    unit: WorkUnit,
    metrics: tuple[Metric, ...] | None = None,
    protocols: dict[str, EvaluationProtocol] | None = None,
) -> Callable[..., dict[str, float]]:
    """The per-step metric function of ``unit``: its protocol's, at its NSD tolerance, computing
    ``metrics`` (default: those registered in this process).

    Args:
        unit: The work unit: its ``protocol`` and ``nsd_tolerance_mm``.
        metrics: The metric declarations to compute; None: those registered in this process.
        protocols: The registered protocols the job brought, by name; None (or a protocol not
            among them): those registered in this process.

    Returns:
        The function of (prediction, ground truth, spacing, ``with_surface=``), the tolerance
        and metrics bound.
    """
    found = (protocols or {}).get(unit.protocol)
    return functools.partial(
        found.metric_function() if found is not None else metrics_for_protocol(unit.protocol),
        nsd_tolerance_mm=unit.nsd_tolerance_mm,
        metrics=registered_metrics() if metrics is None else metrics,
    )


def prediction_path(run_dir: Path, unit: WorkUnit, case_id: str, target_id: str) -> Path:
    """Where the final prediction of (unit, case, target) is saved.

    Args:
        run_dir: The run folder.
        unit: The work unit (dataset, model, prompter, refiner and seed name the folder).
        case_id: The case id.
        target_id: The target's id.

    Returns:
        The prediction file's path inside ``run_dir`` (not created here).
    """
    folder = prediction_folder(
        run_dir, unit.dataset.key, unit.model.key, unit.prompter_key, unit.refiner_key, unit.seed
    )
    return folder / prediction_file_name(case_id, target_id)


def _save_prediction(job: UnitJob, episode: CroppedEpisode) -> None:
    """The final prediction; with ``save_predictions: all`` also every step that changed it."""
    final = prediction_path(job.run_dir, job.unit, job.case_id, episode.target.target_id)
    saved = [(final, episode.results[-1])]
    if job.save_predictions == "all":
        saved += [
            (
                final.with_name(
                    step_prediction_file_name(job.case_id, episode.target.target_id, result.step)
                ),
                result,
            )
            for result in episode.results
            if not result.converged
        ]
    for path, result in saved:
        inside_run(job.run_dir, path)  # before a file is written: a link out of the run, refused
        full = np.zeros(job.shape, dtype=np.uint8)
        full[episode.box] = result.prediction.mask
        write_on_grid(full, job.geometry, path)


def finish_unit(job: UnitJob) -> int:
    """Metrics, rows, prediction files and the unit file of one unit; returns its row count.

    Adds ``metric_seconds`` (time spent on that step's metrics) to every row, and the group's
    set-up seconds and peak memory (MB) and the target's ``attr_<name>`` columns when the job
    has them. The unit file is written last and atomically: a unit counts as done only when
    everything else is on disk.

    Args:
        job: The unit's cropped episodes and everything needed to finish them (see
            :class:`UnitJob`).

    Returns:
        The number of rows written (one per step of each episode).
    """
    from intrabench.io.results import ResultsStore

    rows: list[dict[str, Any]] = []
    for number, episode in enumerate(job.episodes):
        if job.metric_seconds is not None:  # filled as the episode ended
            seconds = job.metric_seconds[number]
        else:
            seconds = evaluate_steps(
                episode.results,
                episode.ground_truth,
                job.spacing,
                unit_metric_function(job.unit, job.metrics, job.protocols),
                job.unit.surface_metrics_at,
            )
        episode_rows = rows_for_episode(
            job.run_name, job.unit, job.case_id, episode.target, episode.results
        )
        attributes = {
            f"attr_{name}": value
            for name, value in (job.attributes or {}).get(episode.target.target_id, {}).items()
        }
        resources = (
            {}
            if job.resources is None
            else {
                "case_setup_seconds": job.resources.setup_seconds,
                "peak_gpu_mb": job.resources.peak_gpu_mb,
                "peak_host_mb": job.resources.peak_host_mb,
            }
        )
        for row, metric_seconds in zip(episode_rows, seconds):
            row["metric_seconds"] = metric_seconds
            row.update(resources)
            row.update(attributes)
        rows.extend(episode_rows)
        if job.save_predictions:
            _save_prediction(job, episode)
    ResultsStore(job.run_dir).write_unit(job.unit.key, rows, keep=job.keep_rows)
    return len(rows)


def finish_unit_isolated(job: UnitJob) -> int | str:
    """:func:`finish_unit`, returning (not raising) the one-line cause of an error of this
    unit's own, so that one unit whose metrics or files fail does not stop the results
    worker's other units.

    Args:
        job: As :func:`finish_unit`.

    Returns:
        The number of rows written, or the error's one-line cause
        (:func:`~intrabench.errors.one_line_cause`).
    """
    from intrabench.engine.failures import one_line_cause

    try:
        return finish_unit(job)
    except Exception as error:  # noqa: BLE001 - reported as this unit's failure
        return one_line_cause(error)
