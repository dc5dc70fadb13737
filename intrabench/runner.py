"""Plan a run into work units and execute them, resuming from what is already on disk.

A work unit is (dataset, case, model, prompter, refiner, seed): every target of one case for
one model and prompting scheme. Units are executed grouped by (dataset, case, model), so each
case is read once and each model sees each image once (embedding caches stay hot).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

import yaml

from intrabench import registry
from intrabench.config import ComponentSpec, DatasetSpec, RunConfig
from intrabench.episode import StepResult, run_episode
from intrabench.errors import DataError, UserError
from intrabench.metrics import step_metrics
from intrabench.protocols import Dataset, Model, incompatibility
from intrabench.results import ResultsStore, ensure_writable, write_frame, write_run_metadata
from intrabench.types import Case, Target

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkUnit:
    dataset: DatasetSpec
    case_id: str
    model: ComponentSpec
    prompter: ComponentSpec
    refiner: ComponentSpec | None
    seed: int
    steps: int
    keep_previous_prompts: bool

    @property
    def refiner_key(self) -> str:
        return self.refiner.key if self.refiner is not None else "none"

    @property
    def key(self) -> str:
        identity = json.dumps(
            [self.dataset.key, self.case_id, self.model.key, self.prompter.key,
             self.refiner_key, self.seed, self.steps if self.refiner else 0,
             self.keep_previous_prompts if self.refiner else None],
            sort_keys=True,
        )
        return hashlib.sha256(identity.encode()).hexdigest()[:24]

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.dataset.key, self.case_id, self.model.key)


@dataclass
class Plan:
    units: list[WorkUnit]
    skipped: list[dict[str, str]] = field(default_factory=list)


def _select_cases(dataset: Dataset, spec: DatasetSpec) -> list[str]:
    available = dataset.case_ids()
    if spec.cases is not None:
        unknown = [c for c in spec.cases if c not in available]
        if unknown:
            raise UserError(
                f"dataset '{spec.key}': unknown cases {unknown}; available: {available[:10]}"
                + (" ..." if len(available) > 10 else "")
            )
        available = [c for c in available if c in spec.cases]
    if spec.max_cases is not None:
        available = available[: spec.max_cases]
    return available


def make_plan(config: RunConfig, datasets: dict[str, Dataset]) -> Plan:
    plan = Plan(units=[])
    for dataset_spec in config.datasets:
        case_ids = _select_cases(datasets[dataset_spec.key], dataset_spec)
        for model_spec in config.models:
            model_cls = registry.models.get(model_spec.name)
            for prompter_spec in config.prompters:
                prompter_cls = registry.prompters.get(prompter_spec.name)
                reason = incompatibility(model_cls, prompter_cls)
                if reason:
                    plan.skipped.append({"dataset": dataset_spec.key, "model": model_spec.key,
                                         "prompter": prompter_spec.key, "refiner": "",
                                         "reason": reason})
                    continue
                refiner_specs: list[ComponentSpec | None] = []
                for refiner_spec in config.refiners:
                    refiner_reason = incompatibility(
                        model_cls, None, registry.refiners.get(refiner_spec.name))
                    if refiner_reason:
                        plan.skipped.append({"dataset": dataset_spec.key, "model": model_spec.key,
                                             "prompter": prompter_spec.key,
                                             "refiner": refiner_spec.key, "reason": refiner_reason})
                    else:
                        refiner_specs.append(refiner_spec)
                for refiner_spec in refiner_specs or [None]:
                    for seed in config.seeds:
                        for case_id in case_ids:
                            plan.units.append(WorkUnit(
                                dataset=dataset_spec, case_id=case_id, model=model_spec,
                                prompter=prompter_spec, refiner=refiner_spec, seed=seed,
                                steps=config.refinement_steps,
                                keep_previous_prompts=config.keep_previous_prompts))
    # model-major in config order: one model is loaded at a time, and all work on a case for
    # that model is contiguous (its image encodings are reused); stable inside a group
    model_order = {spec.key: i for i, spec in enumerate(config.models)}
    dataset_order = {spec.key: i for i, spec in enumerate(config.datasets)}
    plan.units.sort(key=lambda u: (model_order[u.model.key], dataset_order[u.dataset.key],
                                   u.case_id))
    return plan


def rows_for_episode(run_name: str, unit: WorkUnit, case: Case, target: Target,
                     results: list[StepResult], initial_label: str) -> list[dict[str, Any]]:
    rows = []
    # the target's size is already in the metrics (TP + FN): no second full-volume pass
    ground_truth_voxels = int(results[0].metrics["true_positives"]
                              + results[0].metrics["false_negatives"])
    refinement_label = next((r.prompt.effort_label for r in results[1:] if r.prompt.effort_label), "")
    label = initial_label if unit.refiner is None else f"{initial_label}/{refinement_label or '-'}"
    for result in results:
        row: dict[str, Any] = {
            "run": run_name,
            "dataset": unit.dataset.key,
            "case": case.case_id,
            "target": target.target_id,
            "target_class": target.class_name,
            "target_kind": target.kind,
            "model": unit.model.key,
            "prompter": unit.prompter.key,
            "refiner": unit.refiner_key,
            "seed": unit.seed,
            "step": result.step,
            "keep_previous_prompts": unit.keep_previous_prompts if unit.refiner else None,
            **result.metrics,
            "effort": result.effort,
            "cumulative_effort": result.cumulative_effort,
            "initial_effort": results[0].effort,
            "effort_label": label,
            "model_seconds": result.model_seconds,
            "prompter_seconds": result.prompter_seconds,
            "wall_seconds": result.wall_seconds,
            "converged": result.converged,
            "target_voxels": ground_truth_voxels,
            "predicted_voxels": int(result.prediction.mask.sum()),
            **{f"prompt_{k}": v for k, v in result.prompt.summary().items()},
        }
        rows.append(row)
    return rows


class Runner:
    """Executes a plan in this process, one unit group at a time."""

    def __init__(self, config: RunConfig, run_dir: Path,
                 progress: Callable[[Iterable, int], Iterable] | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        self.store = ResultsStore(self.run_dir)
        self.progress = progress
        self._models: dict[str, Model] = {}
        self._unusable_models: dict[str, str] = {}
        self._last_case: tuple[tuple[str, str], Case] | None = None
        config.import_modules()
        self.datasets: dict[str, Dataset] = {
            spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
        }

    def plan(self) -> Plan:
        return make_plan(self.config, self.datasets)

    def _model(self, spec: ComponentSpec) -> Model:
        """The model for ``spec``; the previously used model is released first (one in memory)."""
        if spec.key not in self._models:
            self._models.clear()
            self._models[spec.key] = registry.models.create(spec.name, spec.params)
        return self._models[spec.key]

    def execute_group(self, units: list[WorkUnit]) -> list[str]:
        """Run the units of one (dataset, case, model) group; returns failed-case messages."""
        first = units[0]
        identity = (first.dataset.key, first.case_id)
        if self._last_case is not None and self._last_case[0] == identity:
            case = self._last_case[1]  # groups are sorted by case: the next model reuses it
        else:
            try:
                case = self.datasets[first.dataset.key].load(first.case_id)
            except DataError as error:
                return [f"{first.dataset.key}/{first.case_id}: skipped: {error}"]
            self._last_case = (identity, case)
        if not case.targets:
            return [f"{first.dataset.key}/{first.case_id}: skipped: the label has no targets"]
        if first.model.key in self._unusable_models:
            return []  # reported once, when it first failed
        try:
            model = self._model(first.model)
        except UserError as error:  # e.g. a missing checkpoint: the other models still run
            self._unusable_models[first.model.key] = str(error)
            return [f"model '{first.model.key}' skipped: {error}"]
        model.set_case(case.image)
        for unit in units:
            if self.store.is_done(unit.key):
                continue
            prompter = registry.prompters.create(unit.prompter.name, unit.prompter.params)
            refiner = (registry.refiners.create(unit.refiner.name, unit.refiner.params)
                       if unit.refiner else None)
            rows: list[dict[str, Any]] = []
            for target in case.targets:
                results = run_episode(
                    case, target, model, prompter, unit.prompter.key,
                    refiner=refiner, refiner_key=unit.refiner_key,
                    steps=unit.steps if refiner else 0,
                    keep_previous_prompts=unit.keep_previous_prompts, seed=unit.seed,
                    metric_fn=functools.partial(
                        step_metrics, nsd_tolerance_mm=self.config.nsd_tolerance_mm),
                )
                rows.extend(rows_for_episode(self.config.name, unit, case, target, results,
                                             results[0].prompt.effort_label))
                if self.config.save_predictions:
                    self._save_prediction(unit, case, target, results[-1])
            self.store.write_unit(unit.key, rows)
        return []

    def _save_prediction(self, unit: WorkUnit, case: Case, target: Target,
                         result: StepResult) -> None:
        from intrabench.volume import write_like

        safe = [_safe(p) for p in (unit.dataset.key, unit.model.key, unit.prompter.key,
                                   unit.refiner_key, f"seed{unit.seed}")]
        path = self.run_dir.joinpath("predictions", *safe,
                                     f"{_safe(case.case_id)}__{_safe(target.target_id)}.nii.gz")
        write_like(result.prediction.mask.astype("uint8"), case.image, path)

    def prepare(self, executor: str = "local") -> tuple[Plan, list[list[WorkUnit]]]:
        """Plan the run, write its metadata, and group the unfinished units by (dataset, case,
        model). Executors call this, run the groups, then :meth:`finish`."""
        ensure_writable(self.run_dir)
        plan = self.plan()
        write_run_metadata(
            self.run_dir,
            yaml.safe_dump(self.config.model_dump(mode="json"), sort_keys=False),
            {"units": len(plan.units), "executor": executor},
        )
        import pandas as pd

        write_frame(self.run_dir / "skipped.csv", pd.DataFrame(
            plan.skipped, columns=["dataset", "model", "prompter", "refiner", "reason"]))
        pending = [u for u in plan.units if not self.store.is_done(u.key)]
        return plan, [list(g) for _, g in groupby(pending, key=lambda u: u.group)]

    def finish(self, plan: Plan) -> None:
        self.store.consolidate([u.key for u in plan.units])

    def run(self) -> tuple[Plan, list[str]]:
        plan, groups = self.prepare()
        pending = [u for group in groups for u in group]
        problems: list[str] = []
        bar = self.progress(None, len(pending)) if self.progress else None
        started = time.perf_counter()
        for group in groups:
            if bar is not None:
                bar.set_description(f"{group[0].case_id} | {group[0].model.key}")
            problems.extend(self.execute_group(group))
            if bar is not None:
                bar.update(len(group))
        if bar is not None:
            bar.close()
        log.info("executed %d units in %.1f s", len(pending), time.perf_counter() - started)
        self.finish(plan)
        return plan, problems


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in text)[:120]
