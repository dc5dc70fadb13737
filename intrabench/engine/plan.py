"""Work units and planning: what a run has to compute, before anything runs.

A :class:`WorkUnit` is one (dataset, case, model, prompter, refiner, seed) with its settings
(and, in a robustness run, one click strategy: the baseline or a clicking group);
its :attr:`~WorkUnit.key` names its file in the run directory, so everything that changes the
unit's rows is part of it. :func:`make_plan` expands a run config into units, model-major in
config order, and lists the incompatible combinations it skips.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from intrabench import registry
from intrabench.config import ComponentSpec, DatasetSpec, RunConfig
from intrabench.errors import DataError, UserError, quoted
from intrabench.evaluation.metric_registry import DEFAULT_PROTOCOL
from intrabench.evaluation.metrics import DEFAULT_NSD_TOLERANCE_MM
from intrabench.interfaces import Dataset, incompatibility
from intrabench.io.run_paths import path_component_problem
from intrabench.wording import counted, listed


@dataclass(frozen=True)
class WorkUnit:
    """One unit of work: every target of one case, for one model, prompter, refiner and seed.

    Attributes:
        dataset: The dataset's spec.
        case_id: The case.
        model: The model's spec.
        prompter: The initial prompter's spec.
        refiner: The refiner's spec, or None for no refinement.
        seed: The run seed the episodes' rngs derive from.
        steps: The number of refinement steps.
        keep_previous_prompts: Whether each step's interactions are merged with the earlier ones.
        protocol: The evaluation protocol's name.
        nsd_tolerance_mm: The NSD tolerance in mm.
        surface_metrics_at: The steps with surface metrics: ``all``, ``final``,
            ``initial-and-final`` or step numbers.
        click_group: A robustness run's click strategy (``baseline``, ``G1``, ...), or None.
        clickability: A robustness run's clickability model, or None.
        n_groups: The number of clicking groups of a robustness run.
    """

    dataset: DatasetSpec
    case_id: str
    model: ComponentSpec
    prompter: ComponentSpec
    refiner: ComponentSpec | None
    seed: int
    steps: int
    keep_previous_prompts: bool
    protocol: str = DEFAULT_PROTOCOL
    nsd_tolerance_mm: float = DEFAULT_NSD_TOLERANCE_MM
    #: the steps with surface metrics: "all", "final", "initial-and-final" or step numbers
    surface_metrics_at: str | tuple[int, ...] = "all"
    #: a robustness run's click strategy ("baseline", "G1", ...) and its clickability model
    click_group: str | None = None
    clickability: ComponentSpec | None = None
    n_groups: int = 10

    @property
    def refiner_key(self) -> str:
        """The refiner's key, ``none`` without one."""
        return self.refiner.key if self.refiner is not None else "none"

    @property
    def prompter_key(self) -> str:
        """The prompter column of the unit's rows: its key, with the click strategy of a
        robustness run in brackets (``points-per-volume [G3]``): each strategy is its own
        configuration in every table, and its own random stream."""
        if self.click_group is None:
            return self.prompter.key
        return f"{self.prompter.key} [{self.click_group}]"

    @property
    def key(self) -> str:
        """The unit's identity in the run directory: everything that changes its rows. The
        metric settings enter only when they differ from the defaults, so the keys of runs
        made before they were part of it stay the same."""
        parts: list = [
            self.dataset.key,
            self.case_id,
            self.model.key,
            self.prompter.key,
            self.refiner_key,
            self.seed,
            self.steps if self.refiner else 0,
            self.keep_previous_prompts if self.refiner else None,
        ]
        metric_settings = {}
        if self.protocol != DEFAULT_PROTOCOL:
            metric_settings["protocol"] = self.protocol
        if self.nsd_tolerance_mm != DEFAULT_NSD_TOLERANCE_MM:
            metric_settings["nsd_tolerance_mm"] = float(self.nsd_tolerance_mm)
        if self.surface_metrics_at != "all":
            metric_settings["surface_metrics_at"] = self.surface_metrics_at
        if metric_settings:
            parts.append(metric_settings)
        if self.click_group is not None:
            parts.append(
                {
                    "click_group": self.click_group,
                    "n_groups": self.n_groups,
                    "clickability": self.clickability.key if self.clickability else "",
                }
            )
        identity = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(identity.encode()).hexdigest()[:24]

    @property
    def group(self) -> tuple[str, str, str]:
        """``(dataset key, case id, model key)``: units of one group share a case read and a
        model.
        """
        return (self.dataset.key, self.case_id, self.model.key)


