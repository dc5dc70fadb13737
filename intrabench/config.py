"""Run configuration: YAML validated into typed objects with precise, one-line errors.

A component (dataset, model, prompter, refiner) is written either as its registered name or
as a mapping with ``name`` plus its parameters::

    models:
      - region-growing-3d
      - {name: random-walker-2d, beta: 130}
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from intrabench import registry
from intrabench.errors import ConfigError, one_line_cause, quoted
from intrabench.evaluation.metric_registry import DEFAULT_PROTOCOL, PROTOCOLS
from intrabench.io.run_paths import component_key, path_component_problem
from intrabench.safe_yaml import (  # noqa: F401 - re-exported: the config's YAML rules
    _FAST_LOADER,
    MAX_CONFIG_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    _check_expansion,
    _expanded_values,
    _UniqueKeyLoader,
    read_yaml,
    read_yaml_file,
)
from intrabench.serving.spec import RunsIn
from intrabench.timing.human import TimeModel
from intrabench.wording import listed

#: a model's parameters that say how it runs, never what it computes: under a model's
#: ``runtime:`` they stay out of its key (the machine's device does not name its units)
RUNTIME_PARAMS = frozenset({"device", "backend", "batch_size", "threads"})


class ComponentSpec(BaseModel):
    """A registered component and its constructor parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the registered name (``intrabench models list``, ``prompters list``, ``datasets list``)
    name: str
    #: constructor parameters (usually written beside ``name`` instead)
    params: dict[str, Any] = Field(default_factory=dict)
    #: the name in result rows and tables (default: name and sorted parameters); one plain
    #: name, as it names a folder of the run: not empty, '.' or '..', no '/', '\\' or control
    #: characters
    label: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_shorthand(cls, value: Any) -> Any:
        """'name' -> {name}; keys that are not fields of the spec become its params."""
        if isinstance(value, str):
            return {"name": value}
        if isinstance(value, dict):
            known = set(cls.model_fields)
            extra = {k: v for k, v in value.items() if k not in known}
            if extra:
                value = {k: v for k, v in value.items() if k in known}
                value["params"] = {**value.get("params", {}), **extra}
        return value

    @property
    def build_params(self) -> dict[str, Any]:
        """What the component's constructor gets (a model's runtime too: :class:`ModelSpec`)."""
        return dict(self.params)

    @property
    def key(self) -> str:
        """Stable identity used in results and seeds: the label, else name + sorted params."""
        return component_key(self.name, self.params, self.label)


class DatasetSpec(ComponentSpec):
    """A dataset plus which of its cases to use."""

    #: only these case ids (an unknown id is an error listing the available ones; each one
    #: plain name, as for ``label``)
    cases: list[str] | None = Field(default=None, min_length=1)
    #: at most this many cases (the first ones in sorted order, after ``cases``)
    max_cases: int | None = Field(default=None, ge=1)

    @field_validator("cases")
    @classmethod
    def _cases_are_names(cls, value: list[str] | None) -> list[str] | None:
        for case_id in value or []:  # a case id names prediction files
            problem = path_component_problem(case_id)
            if problem:
                raise ValueError(f"{quoted(case_id, 60)} cannot be a case id: {problem}")
        return value


