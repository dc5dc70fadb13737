"""Target attributes computed once per case and kept with the dataset, not with a run.

Files live under ``$INTRABENCH_CACHE/attributes`` (default ``~/.cache/intrabench``), one JSON
file per case::

    attributes/<dataset>/<case>-<digest>.json

The digest is a hash of what the attributes are a function of: the label map, the image, the
voxel spacing, the targets and :data:`intrabench.attributes.compute.VERSION`. A changed image or
label, or a new definition, gets a new file, never a stale value; any run that reads the same
case (another model, another config) reuses the file. Files are written atomically; an
unreadable one is computed again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from intrabench.attributes.compute import VERSION, case_attributes
from intrabench.io.cache import cache_root
from intrabench.io.run_paths import safe_file_name
from intrabench.types import Case

log = logging.getLogger(__name__)


def _digest(case: Case, modality: str) -> str:
    # SHA-256: twice BLAKE2b's speed on CPUs with SHA instructions (x86 since 2017's Zen and
    # 2019's Ice Lake, ARMv8 with its crypto extension): hashing a CT case is in every read
    hasher = hashlib.sha256()
    header = {
        "version": VERSION,
        "modality": modality,
        "spacing": list(case.image.spacing),
        "shape": list(np.shape(case.label)),
        "label_dtype": str(np.asarray(case.label).dtype),
        "targets": [[t.target_id, int(t.label_value)] for t in case.targets],
    }
    hasher.update(json.dumps(header, sort_keys=True).encode())
    for array in (case.label, case.image.array):
        hasher.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
    return hasher.hexdigest()[:32]


def cached_case_attributes(
    case: Case, modality: str = "", root: Path | None = None
) -> dict[str, dict[str, Any]]:
    """:func:`~intrabench.attributes.compute.case_attributes` of ``case``, from the cache when
    this exact case was measured before, else computed and stored.

    Args:
        case: The loaded case (image, label map, targets).
        modality: The dataset's modality (e.g. ``"CT"``, ``"MR"``; empty: unknown); part of the
            cache key, as the body mask depends on it.
        root: The cache root; the files go under its ``attributes`` folder (None:
            :func:`~intrabench.io.cache.cache_root`).

    Returns:
        Target id -> attribute name -> value (plain Python values; missing ones NaN).
    """
    from intrabench.io.results import atomic_write_text

    folder = (root or cache_root()) / "attributes" / safe_file_name(case.dataset)
    path = folder / f"{safe_file_name(case.case_id)}-{_digest(case, modality)}.json"
    try:
        stored = json.loads(path.read_text())
        if isinstance(stored, dict) and set(stored) == {t.target_id for t in case.targets}:
            return stored
    except (OSError, ValueError):
        pass
    found = case_attributes(case, modality)
    try:
        atomic_write_text(path, json.dumps(found, indent=1, allow_nan=True))
    except OSError as error:  # a read-only home: measure again next time, say so once
        log.warning("cannot cache target attributes in %s (%s)", folder, error.strerror)
    return found


def case_with_attributes(case: Case, dataset: Any) -> Case:
    """``case`` with its targets' attributes (from the cache, or measured now) in
    ``case.attributes``, unless it has them already; ``dataset`` says the modality (its
    ``modality`` attribute: a body mask is measured on CT only).

    Args:
        case: The loaded case; changed in place.
        dataset: The dataset it came from (any object; only its ``modality`` attribute is read,
            if it has one).

    Returns:
        The same ``case`` object.
    """
    if case.attributes is None:
        case.attributes = cached_case_attributes(case, str(getattr(dataset, "modality", "")))
    return case