@dataclass
class Plan:
    """What a run will do.

    Attributes:
        units: The work units, in the order they are run.
        skipped: One record per skipped combination and dataset (model, prompter, refiner, why).
    """

    units: list[WorkUnit]
    skipped: list[dict[str, str]] = field(default_factory=list)

    def skipped_combinations(self) -> dict[tuple[str, str], None]:
        """The skipped (model + prompter + refiner, reason) pairs, each once, in order (the
        ``skipped`` records repeat them once per dataset).

        Returns:
            An insertion-ordered dict (used as an ordered set) whose keys are ("model +
            prompter + refiner", reason) pairs; the values are None.
        """
        return {
            (
                " + ".join(p for p in (item["model"], item["prompter"], item["refiner"]) if p),
                item["reason"],
            ): None
            for item in self.skipped
        }

    def skipped_line(self) -> str:
        """How many combinations are skipped, said the same way by ``--dry-run`` and the run,
        those the config left out on purpose (a model's ``datasets:``, ``prompters:``,
        ``refiners:``) apart from the incompatible ones: ``2 combinations left out by the
        config; 6 incompatible combinations skipped (12 with each dataset counted)``.

        Returns:
            That line, its parts joined by "; "; "" when nothing is skipped.
        """
        parts = []
        for left_out, noun, what in (
            (True, "combination", "left out by the config"),
            (False, "incompatible combination", "skipped"),
        ):
            records = [item for item in self.skipped if bool(item.get("left_out")) == left_out]
            combinations = len(Plan(units=[], skipped=records).skipped_combinations())
            if not records:
                continue
            extra = (
                f" ({len(records)} with each dataset counted)"
                if len(records) != combinations
                else ""
            )
            parts.append(f"{counted(combinations, noun)} {what}{extra}")
        return "; ".join(parts)


def select_cases(dataset: Dataset, spec: DatasetSpec) -> list[str]:
    """The case ids of ``dataset`` a run of ``spec`` reads (its ``cases:``, ``max_cases:``),
    in the dataset's order; UserError naming the unknown ones.

    Args:
        dataset: The built dataset.
        spec: The config's entry for it: ``cases`` (ids to keep, or None for all) and
            ``max_cases`` (the first N kept, or None for all).

    Returns:
        The selected case ids, in the dataset's ``case_ids()`` order.

    Raises:
        DataError: A case id of the dataset cannot name a file (it is not one plain name).
        UserError: ``cases:`` names a case the dataset does not have.
    """
    available = dataset.case_ids()
    for case_id in available:  # a case id names prediction files: one plain name
        problem = path_component_problem(case_id)
        if problem:
            raise DataError(
                f"dataset '{spec.key}' has a case named {quoted(case_id, 60)}, "
                f"which cannot name its files ({problem}); rename that case"
            )
    if spec.cases is not None:
        unknown = [c for c in spec.cases if c not in available]
        if unknown:
            raise UserError(
                f"dataset '{spec.key}': unknown "
                f"{'case' if len(unknown) == 1 else 'cases'} {listed(unknown)}; "
                f"available: {listed(available)}"
            )
        available = [c for c in available if c in spec.cases]
    if spec.max_cases is not None:
        available = available[: spec.max_cases]
    return available


def _click_strategies(
    config: RunConfig,
    dataset: str,
    model: str,
    prompter: ComponentSpec,
    refiner: ComponentSpec | None,
    skipped: list[dict[str, str]],
) -> list[str | None]:
    """The click strategies of one combination: [None] outside robustness runs; in one, every
    strategy when the prompter or the refiner takes a click policy, else none (skipped)."""
    if config.robustness is None:
        return [None]
    clicks = registry.prompters.get(prompter.name).takes_click_policy or (
        refiner is not None and registry.refiners.get(refiner.name).takes_click_policy
    )
    if clicks:
        return list(config.robustness.strategies)
    skipped.append(
        {
            "dataset": dataset,
            "model": model,
            "prompter": prompter.key,
            "refiner": refiner.key if refiner else "",
            "reason": "robustness run: neither the prompter nor the refiner clicks "
            "from a clickability model",
        }
    )
    return []