class ModelSpec(ComponentSpec):
    """A model, optionally on some of the run's datasets, prompters or refiners only."""

    #: run the model on these datasets only (their keys in this config: the label, else the
    #: name); default: every dataset. The other pairs are listed in ``skipped.csv``
    datasets: list[str] | None = None
    #: run the model with these initial prompters only (their keys in this config); default:
    #: every prompter. The other pairs are listed in ``skipped.csv``
    prompters: list[str] | None = None
    #: refine the model with these refiners only (their keys in this config; ``[]``: no
    #: refinement); default: every refiner. The other pairs are listed in ``skipped.csv``
    refiners: list[str] | None = None
    #: run the model outside this process: in another environment, a container or a server
    #: (docs/adding-a-model.md, "Your model in its own environment"); not part of its key
    runs_in: RunsIn | None = None
    #: how the model runs on this machine (device, backend, batch_size, threads): given to
    #: its constructor with its params, but not part of its key, its units' keys or the
    #: recorded config, so a run folder resumes on another machine (docs/scaling.md)
    runtime: dict[str, Any] = Field(default_factory=dict)

    @field_validator("runtime")
    @classmethod
    def _runtime_parameters_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - RUNTIME_PARAMS)
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: not a runtime parameter ({', '.join(sorted(RUNTIME_PARAMS))}"
                "); a parameter that can change the results goes beside the name"
            )
        return value

    @model_validator(mode="after")
    def _runtime_apart_from_params(self) -> ModelSpec:
        both = sorted(set(self.runtime) & set(self.params))
        if both:
            raise ValueError(f"{', '.join(both)}: given both beside the name and under runtime")
        return self

    @model_serializer(mode="wrap")
    def _without_empty_runtime(self, handler: Any) -> dict[str, Any]:
        """The mapping of the spec; ``runtime`` only when it holds something, so configs
        recorded before it existed compare equal."""
        data = handler(self)
        if isinstance(data, dict) and not data.get("runtime"):
            data.pop("runtime", None)
        return data

    @property
    def build_params(self) -> dict[str, Any]:
        """What the model's constructor gets: its params and its runtime."""
        return {**self.params, **self.runtime}


class RefinerSpec(ComponentSpec):
    """A refiner, optionally with its own ``keep_previous_prompts`` (else the run's)."""

    #: this refiner's correction steps give the model all earlier prompts too (``true``) or
    #: only the new one (``false``); default: the run's ``keep_previous_prompts``. Two specs of
    #: one refiner with different labels compare both in one run
    keep_previous_prompts: bool | None = None

    @property
    def key(self) -> str:
        """As :attr:`ComponentSpec.key`; without a label, an own ``keep_previous_prompts`` is
        part of it (``scribble[keep_previous_prompts=False]``), so the two variants of one
        refiner are two configurations in every table."""
        base = super().key
        if self.label or self.keep_previous_prompts is None:
            return base
        return f"{base}[keep_previous_prompts={self.keep_previous_prompts}]"


class RobustnessSpec(BaseModel):
    """A robustness run (RClicks, docs/realistic-clicks.md): every target once per clicking
    group of ``clickability``'s map (G1 = least likely clicks ... G``groups``), plus the
    baseline strategy's centre clicks, for ``rounds`` rounds (the initial prompt and
    ``rounds - 1`` corrections)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the clickability model whose map is cut into groups (``intrabench prompters list``)
    clickability: ComponentSpec = Field(default_factory=lambda: ComponentSpec(name="distance"))
    #: clicking groups G1..Gn of equal probability mass (even: HH compares the halves)
    groups: int = Field(default=10, ge=2, le=100)
    #: also run the baseline strategy (the deepest voxel, as IntraBench's own clicks)
    baseline: bool = True
    #: rounds per episode: the initial prompt and rounds - 1 corrections
    rounds: int = Field(default=20, ge=1, le=101)

    @field_validator("groups")
    @classmethod
    def _even_groups(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"groups must be even (HH compares the two halves), got {value}")
        return value

    @property
    def strategies(self) -> list[str]:
        """``baseline`` (when on), then ``G1`` ... ``G<groups>``."""
        return (["baseline"] if self.baseline else []) + [
            f"G{g}" for g in range(1, self.groups + 1)
        ]


#: values of ``surface_metrics_at`` (see :func:`intrabench.evaluation.metrics.surface_at`)
SurfaceSteps = Literal["all", "final", "initial-and-final"] | list[Annotated[int, Field(ge=0)]]


#: the largest seed: results store seeds as 64-bit integers
MAX_SEED = 2**63 - 1


def _protocol_names(schema: dict[str, Any]) -> None:
    """The JSON schema (and the reference) of ``protocol:`` lists the registered protocols."""
    schema["enum"] = list(PROTOCOLS)


def _import_plugins(modules: Any) -> None:
    """Import the ``imports:`` modules (a list of names) before ``protocol:`` is checked: one
    may register the protocol. Anything else is left to the field's own validation."""
    if isinstance(modules, list) and all(isinstance(m, str) for m in modules):
        RunConfig.model_construct(imports=modules).import_modules()


