"""Datasets in the nnU-Net v2 layout: ``imagesTr/<case>_0000.<ext>``, ``labelsTr/<case>.<ext>``
and ``dataset.json``. This is how prepared benchmark datasets are stored and how users bring
their own data.

Targets: each label class of ``dataset.json`` is either an *organ* (the whole class is one
target) or an *instance* class (every 26-connected component is one target, unless the label
map already holds one id per instance, see ``instances``). Declare it per class with the key
``target_types`` in ``dataset.json`` (``{"lesion": "instance", "liver": "organ"}``) or with the
``target_type`` parameter; the default is "instance".
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar, Literal

import cc3d
import numpy as np
from scipy import ndimage

from intrabench.errors import DataError, UserError
from intrabench.interfaces import Dataset
from intrabench.io.volume import read_image, volume_from_raw
from intrabench.masks import bounding_box, connected_components
from intrabench.modality import declared_modality, normalise_modality
from intrabench.registry import datasets
from intrabench.types import Case, Target
from intrabench.wording import listed

log = logging.getLogger(__name__)
#: more targets in one case than this are worth a warning (each is an episode)
MANY_TARGETS = 5000

_IMAGE_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd")


def _strip_suffix(name: str) -> tuple[str, str] | None:
    for suffix in _IMAGE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix
    return None


def channel_names(meta: dict[str, Any], where: Path) -> dict[int, str]:
    """``dataset.json``'s ``channel_names`` (nnU-Net v2; v1's ``modality``) as {number: name};
    {} when it declares none.

    Args:
        meta: The parsed ``dataset.json``.
        where: The file, named in the error line.

    Returns:
        Channel number to name (e.g. {0: "CT"}).

    Raises:
        UserError: ``channel_names`` is not a mapping of channel numbers to names.
    """
    channels = meta.get("channel_names", meta.get("modality", {}))
    if not isinstance(channels, dict) or not all(str(key).isdigit() for key in channels):
        raise UserError(
            f'{where}: channel_names must map channel numbers to names, e.g. {{"0": "CT"}}'
        )
    return {int(key): str(name) for key, name in channels.items()}


def resolve_channel(meta: dict[str, Any], channel: int | str, where: Path) -> int:
    """The channel number that ``channel`` (a number, or a name of ``channel_names``,
    case-insensitive) picks; UserError (one line, with the choices) when there is none.

    Args:
        meta: The parsed ``dataset.json``.
        channel: A channel number (int or digits) or a channel name.
        where: The file, named in the error line.

    Returns:
        The channel number (the ``_0000`` suffix's number of the image files).

    Raises:
        UserError: No declared channel has that number or name (or several have the name).
    """
    channels = channel_names(meta, where)
    listing = ", ".join(f"{number} ({name})" for number, name in sorted(channels.items()))
    if isinstance(channel, bool) or not isinstance(channel, int | str):
        raise UserError(f"channel: a channel number or name, got {channel!r}")
    if isinstance(channel, int) or channel.strip().isdigit():
        number = int(channel)
        if number < 0 or number > 9999 or (channels and number not in channels):
            raise UserError(
                f"channel {number}: {where} declares "
                + (f"the channels {listing}" if channels else "no channel_names")
            )
        return number
    named = [
        number
        for number, name in channels.items()
        if name.strip().lower() == channel.strip().lower()
    ]
    if len(named) != 1:
        raise UserError(
            f"channel '{channel}': {where} "
            + (
                f"names the channels {listing}"
                if channels
                else "declares no channel_names; give the channel's number"
            )
        )
    return named[0]


def build_targets(
    label: np.ndarray,
    classes: dict[str, int],
    target_types: dict[str, str],
    instance_source: str = "connected_components",
) -> tuple[np.ndarray, tuple[Target, ...], list[tuple[slice, ...]] | None]:
    """Turn a class label map (z, y, x) into a target map with one id per target.

    Returns the new map and its targets. The map has the smallest unsigned integer type that
    holds its target ids (uint8 up to 255 targets, uint16 up to 65535, else int32): a CT's map
    is a quarter of an int32 one to hash, ship to workers and search. Organ classes give one
    target each; instance
    classes give one target per 26-connected component ("connected_components") or per
    distinct value already present in the map ("values", for label maps that store instance
    ids directly and have a single foreground class).

    The third value is the exact bounding box of each target id 1..N, in order (what
    :meth:`~intrabench.types.Case.target_box` would find in another pass over the map), or
    None when a target overwrote part of an earlier one (its box may have shrunk).

    Args:
        label: The class label map, integer (z, y, x).
        classes: Class name to its label value (0: background, skipped).
        target_types: Class name to "organ" or "instance" (default "instance").
        instance_source: "connected_components" or "values", as above.

    Returns:
        (target map of ``label``'s shape, targets in id order, boxes of ids 1..N or None).

    Raises:
        UserError: "values" with other than one foreground class.
    """
    foreground = [name for name, value in classes.items() if value != 0]
    if instance_source == "values" and len(foreground) != 1:
        raise UserError(
            f"instances: values reads instance ids from the label's values, which "
            f"needs exactly one foreground class; the labels name {len(foreground)}"
            f" ({', '.join(sorted(foreground))}): use instances: "
            "connected_components"
        )
    target_map = np.zeros(label.shape, dtype=np.uint8)
    targets: list[Target] = []
    boxes: dict[int, tuple[slice, ...]] = {}  # targets' bounding boxes, by id
    overwritten = False  # a target wrote over an earlier one's voxels
    next_id = 1
    for class_name, class_value in sorted(classes.items(), key=lambda item: item[1]):
        if class_value == 0:
            continue
        kind = target_types.get(class_name, "instance")
        if kind == "organ":
            mask = label == class_value
            box = bounding_box(mask)
            if box is not None:
                target_map = _holding(target_map, next_id)
                overwritten = overwritten or bool(target_map[box][mask[box]].any())
                target_map[box][mask[box]] = next_id
                targets.append(Target(class_name, next_id, class_name, "organ", int(class_value)))
                boxes[next_id] = box
                next_id += 1
            continue
        if instance_source == "values":
            # one box per label value (one pass), then each instance read inside its box
            found = ndimage.find_objects(
                np.asarray(label, dtype=np.int64)
                if not np.issubdtype(label.dtype, np.integer)
                else label
            )
            components = [
                (box, label[box] == value, value)
                for value, box in enumerate(found, start=1)
                if box is not None
            ]
        else:
            mask = label == class_value
            if not mask.any():
                continue
            labelled = connected_components(mask, connectivity=26)
            stats = cc3d.statistics(labelled)
            components = [
                (stats["bounding_boxes"][c], labelled[stats["bounding_boxes"][c]] == c, class_value)
                for c in range(1, int(labelled.max()) + 1)
            ]
        target_map = _holding(target_map, next_id + len(components) - 1)
        for index, (box, local, file_value) in enumerate(components, start=1):
            overwritten = overwritten or bool(target_map[box][local].any())
            target_map[box][local] = next_id
            targets.append(
                Target(f"{class_name}_{index}", next_id, class_name, "instance", int(file_value))
            )
            boxes[next_id] = box
            next_id += 1
    # a later class may overwrite an earlier target (overlapping class definitions)
    empty = [
        t.target_id
        for t in targets
        if not (target_map[boxes[t.label_value]] == t.label_value).any()
    ]
    if empty:  # would score Dice 1.0 against an empty prediction
        raise DataError(f"targets {empty} have no voxels (overlapping class definitions?)")
    exact = None if overwritten else [boxes[t.label_value] for t in targets]
    return target_map, tuple(targets), exact


def smallest_label_dtype(largest: int) -> np.dtype:
    """The smallest of uint8, uint16 and int32 that holds label values 0..``largest``.

    Args:
        largest: The largest label value to hold (>= 0).

    Returns:
        ``uint8``, ``uint16`` or ``int32``.
    """
    for dtype in (np.uint8, np.uint16):
        if largest <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int32)


def _holding(target_map: np.ndarray, largest: int) -> np.ndarray:
    """``target_map``, widened (copied) if its type cannot hold target id ``largest``."""
    dtype = smallest_label_dtype(largest)
    return target_map if dtype.itemsize <= target_map.itemsize else target_map.astype(dtype)


def _numbers(values: Any) -> str:
    return "(" + ", ".join(f"{float(v):g}" for v in values) + ")"


def grid_difference(label: Any, image: Any) -> str:
    """What differs between two grids (size, spacing, origin, direction), label vs image.

    Args:
        label: The label's geometry (``size``, ``spacing``, ``origin``, ``direction``).
        image: The image's geometry, the same fields.

    Returns:
        The differing fields with both values, joined by "; " (spacing, origin and direction
        compared to 1e-3).
    """
    parts = []
    for field in ("size", "spacing", "origin", "direction"):
        a, b = getattr(label, field), getattr(image, field)
        if field in ("size",):
            same = tuple(a) == tuple(b)
        else:
            same = np.allclose(np.asarray(a, float), np.asarray(b, float), atol=1e-3)
        if not same:
            parts.append(f"{field} {_numbers(a)} vs {_numbers(b)}")
    return "; ".join(parts) or "within tolerance on each field, but not as a whole"


def chosen_classes(declared: dict[str, int], use_classes: Any, where: str) -> dict[str, int]:
    """The declared classes to segment: ``use_classes`` (a list of declared names), else all.
    UserError naming an unknown name (with the declared ones).

    Args:
        declared: Class name to label value, as declared.
        use_classes: The spec's ``use_classes`` (a list of declared names), or None for all.
        where: The spec, named in the error line.

    Returns:
        The chosen class names to their label values, in declared order.

    Raises:
        UserError: ``use_classes`` is not a non-empty list of names, or names an undeclared class.
    """
    if use_classes is None:
        return dict(declared)
    if (
        isinstance(use_classes, str)
        or not isinstance(use_classes, (list, tuple))
        or not all(isinstance(name, str) for name in use_classes)
        or not use_classes
    ):
        raise UserError(
            f"{where}: use_classes must be a non-empty list of class names, not {use_classes!r}"
        )
    unknown = [name for name in use_classes if name not in declared]
    if unknown:
        raise UserError(
            f"{where}: use_classes names {unknown}, which are not declared classes "
            f"({', '.join(n for n, v in declared.items() if v)})"
        )
    return {name: value for name, value in declared.items() if name in set(use_classes)}


#: the largest label value that :func:`label_values` finds with a table of seen values (one
#: byte per possible value: 1 MiB) rather than by hashing every voxel
_TABLE_VALUES = 1 << 20


def label_values(label: np.ndarray) -> np.ndarray:
    """The distinct values of ``label``, sorted (any shape and dtype).

    Whole non-negative labels up to :data:`_TABLE_VALUES` (every real label map) mark a table
    of seen values: one pass, no sort, 25% faster than pandas' hash and without importing
    pandas (0.25 s of the read-ahead worker's CPU, beside the first forward passes on 2
    cores); anything else (floats, negative or huge values, which the caller rejects) is
    hashed by pandas. ``np.unique`` sorts every voxel: 5x slower on int32 CTs.

    Args:
        label: A label array of any shape and dtype.

    Returns:
        Its distinct values, sorted, in its dtype.
    """
    if label.size and np.issubdtype(label.dtype, np.integer):
        low, high = int(label.min()), int(label.max())
        if low >= 0 and high < _TABLE_VALUES:
            seen = np.zeros(high + 1, dtype=bool)
            seen[label.reshape(-1)] = True
            return np.flatnonzero(seen).astype(label.dtype)
    import pandas as pd  # only here: what the table cannot take

    return np.sort(pd.unique(label.reshape(-1)))


def check_label_values(
    label: np.ndarray, path: Path, classes: dict[str, int] | None, declared_in: str = ""
) -> int:
    """DataError unless every voxel of the ``label`` array is a whole number 0..2^31-1 and, when
    ``classes`` is given, one of its values: a float label would be truncated (1.7 -> 1), a
    64-bit one would wrap, and an undeclared value would silently not be a target.
    Returns the largest value (0 for an empty label), or the largest that an unsigned 8- or
    16-bit label can hold when there is nothing to check (no ``classes``): its values are
    whole and in range by their type, and scanning a CT's label takes a noticeable time.

    Args:
        label: The label map, any shape, as stored.
        path: The label file, named in the error line.
        classes: Class name to label value; None to check only that values are whole and in
            range.
        declared_in: What declared the classes (e.g. "dataset.json labels"), for the message.

    Returns:
        The largest value, as above.

    Raises:
        DataError: A value is fractional, outside 0..2^31-1, or not a declared class's.
    """
    if classes is None and label.dtype in (np.uint8, np.uint16):
        return int(np.iinfo(label.dtype).max)
    values = label_values(label)
    if np.issubdtype(values.dtype, np.floating):
        fractional = values[values != np.round(values)]
        if fractional.size:
            raise DataError(
                f"{path.name}: label values must be whole numbers; found "
                f"{listed([f'{v:g}' for v in fractional], limit=5)}"
            )
    if values.size and (values.min() < 0 or values.max() > np.iinfo(np.int32).max):
        raise DataError(
            f"{path.name}: label values must lie in 0..{np.iinfo(np.int32).max}; "
            f"found {values.min():g}..{values.max():g}"
        )
    if classes is not None:
        declared = set(classes.values()) | {0}
        unknown = [v for v in values.tolist() if int(v) not in declared]
        if unknown:
            listing = ", ".join(f"{k}: {v}" for k, v in classes.items() if v)
            raise DataError(
                f"{path.name}: label values [{listed([int(v) for v in unknown])}] are not "
                f"declared classes ({declared_in or 'classes'}: {listing}); "
                "declare every value the labels hold, and choose the classes to "
                "segment with use_classes"
            )
    return int(values.max()) if values.size else 0


def class_value(value: Any, name: object, where: Path) -> int:
    """A declared class's label value (a folder spec's ``classes``, dataset.json's ``labels``)
    as an int; UserError for a region (a list of values, as nnU-Net's region-based training
    writes), a boolean or a float (``true`` and ``1.7`` would be read as 1, and the class would
    score another's voxels), text, or a value no label file can hold (negative, beyond int32).

    Args:
        value: The declared value, as the file holds it.
        name: The class's name, for the message.
        where: The declaring file, for the message.

    Returns:
        The label value, 0..2^31-1.

    Raises:
        UserError: As above.
    """
    if isinstance(value, (list, tuple)):
        raise UserError(
            f"{where}: label '{name}' is a region {list(value)} (nnU-Net's "
            "region-based training); give each class one label value"
        )
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f" (write {int(value)})" if isinstance(value, float) and value.is_integer() else ""
        raise UserError(
            f"{where}: label '{name}' must be a whole number, not "
            f"{repr(value)[:40]}{hint}: a class value is the integer its voxels "
            "hold in the label files"
        )
    if not 0 <= value <= np.iinfo(np.int32).max:
        raise UserError(
            f"{where}: label '{name}' = {value}: a label value lies in 0..{np.iinfo(np.int32).max}"
        )
    return value


@datasets.register
class NnUNetFolder(Dataset):
    """A folder in nnU-Net v2 layout (imagesTr/, labelsTr/, dataset.json): your own data."""

    name: ClassVar[str] = "nnunet-folder"
    modality: ClassVar[str] = "any"
    description: ClassVar[str] = "your own data: imagesTr/ + labelsTr/ + dataset.json"

    def __init__(
        self,
        path: str,
        target_type: Literal["instance", "organ"] | None = None,
        instances: Literal["connected_components", "values"] | None = None,
        dataset_name: str | None = None,
        use_classes: list[str] | None = None,
        channel: int | str = 0,
    ) -> None:
        """``channel``: which image of a multi-channel dataset (``<case>_0000``,
        ``<case>_0001``, ...) the models see: its number, or its name in ``channel_names``
        (``T2``, ``FLAIR``); default 0. Its name also gives the case's modality."""
        self.root = Path(path).expanduser()
        if not self.root.exists():
            raise UserError(f"dataset folder not found: {self.root}")
        if not self.root.is_dir():
            raise UserError(
                f"{self.root}: not a folder (an nnU-Net dataset is a folder with "
                "imagesTr/, labelsTr/ and dataset.json)"
            )
        if not (self.root / "dataset.json").is_file():
            raise UserError(
                f"{self.root}: no dataset.json (expected nnU-Net layout: "
                "imagesTr/<case>_0000.nii.gz, labelsTr/<case>.nii.gz, dataset.json)"
            )
        try:
            self.meta: dict[str, Any] = json.loads((self.root / "dataset.json").read_text())
        except json.JSONDecodeError as error:
            raise UserError(f"{self.root / 'dataset.json'}: invalid JSON: {error}") from None
        if not isinstance(self.meta, dict):
            raise UserError(
                f"{self.root / 'dataset.json'}: expected a JSON object with "
                f"'labels', got a {type(self.meta).__name__}"
            )
        labels = self.meta.get("labels")
        if not isinstance(labels, dict) or not labels:
            raise UserError(
                f"{self.root / 'dataset.json'}: needs a 'labels' mapping "
                '(e.g. {"background": 0, "lesion": 1})'
            )
        #: every class dataset.json declares (the label values a file may hold), and the
        #: classes whose targets are segmented (``use_classes``, default all)
        self.label_classes = {
            str(k): class_value(v, k, self.root / "dataset.json") for k, v in labels.items()
        }
        self.classes = chosen_classes(
            self.label_classes, use_classes, f"{self.root / 'dataset.json'}"
        )
        types = self.meta.get("target_types", {})
        if not isinstance(types, dict):
            raise UserError(
                f"{self.root / 'dataset.json'}: 'target_types' must map class names "
                'to "instance" or "organ"'
            )
        unknown = sorted(set(types) - set(self.label_classes))
        if unknown:
            raise UserError(
                f"{self.root / 'dataset.json'}: target_types names {unknown}, which "
                f"are not in labels ({', '.join(self.label_classes)})"
            )
        wrong = {k: v for k, v in types.items() if v not in ("instance", "organ")}
        if wrong:
            raise UserError(
                f"{self.root / 'dataset.json'}: target_types {wrong}: each must be "
                '"instance" or "organ"'
            )
        types = dict(types)
        if target_type is not None:
            types = {name: target_type for name in self.classes}
        self.target_types = types
        # prepared recipes store instance ids 1..K and say so with "instance_ids": true
        self.instances = instances or (
            "values" if self.meta.get("instance_ids") else "connected_components"
        )
        foreground = sorted(name for name, value in self.classes.items() if value != 0)
        if self.instances == "values" and len(foreground) != 1:
            raise UserError(
                f"instances: values reads instance ids from the label's values, which "
                f"needs exactly one foreground class; {self.root / 'dataset.json'} "
                f"names {len(foreground)} ({', '.join(foreground)}): use instances: "
                "connected_components"
            )
        self.dataset_name = dataset_name or self.meta.get("name") or self.root.name
        self.channel = resolve_channel(self.meta, channel, self.root / "dataset.json")
        self._modalities = self._declared_modalities()
        self._cases = self._find_cases()

    def _declared_modalities(self) -> tuple[str, dict[str, str]]:
        """(the dataset's modality, per-case exceptions), normalised to 'CT', 'MR' or '':
        the chosen channel's ``channel_names`` entry and the optional ``modalities_per_case``
        mapping."""
        where = self.root / "dataset.json"
        channels = channel_names(self.meta, where)
        per_case = self.meta.get("modalities_per_case", {})
        if not isinstance(per_case, dict):
            raise UserError(f'{where}: modalities_per_case must map case ids to "CT" or "MR"')
        return (
            normalise_modality(channels.get(self.channel)),
            {
                str(case): declared_modality(name, f"{where}: modalities_per_case: {case}")
                for case, name in per_case.items()
            },
        )

    def declared_modality(self, case_id: str) -> str:
        """'CT', 'MR' or '' (undeclared) for ``case_id``, as the dataset declares it."""
        return self.case_modality(case_id)

    def case_modality(self, case_id: str) -> str:
        """'CT', 'MR' or '' (undeclared) for ``case_id`` (see :mod:`intrabench.modality`).

        Args:
            case_id: One of :meth:`case_ids`.

        Returns:
            'CT', 'MR' or ''.
        """
        default, per_case = self._modalities
        return per_case.get(case_id) or default

    def _find_cases(self) -> dict[str, tuple[Path, Path]]:
        images = self.root / "imagesTr"
        labels = self.root / "labelsTr"
        if not images.is_dir() or not labels.is_dir():
            raise UserError(f"{self.root}: expected imagesTr/ and labelsTr/ folders")
        cases: dict[str, tuple[Path, Path]] = {}
        for label_path in sorted(labels.iterdir()):
            parsed = _strip_suffix(label_path.name)
            if parsed is None or label_path.name.startswith("."):
                continue
            case_id, suffix = parsed
            cases[case_id] = (images / f"{case_id}_{self.channel:04d}{suffix}", label_path)
        return cases

    def case_ids(self) -> list[str]:
        """The identifiers of the cases with an image and a label, sorted."""
        return sorted(self._cases)

    def load(self, case_id: str) -> Case:
        """Read one case into canonical (z, y, x) orientation.

        Raises:
            DataError: The image or label cannot be read or they do not match.
        """
        image_path, label_path = self._cases[case_id]
        return load_pair(
            self.dataset_name,
            case_id,
            image_path,
            label_path,
            self.classes,
            self.target_types,
            self.instances,
            modality=self.case_modality(case_id),
            label_classes=self.label_classes,
            declared_in="dataset.json's labels",
        )


def load_pair(
    dataset_name: str,
    case_id: str,
    image_path: Path,
    label_path: Path,
    classes: dict[str, int],
    target_types: dict[str, str],
    instances: str = "connected_components",
    modality: str = "",
    label_classes: dict[str, int] | None = None,
    declared_in: str = "",
) -> Case:
    """Read an image and its label map (same grid required) into a Case with targets.

    One rule for every dataset that declares its classes (a folder spec's ``classes``,
    nnU-Net's dataset.json ``labels``): every non-zero label value must be a declared class
    (``label_classes``, default ``classes``; an undeclared value is a mistake until said
    otherwise, not silently background), and targets are made of ``classes`` (the chosen
    subset: ``use_classes``). ``declared_in`` names the declaration in the message.
    ``modality``: 'CT', 'MR' or '' (undeclared), handed to the models with the image.

    Args:
        dataset_name: The dataset's key, stored on the case.
        case_id: The case's id.
        image_path: The image file (NIfTI, NRRD, ... as SimpleITK reads it).
        label_path: The label file, on the image's grid.
        classes: Class name to label value: the classes to make targets of.
        target_types: Class name to "organ" or "instance".
        instances: "connected_components" or "values" (see :func:`build_targets`).
        modality: 'CT', 'MR' or ''.
        label_classes: Every declared class (name to value), for the value check; None:
            ``classes``.
        declared_in: What declared the classes, for the messages.

    Returns:
        The case: canonical (z, y, x) float32 image with spacing in mm, target map and targets.

    Raises:
        DataError: A file cannot be read, the grids differ, a label value is not declared, or
            no target is found.
    """
    return case_from_raw(
        dataset_name,
        case_id,
        read_image(image_path),
        read_image(label_path),
        classes,
        target_types,
        instances,
        modality=modality,
        label_classes=label_classes,
        declared_in=declared_in,
        image_path=image_path,
        label_path=label_path,
    )


def case_from_raw(
    dataset_name: str,
    case_id: str,
    raw_image: Any,
    raw_label: Any,
    classes: dict[str, int],
    target_types: dict[str, str],
    instances: str = "connected_components",
    modality: str = "",
    label_classes: dict[str, int] | None = None,
    declared_in: str = "",
    *,
    image_path: Path,
    label_path: Path,
) -> Case:
    """:func:`load_pair` for an image and label already read (``RawImage``; a DICOM series
    and its RTSTRUCT or SEG painted as a label map): the same checks and targets.

    Args:
        dataset_name: The dataset's key, stored on the case.
        case_id: The case's id.
        raw_image: The image as read (``RawImage``); given away (its array becomes the volume's).
        raw_label: The label map as read (``RawImage``) on the image's grid; given away too.
        classes: Class name to label value: the classes to make targets of.
        target_types: Class name to "organ" or "instance".
        instances: "connected_components" or "values" (see :func:`build_targets`).
        modality: 'CT', 'MR' or ''.
        label_classes: Every declared class (name to value), for the value check; None:
            ``classes``.
        declared_in: What declared the classes, for the messages.
        image_path: The image's file (or series), named in messages.
        label_path: The label's file, named in messages.

    Returns:
        The case, as :func:`load_pair` returns it.

    Raises:
        DataError: As for :func:`load_pair`.
    """
    strict = instances != "values"
    declared = label_classes if label_classes is not None else classes
    largest = check_label_values(
        raw_label.array, label_path, declared if strict else None, declared_in
    )
    image = volume_from_raw(raw_image, name=str(image_path)).with_modality(modality)
    label = volume_from_raw(raw_label, name=str(label_path), dtype=smallest_label_dtype(largest))
    del raw_image, raw_label  # given away: their arrays are the volumes' now
    if not image.geometry.same_grid(label.geometry):
        raise DataError(
            f"{label_path.name}: label grid does not match image grid "
            f"({grid_difference(label.geometry, image.geometry)}); resample the "
            "label onto the image"
        )
    target_map, targets, boxes = build_targets(label.array, classes, target_types, instances)
    if not targets:
        present = label_values(label.array)
        present = [int(v) for v in present[present != 0]]
        if not present:
            raise DataError(f"{label_path.name}: the label is empty (no foreground voxels)")
        raise DataError(
            f"{label_path.name}: none of the label's values [{listed(present)}] is a class "
            f"of this dataset ({classes}); fix 'classes' in the dataset spec"
        )
    if len(targets) > MANY_TARGETS:
        log.warning(
            "%s: %s targets (one episode each per configuration and seed): check the "
            "label's instances or use target_type: organ",
            label_path.name,
            f"{len(targets):,}",
        )
    case = Case(dataset_name, case_id, image, target_map, targets)
    if boxes is not None:  # no second pass over the map for the targets' boxes
        case.set_label_boxes(boxes)
    return case


@datasets.register
class DemoReal(NnUNetFolder):
    """Crops of 3 real volumes with expert lesion labels (lung CT, brain MRI, breast MRI)."""

    name: ClassVar[str] = "demo-real"
    modality: ClassVar[str] = "CT, MRI"
    description: ClassVar[str] = (
        "built-in: crops of 3 real volumes with expert lesion labels "
        "(pyradiomics test cases, BSD-3)"
    )

    def __init__(self) -> None:
        import intrabench

        sample = Path(intrabench.__file__).parent / "resources" / "demo_real"
        super().__init__(str(sample), dataset_name="demo-real")
