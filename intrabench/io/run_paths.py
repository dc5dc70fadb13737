"""Where a run keeps its files, by name: one module below the engine, the reports, the review
and the attributes, which all use it.

* :func:`path_component_problem`: why a name cannot be one folder or file name (``..``, ``/``,
  control characters...), or None;
* :func:`safe_file_name`: a text as a file-name part (never ``.`` or ``..``; a long one cut
  and told apart by a hash of the whole text);
* :func:`inside_run`: a path proven to lie inside the run folder, before anything writes it;
* :func:`prediction_folder`, :func:`prediction_file_name`, :func:`step_prediction_file_name`:
  ``RUN/predictions/<dataset>/<model>/<prompter>/<refiner>/seed<n>/<case>__<target>.nii.gz``;
* :data:`MASK_KEYS` and :func:`mask_file`: what identifies one step's mask in the results, and
  its saved file.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intrabench.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

#: What identifies one step's mask in the results (and a rated mask in a review's key).
MASK_KEYS = ["run", "dataset", "case", "target", "model", "prompter", "refiner", "seed", "step"]

#: the longest file-name part :func:`safe_file_name` gives by default (folders of the
#: prediction tree); a case's and a target's part get :data:`NAME_PART_LIMIT` each, so that
#: ``<case>__<target>__step<k>.nii.gz`` and its ``.<name>.partial.nii.gz`` while it is written
#: stay under the 255 bytes a file name may have
FOLDER_PART_LIMIT = 120
NAME_PART_LIMIT = 100
#: hex digits of the hash that tells two long names apart
_HASH_DIGITS = 16


def path_component_problem(text: Any) -> str | None:
    r"""Why ``text`` cannot be one folder or file name of its own, or None when it can.

    Refused: empty, ``.`` or ``..``, a ``/`` or ``\``, a NUL or another control or invisible
    formatting character (a right-to-left override shows 'evil' as 'live').

    Args:
        text: A proposed name (a case, target or component id); anything that is not a ``str`` is
            refused.

    Returns:
        A short reason (``"it holds '/', a folder separator"``) to put in a one-line error, or
        None.
    """
    if not isinstance(text, str):
        return f"it is a {type(text).__name__}, not text"
    if not text.strip():
        return "it is empty"
    if text in (".", ".."):
        return f"'{text}' names a folder, not a name of its own"
    for char in text:
        if char in "/\\":
            return f"it holds '{char}', a folder separator"
        if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return f"it holds the control character U+{ord(char):04X}"
    return None


def safe_file_name(text: Any, limit: int = FOLDER_PART_LIMIT) -> str:
    """``text`` as a file-name part: letters, digits and -_.= kept, others as _; never ``.``
    or ``..`` (dots alone become underscores).

    A part longer than ``limit`` keeps its first characters and ends in ``-`` and 16 hex digits of
    the SHA-256 of the whole ``text``, so two long names that share their beginning stay two files.

    Args:
        text: Any value; it is converted with ``str``.
        limit: The most characters of the result (:data:`FOLDER_PART_LIMIT` for folders,
            :data:`NAME_PART_LIMIT` for a case's or a target's part of a file name).

    Returns:
        The file-name part, at most ``limit`` characters, never empty.
    """
    text = str(text)
    part = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in text)
    if not part.strip("."):
        part = "_" * max(len(part), 1)
    if len(part) <= limit:
        return part
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_DIGITS]
    return f"{part[: limit - _HASH_DIGITS - 1]}-{digest}"


def inside_run(run_dir: str | Path, path: str | Path) -> Path:
    """``path``, once proven to lie inside ``run_dir`` (both resolved: ``..`` and links
    followed), so nothing is written outside the run folder.

    Args:
        run_dir: The run folder.
        path: The file or folder about to be written.

    Returns:
        ``path`` unchanged (not resolved), as a :class:`~pathlib.Path`.

    Raises:
        UserError: ``path`` leaves the run folder.
    """
    root = Path(os.path.realpath(run_dir))
    resolved = Path(os.path.realpath(path))
    if resolved != root and root not in resolved.parents:
        raise UserError(
            f"refusing to write {path}: it lies outside the run folder {run_dir} "
            f"(at {resolved}); a name that is a path ('..', '/') or a link out of "
            "the run folder leads there"
        )
    return Path(path)


def prediction_folder(
    run_dir: Path, dataset: str, model: str, prompter: str, refiner: str, seed: int
) -> Path:
    """The folder of one configuration's prediction files (component keys as in the rows; a
    writer proves each file inside the run with :func:`inside_run`).

    Args:
        run_dir: The run folder.
        dataset: The dataset's key, as in the rows' ``dataset`` column.
        model: The model's component key.
        prompter: The prompter's component key.
        refiner: The refiner's component key.
        seed: The seed of the configuration.

    Returns:
        ``run_dir/predictions/<dataset>/<model>/<prompter>/<refiner>/seed<n>``, each part made
        safe with :func:`safe_file_name`.
    """
    parts = [safe_file_name(p) for p in (dataset, model, prompter, refiner, f"seed{seed}")]
    return Path(run_dir).joinpath("predictions", *parts)


def case_file_prefix(case_id: str) -> str:
    """The start of every prediction file name of ``case_id`` (``<case>__``).

    Args:
        case_id: The case's id, as in the rows' ``case`` column.

    Returns:
        The safe case part followed by two underscores.
    """
    return f"{safe_file_name(case_id, NAME_PART_LIMIT)}__"


def prediction_file_name(case_id: str, target_id: str) -> str:
    """The NIfTI file name of one target's saved prediction: the case's prefix and the target id,
    made safe.

    Args:
        case_id: The case's id.
        target_id: The target's id within the case.

    Returns:
        ``<case>__<target>.nii.gz``, both parts made safe.
    """
    return f"{case_file_prefix(case_id)}{safe_file_name(target_id, NAME_PART_LIMIT)}.nii.gz"


def step_prediction_file_name(case_id: str, target_id: str, step: int) -> str:
    """The file of one step's prediction (``save_predictions: all``).

    Args:
        case_id: The case's id.
        target_id: The target's id within the case.
        step: The interaction step (0 for the first prompt).

    Returns:
        ``<case>__<target>__step<k>.nii.gz``, both parts made safe.
    """
    return (
        f"{case_file_prefix(case_id)}{safe_file_name(target_id, NAME_PART_LIMIT)}"
        f"__step{int(step)}.nii.gz"
    )


def mask_file(run_dir: Path, row: pd.Series, final_step: int) -> Path | None:
    """The saved prediction of ``row``'s (configuration, target, step), or None: the final
    step's file (``save_predictions: true``), or a step's own (``save_predictions: all``).

    Args:
        run_dir: The run folder.
        row: One result row, with the :data:`MASK_KEYS` columns.
        final_step: The last step of the episode, whose prediction ``save_predictions: true``
            keeps under the target's own file name.

    Returns:
        The existing file, or None when no prediction of that step was saved.
    """
    folder = prediction_folder(
        run_dir, row["dataset"], row["model"], row["prompter"], row["refiner"], int(row["seed"])
    )
    own = folder / step_prediction_file_name(row["case"], row["target"], int(row["step"]))
    if own.exists():
        return own
    if int(row["step"]) == final_step:
        final = folder / prediction_file_name(row["case"], row["target"])
        if final.exists():
            return final
    return None


def component_key(name: str, params: dict[str, Any], label: str | None = None) -> str:
    """A component's stable identity in results, seeds and unit folders: ``label``, else
    ``name`` with its sorted parameters (``name(a=1,b=x)``), else ``name``.

    Args:
        name: The registered name of the model, prompter or refiner.
        params: Its parameters from the config (empty when none).
        label: The config's ``label`` for it, which replaces the derived key when given.

    Returns:
        The key, as in the rows' ``model``/``prompter``/``refiner`` columns.
    """
    if label:
        return label
    if not params:
        return name
    inner = ",".join(f"{k}={params[k]}" for k in sorted(params))
    return f"{name}({inner})"