class RunConfig(BaseModel):
    """Everything that defines a run (models x prompters x refiners x datasets x seeds)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    #: the run's name: its default folder (intrabench-runs/<name>) and the ``run`` column
    name: str = "run"
    #: Python modules imported before anything else, in this process and in every worker
    #: (components registered by decorator in your own code, without an entry point); a
    #: module file beside the config file is found (its folder is put on the import path)
    imports: list[str] = Field(default_factory=list)
    #: repetitions: every prompt's randomness derives from (seed, dataset, case, target, ...)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    #: datasets (``intrabench datasets list``; your own: ``folder``, ``nnunet-folder``)
    datasets: list[DatasetSpec] = Field(min_length=1)
    #: models (``intrabench models list``)
    models: list[ModelSpec] = Field(min_length=1)
    #: initial prompters (``intrabench prompters list``): every model x prompter pair runs
    prompters: list[ComponentSpec] = Field(min_length=1)
    #: refiners (corrections after the initial prompt); none: one step per episode
    refiners: list[RefinerSpec] = Field(default_factory=list)
    #: corrections per episode after the initial prompt (with refiners)
    refinement_steps: int = Field(default=5, ge=0, le=100)
    #: a correction step gives the model all earlier prompts too (else only the new one)
    keep_previous_prompts: bool = True
    #: write each target's final prediction as NIfTI on the image's grid (``true``), or also
    #: every refinement step's (``all``: ``<case>__<target>__step<k>.nii.gz``, for review)
    save_predictions: bool | Literal["all"] = False
    #: tolerance of the normalised surface Dice (``nsd``), mm
    nsd_tolerance_mm: float = Field(default=2.0, gt=0)
    #: at which steps the surface metrics (``nsd``, ``hd95``: distance transforms, the costly
    #: part) are computed: ``all`` (default), ``final`` (each episode's last step),
    #: ``initial-and-final``, or a list of step numbers; elsewhere they are NaN. Dice, IoU and
    #: the voxel counts are computed at every step whatever this says
    surface_metrics_at: SurfaceSteps = "all"
    #: measure every target's attributes (size, shape, contrast...: docs/attributes.md) and
    #: add them to the result rows as ``attr_*`` columns; cached per case across runs
    target_attributes: bool = True
    #: whose metric definitions the rows follow: IntraBench's own (default), or the CVPR 2025
    #: interactive challenge's (surface-element NSD, the image-level 0.2-Dice rule, its
    #: clicks); ``cvpr25`` also fills in the challenge's prompter, refiner and 5 steps when the
    #: config does not name them (see :mod:`intrabench.evaluation.cvpr25`)
    #: ``cvpr25-corrected``: the same metrics and clicks, with the box the participants asked
    #: for (``cvpr25-box-corrected``: around the whole target; CVPR25#5, docs/evaluation.md).
    #: A protocol a plugin registers (``register_protocol``, in a module under ``imports:``)
    #: is accepted too
    protocol: str = Field(default=DEFAULT_PROTOCOL, json_schema_extra=_protocol_names)
    #: evaluate every target once per clicking group of a clickability model (RClicks):
    #: docs/realistic-clicks.md; its ``rounds`` set ``refinement_steps`` (rounds - 1)
    robustness: RobustnessSpec | None = None
    #: seconds per interaction kind and the time budget of time-aware evaluation
    #: (docs/time-aware.md); read by ``intrabench tables``/``report``, never by the run
    time_model: TimeModel = Field(default_factory=TimeModel)

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, value: Any) -> Any:
        """The components a registered protocol fills in when the config names none (a
        protocol not registered yet may come from a module under ``imports:``: imported
        first)."""
        if isinstance(value, dict) and isinstance(value.get("protocol"), str):
            if value["protocol"] not in PROTOCOLS:
                _import_plugins(value.get("imports"))
            found = PROTOCOLS.get(value["protocol"])
            if found is not None:
                value = {**copy.deepcopy(dict(found.defaults)), **value}
        return value

    @model_validator(mode="before")
    @classmethod
    def _robustness_rounds(cls, value: Any) -> Any:
        """``robustness.rounds`` (default 20) sets ``refinement_steps`` to rounds - 1; both
        given must agree."""
        if not isinstance(value, dict) or not isinstance(value.get("robustness"), dict):
            return value
        rounds = value["robustness"].get("rounds", 20)
        if not isinstance(rounds, int) or isinstance(rounds, bool):
            return value  # the field's own validation reports it
        if "refinement_steps" in value and value["refinement_steps"] != rounds - 1:
            raise ValueError(
                f"robustness.rounds is {rounds} but refinement_steps is "
                f"{value['refinement_steps']}: a round is the initial prompt or "
                "one correction, so give one of them (refinement_steps = rounds - 1)"
            )
        return {**value, "refinement_steps": rounds - 1}

    @field_validator("protocol", mode="before")
    @classmethod
    def _registered_protocol(cls, value: Any) -> Any:
        """A registered protocol's name; else the error names the registered ones."""
        if isinstance(value, str) and value in PROTOCOLS:
            return value
        *first, last = [repr(name) for name in PROTOCOLS]
        either = f"{', '.join(first)} or {last}" if first else last
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": either}
        )

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, value: list[int]) -> list[int]:
        from collections import Counter

        outside = [s for s in value if not 0 <= s <= MAX_SEED]
        if outside:
            raise ValueError(
                f"seeds must be whole numbers from 0 to 2^63 - 1; got {str(outside[0])[:30]}"
            )
        repeated = sorted(s for s, n in Counter(value).items() if n > 1)  # linear, not n^2
        if repeated:
            raise ValueError(
                f"seeds listed twice: [{listed(repeated)}] (each seed is one repetition)"
            )
        return value

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        # the name becomes a folder (intrabench-runs/<name>) and a column: one plain component
        if (
            not value.strip()
            or value in (".", "..")
            or any(c in value for c in "/\\\0")
            or value != value.strip()
        ):
            raise ValueError(
                f"'{value}' cannot be a run name: use letters, digits, '-', '_' "
                "or '.', without '/' (it names the run's folder)"
            )
        return value

    def without_runtime(self) -> RunConfig:
        """This config with every model's ``runtime`` left out: what identifies the run (its
        recorded config, compared when a run folder is resumed).

        Returns:
            A copy whose model entries have ``runtime: {}``; this config is unchanged.
        """
        models = [spec.model_copy(update={"runtime": {}}) for spec in self.models]
        return self.model_copy(update={"models": models})

    def import_modules(self) -> None:
        """Import the config's ``imports:`` modules, which register plugin components.

        Raises:
            ConfigError: A module cannot be imported.
        """
        import importlib

        for module in self.imports:
            try:
                importlib.import_module(module)
            except ImportError as error:
                raise ConfigError(f"imports: cannot import '{module}': {error}") from None
            except Exception as error:  # the plugin's own code failed while it was imported
                raise ConfigError(
                    f"imports: importing '{module}' failed: {one_line_cause(error)}"
                ) from None

    def _check_names_known(self) -> None:
        """Every unknown dataset, model, prompter and refiner name of the config in one line
        (a model served elsewhere, ``runs_in``, is registered when it is checked: not here)."""
        groups = (
            (registry.datasets, self.datasets),
            (registry.models, [s for s in self.models if s.runs_in is None]),
            (registry.prompters, self.prompters),
            (registry.refiners, self.refiners),
        )
        unknown = list(
            dict.fromkeys(
                (reg, spec.name)
                for reg, specs in groups
                for spec in specs
                if not reg.is_known(spec.name)
            )
        )
        if len(unknown) == 1:
            unknown[0][0].get(unknown[0][1])  # one name: its own message, the valid names
        if unknown:
            raise ConfigError(
                f"{len(unknown)} unknown names: "
                f"{', '.join(reg.unknown_note(name) for reg, name in unknown)}; "
                "'intrabench models list', 'intrabench prompters list' (refiners too) and "
                "'intrabench datasets list' show the valid ones (your own component: list its "
                "module under 'imports:' in the config, or register it through an entry point: "
                "docs/adding-a-model.md)"
            )

    def validate_components(self) -> None:
        """Check every name and parameter against the registries (no model is loaded)."""
        self.import_modules()
        self._check_names_known()
        for spec in self.datasets:
            registry.datasets.check_params(spec.name, spec.params)
        dataset_keys = [spec.key for spec in self.datasets]
        for spec in self.models:
            if spec.runs_in is not None:
                from intrabench.serving.building import register_served

                register_served(spec)  # a model installed only where it runs
            if not getattr(registry.models.get(spec.name), "served_facts", None):
                registry.models.check_params(spec.name, spec.build_params)
            unknown = [name for name in spec.datasets or [] if name not in dataset_keys]
            if unknown:
                raise ConfigError(
                    f"models: {spec.key}: datasets {unknown} are not datasets of "
                    f"this run ({', '.join(dataset_keys)})"
                )
            for field, specs in (("prompters", self.prompters), ("refiners", self.refiners)):
                keys = [s.key for s in specs]
                unknown = [name for name in getattr(spec, field) or [] if name not in keys]
                if unknown:
                    raise ConfigError(
                        f"models: {spec.key}: {field} {unknown} are not {field} of "
                        f"this run ({', '.join(keys) or 'none'})"
                    )
        for spec in self.prompters:
            registry.prompters.check_params(spec.name, spec.params)
        for spec in self.refiners:
            registry.refiners.check_params(spec.name, spec.params)
        if self.robustness is not None:
            spec = self.robustness.clickability
            registry.clickability.check_params(spec.name, spec.params)
            clickers = [
                s.key for s in self.prompters if registry.prompters.get(s.name).takes_click_policy
            ]
            clickers += [
                s.key for s in self.refiners if registry.refiners.get(s.name).takes_click_policy
            ]
            if not clickers:
                raise ConfigError(
                    "robustness: no prompter or refiner of this config draws its "
                    "clicks from a clickability model; use click prompters or "
                    "refiners (intrabench prompters lists them: 'clicks: "
                    "realistic')"
                )
        for group in ("datasets", "models", "prompters", "refiners"):
            keys = [spec.key for spec in getattr(self, group)]
            duplicates = sorted({k for k in keys if keys.count(k) > 1})
            if duplicates:
                raise ConfigError(
                    f"{group}: listed twice: {', '.join(duplicates)} (give a 'label')"
                )


