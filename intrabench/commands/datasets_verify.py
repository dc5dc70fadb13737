"""``intrabench datasets verify``: read every case the way ``intrabench run`` reads it.

A dataset is checked through the same ``Dataset`` object and ``load`` a run uses (so every
format and route a run accepts is accepted here, and everything a run would refuse is
reported here, case by case, with the run's own message). What it can name:

* a registered dataset (a prepared recipe under the data root, a built-in one),
* a folder in nnU-Net layout (``imagesTr/``, ``labelsTr/``, ``dataset.json``; any image
  format a run reads: ``.nii.gz``, ``.nii``, ``.nrrd``, ``.mha``, ``.mhd``),
* a YAML dataset spec (the ``folder`` route: patterns or explicit pairs),
* a run config (every dataset it names, built with the config's own parameters).

Per case it reports the classes found with their number of targets, the voxel spacing in mm
(canonical z, y, x order), the file's orientation (nibabel axis codes of its voxel axes, e.g.
``LPS``) and the canonical shape (z, y, x). For nnU-Net folders it also reports the layout
problems a run would silently pass over (stray files, images without a label, a wrong
``numTraining``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from intrabench.errors import UserError

#: the exceptions a case's load may raise that are the data's fault, reported as the cause
_DATA_ERRORS = ("DataError", "UserError", "ConfigError")


@dataclass
class CaseReport:
    """What reading one case found: ``problem`` is None when the run would read it."""

    case_id: str
    problem: str | None = None
    targets_per_class: dict[str, int] = field(default_factory=dict)
    spacing_zyx: tuple[float, float, float] | None = None
    orientation: str = ""
    shape_zyx: tuple[int, int, int] | None = None
    #: the modality the case is read as (CT, MR; "" undeclared)
    modality: str = ""

    @property
    def ok(self) -> bool:
        """Whether the run would read the case (no problem found)."""
        return self.problem is None

    @property
    def targets(self) -> int:
        """The number of targets over all classes."""
        return sum(self.targets_per_class.values())

    def line(self) -> str:
        """One line: ``case: ok, 3 targets (lesion 2, liver 1), spacing ..., ...``.

        Returns:
            The case's line; ``case: <problem>`` when it cannot be read.
        """
        if not self.ok:
            return f"{self.case_id}: FAIL: {self.problem}"
        classes = ", ".join(f"{name} {count}" for name, count in self.targets_per_class.items())
        spacing = " x ".join(f"{value:g}" for value in self.spacing_zyx or ())
        shape = " x ".join(str(value) for value in self.shape_zyx or ())
        plural = "" if self.targets == 1 else "s"
        return (
            f"{self.case_id}: ok, {self.targets} target{plural} ({classes}), "
            f"spacing {spacing} mm (z, y, x), orientation {self.orientation}, "
            f"shape {shape}, modality {self.modality or 'undeclared'}"
        )


@dataclass
class DatasetToVerify:
    """A dataset built as a run builds it, under the name the report gives it."""

    label: str
    dataset: Any
    layout_problems: list[str] = field(default_factory=list)
    #: the cases to read (a run config's ``cases:`` / ``max_cases:``); None: every case
    cases: list[str] | None = None


def _one_line(error: BaseException) -> str:
    from intrabench.engine.failures import one_line_cause

    if type(error).__name__ in _DATA_ERRORS:
        lines = str(error).strip().splitlines()
        return lines[0] if lines else type(error).__name__
    return one_line_cause(error)  # a bug rather than the data: say where


def check_case(dataset: Any, case_id: str, trust_modality: bool = False) -> CaseReport:
    """Load ``case_id`` with ``dataset.load`` (as a run does) and describe what came back; a
    case whose intensities contradict its declared modality is refused unless
    ``trust_modality`` (or the dataset's own ``trust_modality``) says it is right.

    Args:
        dataset: A dataset built as a run builds it.
        case_id: The case to read.
        trust_modality: Read the case as its declared modality even when its intensities
            contradict it.

    Returns:
        The report: the classes and their target counts, spacing (mm) and shape in canonical
        (z, y, x) order, the file's orientation codes, the modality; or the problem in one line
        (any error of ``load`` is the case's result, never raised).
    """
    import nibabel as nib

    from intrabench.datasets.case_modality import modality_contradiction

    try:
        case = dataset.load(case_id)
    except Exception as error:  # noqa: BLE001 - every failure is this case's result
        return CaseReport(case_id, problem=_one_line(error))
    modality = case.image.modality
    # a recipe's modality is the dataset's published one; the user's declarations are checked
    trusted = (
        trust_modality
        or getattr(dataset, "trust_modality", False)
        or getattr(dataset, "recipe", None) is not None
    )
    if not trusted and (problem := modality_contradiction(case.image.array, modality)):
        return CaseReport(case_id, problem=problem, modality=modality)
    per_class = Counter(target.class_name for target in case.targets)
    geometry = case.image.geometry
    return CaseReport(
        case_id,
        targets_per_class=dict(sorted(per_class.items())),
        spacing_zyx=tuple(round(float(v), 4) for v in case.image.spacing),
        orientation="".join(nib.orientations.aff2axcodes(geometry.ras_affine())),
        shape_zyx=tuple(int(v) for v in case.image.shape),
        modality=modality,
    )


def dataset_coverage(item: DatasetToVerify, reports: list[CaseReport]) -> Any:
    """:func:`~intrabench.datasets.class_coverage.class_coverage` over the cases read ok.

    Args:
        item: The dataset verified.
        reports: Its cases' reports.

    Returns:
        The coverage: the lines to print for the declared classes, and whether any is an error.
    """
    from intrabench.datasets.class_coverage import class_coverage, declared_classes

    read = [r for r in reports if r.ok]
    holding = Counter(name for r in read for name, count in r.targets_per_class.items() if count)
    return class_coverage(declared_classes(item.dataset), holding, len(read), len(reports))


def check_dataset(item: DatasetToVerify, trust_modality: bool = False) -> Iterator[CaseReport]:
    """Every case of the dataset, in its own order, one report each (lazily: print as you go).

    Args:
        item: The dataset and the cases to read (None: every case).
        trust_modality: As :func:`check_case`'s.

    Yields:
        One :class:`CaseReport` per case.
    """
    for case_id in item.dataset.case_ids() if item.cases is None else item.cases:
        yield check_case(item.dataset, case_id, trust_modality)


def nnunet_layout_problems(folder: str | Path) -> list[str]:
    """What is wrong with an nnU-Net folder's layout that a run would not notice: files in
    ``labelsTr`` that are not images, images in ``imagesTr`` with no label, ``numTraining``
    not the number of labels.

    Args:
        folder: The nnU-Net folder (``imagesTr/``, ``labelsTr/``, ``dataset.json``).

    Returns:
        One line per problem; empty when the layout is sound.
    """
    from intrabench.datasets.nnunet_folder import _strip_suffix, channel_names

    folder = Path(folder)
    problems = []
    label_ids = set()
    for path in sorted((folder / "labelsTr").iterdir()) if (folder / "labelsTr").is_dir() else []:
        parsed = _strip_suffix(path.name)
        if parsed is None and not path.name.startswith("."):
            problems.append(f"stray file in labelsTr: {path.name}")
        elif parsed is not None:
            label_ids.add(parsed[0])
    try:
        meta = json.loads((folder / "dataset.json").read_text())
        declared = meta.get("numTraining") if isinstance(meta, dict) else None
    except (OSError, json.JSONDecodeError):
        meta, declared = None, None  # the dataset's own constructor reports a broken one
    try:
        channels = (
            set(channel_names(meta, folder / "dataset.json")) if isinstance(meta, dict) else set()
        )
    except UserError:
        channels = set()  # reported by the dataset's constructor
    for path in sorted((folder / "imagesTr").iterdir()) if (folder / "imagesTr").is_dir() else []:
        parsed = _strip_suffix(path.name)
        if path.name.startswith("."):
            continue
        stem = parsed[0] if parsed else path.name
        case_id, _, number = stem.rpartition("_")
        if parsed is None or len(number) != 4 or not number.isdigit() or case_id not in label_ids:
            problems.append(f"stray file in imagesTr (no label): {path.name}")
        elif channels and int(number) not in channels:
            problems.append(
                f"stray file in imagesTr: {path.name} is channel {int(number)}, "
                "which dataset.json's channel_names does not declare"
            )
    if declared is not None and int(declared) != len(label_ids):
        problems.append(f"numTraining is {declared} but labelsTr has {len(label_ids)} cases")
    return problems


def _is_run_config(path: Path) -> bool:
    try:
        from intrabench.safe_yaml import read_yaml

        data = read_yaml(path.read_text(encoding="utf-8"), str(path))
    except (yaml.YAMLError, UnicodeDecodeError, UserError):
        return False
    return isinstance(data, dict) and "datasets" in data and "models" in data


def resolve(name: str, root: str | None = None) -> list[DatasetToVerify]:
    """The datasets ``name`` stands for (see the module docstring).

    Args:
        name: A registered dataset's name, an nnU-Net folder, a YAML dataset spec or a run
            config.
        root: The data root for registered datasets; None: the default.

    Returns:
        One entry per dataset (a run config may name several), each built as a run builds it.

    Raises:
        UserError: ``name`` stands for no dataset.
    """
    from intrabench import registry

    path = Path(name).expanduser()
    if path.is_dir():
        folder = registry.datasets.create("nnunet-folder", {"path": str(path)})
        return [DatasetToVerify(name, folder, nnunet_layout_problems(path))]
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        if _is_run_config(path):
            from intrabench.config import load_config
            from intrabench.engine.model_needs import unmet_needs
            from intrabench.engine.plan import make_plan, select_cases

            config = load_config(path)
            found = []
            for spec in config.datasets:  # the cases the run reads: its cases:, max_cases:
                dataset = registry.datasets.create(spec.name, spec.params)
                cases = (
                    select_cases(dataset, spec)
                    if spec.cases is not None or spec.max_cases is not None
                    else None
                )
                found.append(DatasetToVerify(spec.key, dataset, _layout_of(dataset), cases))
            # what the config's models need from these cases, as the run checks it first
            datasets = {item.label: item.dataset for item in found}
            units = make_plan(config, datasets).units
            for item in found:
                item.layout_problems += unmet_needs(
                    [u for u in units if u.dataset.key == item.label], datasets
                )
            return found
        return [DatasetToVerify(name, registry.datasets.create("folder", {"spec": str(path)}))]
    if path.exists():
        raise UserError(
            f"{name}: give an nnU-Net folder, a dataset spec or run config (.yaml), "
            "or a dataset name"
        )
    if name not in registry.datasets.names() and ("/" in name or "." in name):
        raise UserError(f"{name}: no such file or folder, and no dataset of that name")
    cls = registry.datasets.get(name)
    params: dict[str, Any] = {"root": root} if getattr(cls, "recipe", None) and root else {}
    dataset = registry.datasets.create(name, params)
    return [DatasetToVerify(name, dataset, _layout_of(dataset))]


def _layout_of(dataset: Any) -> list[str]:
    """Layout problems of a dataset that reads an nnU-Net folder (none for other kinds)."""
    from intrabench.datasets.nnunet_folder import NnUNetFolder

    return nnunet_layout_problems(dataset.root) if isinstance(dataset, NnUNetFolder) else []