def make_plan(config: RunConfig, datasets: dict[str, Dataset]) -> Plan:
    """The run's work units: every dataset x case x model x prompter x refiner x seed that fit.

    Args:
        config: The validated run configuration.
        datasets: The run's datasets by key.

    Returns:
        The plan; a model that does not take a prompter's or refiner's kinds is skipped, with the
        reason recorded in ``skipped``.
    """
    plan = Plan(units=[])
    surface_steps = (
        config.surface_metrics_at
        if isinstance(config.surface_metrics_at, str)
        else tuple(sorted(set(config.surface_metrics_at)))
    )
    for dataset_spec in config.datasets:
        case_ids = select_cases(datasets[dataset_spec.key], dataset_spec)
        for model_spec in config.models:
            model_cls = registry.models.get(model_spec.name)
            if model_spec.datasets is not None and dataset_spec.key not in model_spec.datasets:
                plan.skipped.append(
                    {
                        "dataset": dataset_spec.key,
                        "model": model_spec.key,
                        "prompter": "",
                        "refiner": "",
                        "left_out": "yes",
                        "reason": f"dataset '{dataset_spec.key}' left out: the "
                        "config runs the model on "
                        f"{', '.join(model_spec.datasets)} only",
                    }
                )
                continue
            for prompter_spec in config.prompters:
                if (
                    model_spec.prompters is not None
                    and prompter_spec.key not in model_spec.prompters
                ):
                    plan.skipped.append(
                        {
                            "dataset": dataset_spec.key,
                            "model": model_spec.key,
                            "prompter": prompter_spec.key,
                            "refiner": "",
                            "left_out": "yes",
                            "reason": "left out: the config runs the model with "
                            f"{', '.join(model_spec.prompters)} only",
                        }
                    )
                    continue
                prompter_cls = registry.prompters.get(prompter_spec.name)
                reason = incompatibility(model_cls, prompter_cls, params=model_spec.build_params)
                if reason:
                    plan.skipped.append(
                        {
                            "dataset": dataset_spec.key,
                            "model": model_spec.key,
                            "prompter": prompter_spec.key,
                            "refiner": "",
                            "reason": reason,
                        }
                    )
                    continue
                refiner_specs: list[ComponentSpec | None] = []
                for refiner_spec in config.refiners:
                    if (
                        model_spec.refiners is not None
                        and refiner_spec.key not in model_spec.refiners
                    ):
                        plan.skipped.append(
                            {
                                "dataset": dataset_spec.key,
                                "model": model_spec.key,
                                "prompter": prompter_spec.key,
                                "refiner": refiner_spec.key,
                                "left_out": "yes",
                                "reason": "left out: the config refines the model with "
                                f"{', '.join(model_spec.refiners) or 'no refiner'} only",
                            }
                        )
                        continue
                    refiner_reason = incompatibility(
                        model_cls,
                        None,
                        registry.refiners.get(refiner_spec.name),
                        params=model_spec.build_params,
                    )
                    if refiner_reason:
                        plan.skipped.append(
                            {
                                "dataset": dataset_spec.key,
                                "model": model_spec.key,
                                "prompter": prompter_spec.key,
                                "refiner": refiner_spec.key,
                                "reason": refiner_reason,
                            }
                        )
                    else:
                        refiner_specs.append(refiner_spec)
                for refiner_spec in refiner_specs or [None]:
                    strategies = _click_strategies(
                        config,
                        dataset_spec.key,
                        model_spec.key,
                        prompter_spec,
                        refiner_spec,
                        plan.skipped,
                    )
                    for click_group in strategies:
                        for seed in config.seeds:
                            for case_id in case_ids:
                                plan.units.append(
                                    WorkUnit(
                                        dataset=dataset_spec,
                                        case_id=case_id,
                                        model=model_spec,
                                        prompter=prompter_spec,
                                        refiner=refiner_spec,
                                        seed=seed,
                                        steps=config.refinement_steps,
                                        keep_previous_prompts=(
                                            config.keep_previous_prompts
                                            if getattr(refiner_spec, "keep_previous_prompts", None)
                                            is None
                                            else refiner_spec.keep_previous_prompts
                                        ),
                                        protocol=config.protocol,
                                        nsd_tolerance_mm=config.nsd_tolerance_mm,
                                        surface_metrics_at=surface_steps,
                                        click_group=click_group,
                                        clickability=(
                                            config.robustness.clickability
                                            if config.robustness
                                            else None
                                        ),
                                        n_groups=(
                                            config.robustness.groups if config.robustness else 10
                                        ),
                                    )
                                )
    # model-major in config order: one model is loaded at a time, and all work on a case for
    # that model is contiguous (its image encodings are reused); stable inside a group
    model_order = {spec.key: i for i, spec in enumerate(config.models)}
    dataset_order = {spec.key: i for i, spec in enumerate(config.datasets)}
    plan.units.sort(
        key=lambda u: (model_order[u.model.key], dataset_order[u.dataset.key], u.case_id)
    )
    return plan