def _format_validation_error(error: ValidationError, source: str) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"] if part not in ("function-before",))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        key = str(first["loc"][-1])
        fields = list(RunConfig.model_fields) if len(first["loc"]) == 1 else []
        close = difflib.get_close_matches(key, fields, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        valid = f"; valid keys: {', '.join(fields)}" if fields else ""
        message = f"unknown key '{key}'{hint}{valid}"
    more = f" (and {error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return f"{source}: {location}: {message}{more}"


def parse_config(data: Any, source: str = "config") -> RunConfig:
    """A validated run configuration from parsed YAML.

    Args:
        data: The parsed document; must be a mapping.
        source: What the document is, named in error messages (a file path).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: The document is not a mapping or fails validation (one line per problem).
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error, source)) from None
    except RecursionError:
        raise ConfigError(f"{source}: the config is nested too deeply") from None
    check_labels(config, source)
    config.validate_components()
    return config


def check_labels(config: RunConfig, source: str = "config") -> None:
    """ConfigError naming the key (``models.0.label``) when a label the config gives is not one
    plain name (:func:`~intrabench.io.run_paths.path_component_problem`: ``..``, ``/``, a
    control character...): it names a folder of the prediction tree. Labels that
    :func:`resolve_relative_paths` derives later (the key as written, paths included) are the
    run's own and are not checked.

    Args:
        config: The validated configuration.
        source: What the document is, named in the error (a file path).

    Raises:
        ConfigError: A dataset, model, prompter, refiner or robustness clickability label is
            not a plain name.
    """
    groups = [
        (group, getattr(config, group)) for group in ("datasets", "models", "prompters", "refiners")
    ]
    if config.robustness is not None:
        groups.append(("robustness.clickability", [config.robustness.clickability]))
    for group, specs in groups:
        for index, spec in enumerate(specs):
            problem = None if spec.label is None else path_component_problem(spec.label)
            if problem:
                where = group if group.startswith("robustness") else f"{group}.{index}"
                raise ConfigError(
                    f"{source}: {where}.label: {quoted(spec.label, 60)} cannot be "
                    f"a label: {problem}; use letters, digits, '-', '_' or '.' (it "
                    "names a folder of the run)"
                )


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """The run config in a YAML file, validated.

    Args:
        path: The YAML file.
        overrides: ``key=value`` settings applied before validation (see
            :func:`apply_overrides`).

    Returns:
        The configuration, its relative paths resolved against the file's folder
        (:func:`resolve_relative_paths`).

    Raises:
        ConfigError: The file cannot be read, is not valid YAML within the loader's bounds, or
            fails validation (one line per problem).
    """
    path = Path(path)
    data = read_yaml_file(path)
    if overrides:
        data = apply_overrides(data, overrides)
    if isinstance(data, dict) and data.get("imports"):
        importable_beside(path.parent)
    config = resolve_relative_paths(parse_config(data, source=str(path)), path.parent)
    from intrabench.timing.waiting import check_latency_table  # imported when a run is read

    check_latency_table(config.time_model, [spec.key for spec in config.models], str(path))
    return config


def importable_beside(folder: Path) -> None:
    """Let ``imports:`` name a module in the config's own folder: the folder goes on this
    process's ``sys.path`` and on ``PYTHONPATH``, which the run's worker processes inherit.

    Args:
        folder: The config file's folder (made absolute); added once to each, at the front.
    """
    import os
    import sys

    folder_text = str(Path(folder).resolve())
    if folder_text not in sys.path:
        sys.path.insert(0, folder_text)
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    if folder_text not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder_text, *entries])


def apply_overrides(data: Any, overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``data`` (a parsed config mapping) with each ``key=value`` of ``overrides`` set.

    Args:
        data: The parsed YAML document; anything but a mapping is returned as it is (parsing
            then says why it is not a config).
        overrides: ``KEY=VALUE`` strings (``--set``), applied in order: the value is read as
            YAML (``3``, ``true``, ``[0, 1]``, ``{name: sam}``; empty: ``""``), a dotted key
            sets a nested mapping's entry (``robustness.groups=4``), creating missing ones.

    Returns:
        A deep copy of ``data`` with the overrides set; ``data`` itself is unchanged.

    Raises:
        ConfigError: An override has no ``=`` or no key, its value is not valid YAML, or a
            dotted key passes through a value that is not a mapping.
    """
    if not isinstance(data, dict):
        return data
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. refinement_steps=3")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {item!r}: the value is not valid YAML") from None
        target = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = target.get(part)
            if child is None:
                child = target[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: '{part}' is not a mapping in this config")
            target = child
        target[parts[-1]] = value
    return data


#: component parameters that name files or folders: relative values are relative to the config
PATH_PARAMS: tuple[str, ...] = (
    "spec",
    "path",
    "root",
    "clicks_file",
    "checkpoint",
    "checkpoint_dir",
)


def _folder_spec_name(spec: ComponentSpec, params: dict[str, Any]) -> str | None:
    """The ``name:`` of a ``folder`` dataset's YAML spec when the entry has no ``label``
    (None otherwise, or when the file is not a readable mapping: the dataset says why)."""
    if spec.label or spec.name != "folder" or not isinstance(params.get("spec"), str):
        return None
    try:
        data = yaml.safe_load(Path(params["spec"]).read_text()[: 1 << 20])
    except (OSError, yaml.YAMLError, ValueError):
        return None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str | int) or not str(name).strip():
        return None
    return None if path_component_problem(str(name)) else str(name)


