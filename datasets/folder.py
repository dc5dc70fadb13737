"""Bring your own data: a folder of images and labels described by a small YAML file.

Example ``my-data.yaml`` (paths are relative to the YAML file's folder unless ``root`` says
otherwise)::

    name: liver-study                 # dataset name in results (default: the YAML file name)
    root: .                           # folder the patterns are relative to
    images: "images/{case}_ct.nii.gz" # {case} marks the case id; the rest is a glob pattern
    labels: "labels/{case}_seg.nii.gz"
    # or explicit pairs instead of the two patterns:
    # pairs:
    #   - {case: p1, image: a/p1.nii.gz, label: b/p1-mask.nii.gz}
    classes: {lesion: 1, liver: 2}    # label value of each class (0 is background)
    target_types: {lesion: instance, liver: organ}   # default: instance
    instances: connected_components   # or "values": label values are instance ids already

Every image needs a label on the same grid (checked when a case is loaded). Use it in a run
config as ``{name: folder, spec: path/to/my-data.yaml}``.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from intrabench.errors import DataError, UserError
from intrabench.interfaces import Dataset
from intrabench.io.raw_image import RawImage
from intrabench.modality import normalise_modality
from intrabench.registry import datasets
from intrabench.types import Case
from intrabench.wording import listed

from .case_modality import case_modalities
from .dicom import describe_dicom_file, read_series
from .dicom_pairs import dicom_classes, is_dicom_label, not_a_series_image, read_dicom_case
from .nnunet_folder import case_from_raw, chosen_classes, class_value, load_pair

_KEYS = {
    "name",
    "root",
    "images",
    "labels",
    "pairs",
    "classes",
    "target_types",
    "instances",
    "description",
    "modality",
    "use_classes",
    "trust_modality",
}


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Regex for a ``{case}`` pattern: glob wildcards match within one path component."""
    parts = pattern.split("{case}")
    if len(parts) != 2:
        raise UserError(f"pattern '{pattern}' must contain {{case}} exactly once")

    def convert(text: str) -> str:
        out = ""
        for char in text:
            out += {"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char))
        return out

    return re.compile(f"^{convert(parts[0])}(?P<case>[^/]+?){convert(parts[1])}$")


def _match(root: Path, pattern: str) -> dict[str, Path]:
    regex = _pattern_regex(pattern)
    found: dict[str, Path] = {}
    wildcard = glob.escape(str(root)) + "/" + pattern.replace("{case}", "*")
    for name in sorted(glob.glob(wildcard, recursive=False)):
        relative = Path(name).relative_to(root).as_posix()
        match = regex.match(relative)
        if match:
            case_id = match.group("case")
            if case_id in found:
                raise UserError(f"case '{case_id}' matches two files: {found[case_id]} and {name}")
            found[case_id] = Path(name)
    return found


def _found_note(root: Path, data: dict[str, Any]) -> str:
    """What the patterns' folders hold, to tell a wrong folder from a wrong file pattern."""
    notes = []
    for key in ("images", "labels"):
        folder = (root / str(data.get(key))).parent
        if not folder.is_dir():
            notes.append(f"there is no folder {folder}")
            continue
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        matched = len(_match(root, str(data.get(key))))
        shown = listed(names, limit=3)
        notes.append(
            f"{key}: {matched} of {len(names)} file(s) in {folder} match"
            + (f" (e.g. {shown})" if names else "")
        )
    return "; ".join(notes)


@datasets.register
class FolderDataset(Dataset):
    """Your own images + labels, described by a YAML spec (patterns or explicit pairs)."""

    name: ClassVar[str] = "folder"
    modality: ClassVar[str] = "any"
    description: ClassVar[str] = "your own data: image/label files described by a YAML spec"

    def __init__(self, spec: str) -> None:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise UserError(f"dataset spec not found: {path}")
        try:
            from intrabench.safe_yaml import read_yaml

            data: Any = read_yaml(path.read_text(), str(path))
        except yaml.YAMLError as error:
            raise UserError(f"{path}: invalid YAML ({error})") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a mapping with images/labels (or pairs) and classes")
        unknown = set(data) - _KEYS
        if unknown:
            raise UserError(f"{path}: unknown keys {sorted(unknown)}; valid: {sorted(_KEYS)}")
        self.dataset_name = str(data.get("name") or path.stem)
        root = Path(str(data.get("root", "."))).expanduser()
        self.root = root if root.is_absolute() else (path.parent / root).resolve()
        self._cases = self._find(data, path)
        self.selectors = self._dicom_selectors(data.get("classes"), path)
        classes = data.get("classes")
        if self.selectors is None and (not isinstance(classes, dict) or not classes):
            raise UserError(
                f"{path}: 'classes' must map class names to label values, e.g. {{lesion: 1}}"
            )
        #: every declared class (the label values a file may hold), and the classes whose
        #: targets are segmented (``use_classes``, default all)
        if self.selectors is None:
            self.label_classes = {
                str(k): value for k, v in classes.items() if (value := class_value(v, k, path)) != 0
            }
        self.classes = chosen_classes(self.label_classes, data.get("use_classes"), str(path))
        types = {str(k): str(v) for k, v in (data.get("target_types") or {}).items()}
        unknown = sorted(set(types) - set(self.label_classes))
        if unknown:
            import difflib

            hints = "".join(
                f" (did you mean '{close[0]}' for '{name}'?)"
                for name in unknown
                if (close := difflib.get_close_matches(name, list(self.label_classes), 1))
            )
            raise UserError(
                f"{path}: target_types names {unknown}, which are not classes "
                f"(classes: {', '.join(sorted(self.label_classes))}){hints}"
            )
        bad = {k: v for k, v in types.items() if v not in ("instance", "organ")}
        if bad:
            raise UserError(f"{path}: target_types {bad}: each must be 'instance' or 'organ'")
        self.target_types = types
        self.instances = str(data.get("instances", "connected_components"))
        if self.instances not in ("connected_components", "values"):
            raise UserError(f"{path}: instances must be 'connected_components' or 'values'")
        self.modality_declared, self.case_modality = case_modalities(
            data.get("modality"), sorted(self._cases), str(path)
        )
        #: the spec says its modalities are right whatever the intensities (datasets verify)
        if data.get("trust_modality") not in (None, True, False):
            raise UserError(f"{path}: trust_modality must be true or false")
        self.trust_modality = data.get("trust_modality") is True
        if not self._cases:
            raise UserError(
                f"{path}: no image/label pairs found: "
                + (
                    "the pairs list is empty"
                    if data.get("pairs") is not None
                    else f"looked for images {self.root / str(data.get('images'))} and "
                    f"labels {self.root / str(data.get('labels'))} ({{case}} "
                    f"matching any name); {_found_note(self.root, data)}"
                )
            )

    def _find(self, data: dict[str, Any], path: Path) -> dict[str, tuple[Path, Path]]:
        if data.get("pairs") is not None:
            cases: dict[str, tuple[Path, Path]] = {}
            for index, pair in enumerate(data["pairs"]):
                if not isinstance(pair, dict) or "image" not in pair or "label" not in pair:
                    raise UserError(f"{path}: pairs[{index}] needs 'image' and 'label'")
                image, label = self.root / str(pair["image"]), self.root / str(pair["label"])
                case_id = str(pair.get("case") or Path(str(pair["image"])).name.split(".")[0])
                if case_id in cases:
                    raise UserError(f"{path}: case '{case_id}' listed twice")
                if not image.is_file() and not image.is_dir():
                    raise UserError(f"{path}: pairs[{index}]: image not found: {image}")
                if not label.is_file():
                    raise UserError(
                        f"{path}: pairs[{index}]: "
                        + (
                            f"the label {label} is a folder; give the RTSTRUCT or SEG file in it"
                            if label.is_dir()
                            else f"label file not found: {label}"
                        )
                    )
                cases[case_id] = (image, label)
            return cases
        if not data.get("images") or not data.get("labels"):
            raise UserError(
                f"{path}: give 'images' and 'labels' patterns with {{case}}, or a 'pairs' list"
            )
        images = _match(self.root, str(data["images"]))
        labels = _match(self.root, str(data["labels"]))
        unlabelled = sorted(set(images) - set(labels))
        if unlabelled:
            raise UserError(
                f"{path}: {len(unlabelled)} image(s) without a label, e.g. "
                f"'{unlabelled[0]}' ({images[unlabelled[0]]})"
            )
        return {c: (images[c], labels[c]) for c in images}

    def _dicom_selectors(self, classes: Any, path: Path) -> dict[str, Any] | None:
        """What each class selects in DICOM labels (RTSTRUCT, SEG); None for label files."""
        labels = [label for _, label in self._cases.values()]
        dicom = [label for label in labels if is_dicom_label(label)]
        if not dicom:
            return None
        if len(dicom) != len(labels):
            other = next(label for label in labels if label not in dicom)
            raise UserError(
                f"{path}: some labels are RTSTRUCT or DICOM-SEG files, others not "
                f"(e.g. {other}); give one kind of label per spec"
            )
        self.label_classes, selectors = dicom_classes(classes, dicom, path)
        return selectors

    def case_ids(self) -> list[str]:
        """The identifiers of the cases the spec's patterns found, sorted."""
        return sorted(self._cases)

    def image_path(self, case_id: str) -> Path:
        """Where ``case_id``'s image is, as the spec found it (what ``predictions to-dicom-seg``
        writes its SEGs over).

        Args:
            case_id: one of :meth:`case_ids`.

        Returns:
            The image file, or the folder of its DICOM series.
        """
        return Path(self._cases[case_id][0])

    def declared_modality(self, case_id: str) -> str:
        """The modality the spec gives ``case_id`` (its ``modality:`` mapping, else the dataset's)."""
        return self.case_modality.get(case_id, self.modality_declared)

    def load(self, case_id: str) -> Case:
        """Read one case (a file or a DICOM series) into canonical (z, y, x) orientation.

        Raises:
            DataError: The image or label cannot be read or they do not match.
        """
        image, label = self._cases[case_id]
        if self.selectors is not None or image.is_dir():
            return self._load_dicom(case_id, image, label)
        if (problem := not_a_series_image(image)) is not None:
            raise DataError(problem)
        return load_pair(
            self.dataset_name,
            case_id,
            image,
            label,
            self.classes,
            self.target_types,
            self.instances,
            modality=self.declared_modality(case_id),
            label_classes=self.label_classes,
            declared_in="the spec's classes",
        )

    def _load_dicom(self, case_id: str, image: Path, label: Path) -> Case:
        """A case whose image is a DICOM series folder (its label an RTSTRUCT, a SEG or a
        label file on the series' grid)."""
        if not image.is_dir():
            raise DataError(
                f"{label.name} is {describe_dicom_file(label)}: its image must be the "
                f"DICOM series it was drawn on (a folder of slices), not {image.name}"
            )
        if self.selectors is None:
            from intrabench.io.volume import read_image

            raw_image = RawImage.from_sitk(read_series(image).image, name=str(image))
            raw_label, modality = read_image(label), ""
        else:
            raw_image, raw_label, modality = read_dicom_case(
                image, label, self.label_classes, self.selectors
            )
        modality = self.declared_modality(case_id) or normalise_modality(modality)
        return case_from_raw(
            self.dataset_name,
            case_id,
            raw_image,
            raw_label,
            self.classes,
            self.target_types,
            self.instances,
            modality=modality,
            label_classes=self.label_classes,
            declared_in="the spec's classes",
            image_path=image,
            label_path=label,
        )