def resolve_relative_paths(config: RunConfig, base: Path) -> RunConfig:
    """``config`` with every relative path parameter (:data:`PATH_PARAMS`; ``~`` expanded),
    and ``time_model.latency_table`` when it is a file, made absolute against ``base``, the
    config file's folder, so a run reads the same files from any working directory and its run
    folder records where they are.

    A component without a ``label`` keeps the key it had as written (its label becomes that
    key), so result columns and unit keys do not depend on where the config lies; a ``folder``
    dataset without a label is labelled with its spec's ``name:``.

    Args:
        config: The validated configuration.
        base: The folder relative paths are relative to (the config file's folder).

    Returns:
        A copy of ``config`` with the paths absolute; ``config`` itself is unchanged.
    """

    def resolved(spec: ComponentSpec) -> ComponentSpec:
        params = dict(spec.params)
        for name in PATH_PARAMS:
            value = params.get(name)
            if isinstance(value, str) and value:
                expanded = Path(value).expanduser()
                if not expanded.is_absolute():
                    expanded = (base / expanded).resolve()
                params[name] = str(expanded)
        named = _folder_spec_name(spec, params)
        if named:  # a folder spec's own ``name:`` names its dataset in the results
            return spec.model_copy(update={"params": params, "label": named})
        if params == spec.params:
            return spec
        return spec.model_copy(update={"params": params, "label": spec.label or spec.key})

    base = Path(base).resolve()
    update: dict[str, Any] = {
        field: [resolved(spec) for spec in getattr(config, field)]
        for field in ("datasets", "models", "prompters", "refiners")
    }
    if config.robustness is not None:
        update["robustness"] = config.robustness.model_copy(
            update={"clickability": resolved(config.robustness.clickability)}
        )
    table = config.time_model.latency_table
    if isinstance(table, str) and not Path(table).expanduser().is_absolute():
        update["time_model"] = config.time_model.model_copy(
            update={"latency_table": str((base / Path(table).expanduser()).resolve())}
        )
    elif isinstance(table, str):
        update["time_model"] = config.time_model.model_copy(
            update={"latency_table": str(Path(table).expanduser())}
        )
    return config.model_copy(update=update)


def builtin_demo_path() -> Path:
    """The path of the built-in demo's configuration.

    Returns:
        ``resources/demo.yaml`` inside the installed ``intrabench`` package.
    """
    return Path(__file__).parent / "resources" / "demo.yaml"


def run_config(run_dir: str | Path) -> RunConfig:
    """The :class:`RunConfig` a run directory was made with, its plugin modules imported.

    Args:
        run_dir: The run's folder (its ``config.yaml`` is read by
            :func:`intrabench.io.run_directory.recorded_config_data`).

    Returns:
        The recorded configuration, validated (its paths as the run recorded them).

    Raises:
        UserError: The recorded config cannot be read or fails validation (one line).
    """
    from intrabench.errors import UserError
    from intrabench.io.run_directory import recorded_config_data

    data = recorded_config_data(run_dir)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as error:  # one line naming the key, not pydantic's report
        raise UserError(_format_validation_error(error, f"{run_dir}/config.yaml")) from None
    except ValueError as error:
        raise UserError(f"{run_dir}: its config.yaml cannot be read ({error})") from None
    config.import_modules()
    return config


def run_dataset(run_dir: str | Path, config: RunConfig, key: str) -> Any:
    """The dataset whose results carry ``key`` in a run made with ``config``, built as the run
    built it.

    Args:
        run_dir: The run's folder (named in the error).
        config: The run's configuration (:func:`run_config`).
        key: The dataset key of the results' ``dataset`` column (its spec's ``key``).

    Returns:
        The dataset component, created from the registry with the run's parameters.

    Raises:
        UserError: The run's config has no dataset with that key.
    """
    from intrabench.errors import UserError

    spec = next((s for s in config.datasets if s.key == str(key)), None)
    if spec is None:
        raise UserError(f"{run_dir}: dataset '{key}' of the results is not in its config.yaml")
    return registry.datasets.create(spec.name, spec.params)
