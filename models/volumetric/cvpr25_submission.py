"""A CVPR 2025 interactive-challenge submission as a model (``cvpr25-submission``).

The challenge ("Foundation Models for Interactive 3D Biomedical Image Segmentation") ran each
team's container once per interaction step: its ``predict.sh`` reads every ``.npz`` in
``/workspace/inputs`` and writes one ``.npz`` of the same name, holding ``segs``, into
``/workspace/outputs``. It keeps nothing between runs; the previous step's mask comes back as
``prev_pred``. This adapter is that contract, so any submission image (or a ``predict.sh``
outside a container) is benchmarked with every IntraBench protocol.

Per forward pass one file ``case.npz`` is written with:

* ``imgs``: the image, (z, y, x), its own dtype; ``spacing``: mm, (z, y, x);
* ``boxes``: ``[{z_min, z_max, z_mid, z_mid_x_min, z_mid_y_min, z_mid_x_max, z_mid_y_max}]``
  from the prompt's 3D box (``z_mid`` is the box's middle slice: a 3D box does not keep the
  challenge's median slice), absent when the prompt has no box;
* ``clicks``: ``[{"fg": [[z, y, x], ...], "bg": [...]}]`` (every click of the prompt; scribble
  voxels count as clicks) and ``clicks_order``: ``[["fg", "bg", ...]]`` in the user's order;
* ``prev_pred``: the previous step's mask as uint8 (1 = the target), zeros at the first step.

One target is one class (class 1); ``segs == 1`` is the prediction. ``command`` is run with
``{inputs}`` and ``{outputs}`` replaced by the step's folders (they are also in the
environment as INPUTS and OUTPUTS), e.g.::

    command: docker run --rm --gpus all -v {inputs}:/workspace/inputs
             -v {outputs}:/workspace/outputs team:latest /bin/bash -c "sh predict.sh"

The start-up of the command (a run on an empty inputs folder, measured once when the model is
built) is reported apart, and is taken out of each step's model time: what remains is the
per-interaction latency (``model_seconds``).
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import Model
from intrabench.io.volume import Volume
from intrabench.masks import bounding_box
from intrabench.registry import models
from intrabench.types import Prediction, Prompt

log = logging.getLogger(__name__)


class SubmissionError(RuntimeError):
    """The submission's command failed, timed out, or wrote no usable ``segs``."""


@models.register
class Cvpr25Submission(Model):
    """A command (a container run, a ``predict.sh``) following the CVPR 2025 interactive
    challenge's npz contract, run once per forward pass."""

    name: ClassVar[str] = "cvpr25-submission"
    dimension: ClassVar[int] = 3
    accepts: ClassVar[frozenset[str]] = frozenset({"box3d", "point", "scribble", "mask"})
    licence: ClassVar[str] = "the submission's own"

    def __init__(
        self,
        command: list[str] | str,
        timeout_s: float = 600.0,
        measure_startup: bool = True,
        case_name: str = "case",
    ) -> None:
        words = shlex.split(command) if isinstance(command, str) else [str(w) for w in command]
        if not words:
            raise ValueError("command is empty")
        if not (float(timeout_s) > 0 and np.isfinite(float(timeout_s))):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
        if not case_name or any(c in case_name for c in "/\\\0") or case_name in (".", ".."):
            raise ValueError(f"case_name {case_name!r} must be one plain file name")
        self.command = words
        self.timeout_s = float(timeout_s)
        self.measure_startup = bool(measure_startup)
        self.case_name = case_name
        self.startup_seconds: float | None = None
        self._image: Volume | None = None
        self._seconds = 0.0

    # -- the Model protocol ---------------------------------------------------------------
    def prepare(self) -> None:
        """Measure the command's start-up once: a run on an empty inputs folder."""
        if self.measure_startup and self.startup_seconds is None:
            with tempfile.TemporaryDirectory(prefix="intrabench-cvpr25-") as folder:
                inputs, outputs = _folders(Path(folder))
                self.startup_seconds = self._run(inputs, outputs)
            print(
                f"cvpr25-submission: start-up {self.startup_seconds:.2f} s per run of "
                f"{self.command[0]} (taken out of each step's model time)",
                file=sys.stderr,
            )

    def set_case(self, image: Volume) -> None:
        """Take the case's image (canonical (z, y, x)); it is written for the submission at each
        prediction.
        """
        self._image = image

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """The submission's container's 3D prediction for ``prompt`` on the case of
        :meth:`set_case`.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous step's prediction (its mask and feedback), or None.
            update_slices: Unused by 3D models (2D models predict only these slices again).

        Returns:
            The mask, bool of the image's (z, y, x) shape, with the model's seconds and feedback.

        Raises:
            RuntimeError: :meth:`set_case` was not called.
        """
        if self._image is None:
            raise RuntimeError("cvpr25-submission: set_case() was not called")
        self.prepare()
        image = self._image
        with tempfile.TemporaryDirectory(prefix="intrabench-cvpr25-") as folder:
            inputs, outputs = _folders(Path(folder))
            np.savez_compressed(
                inputs / f"{self.case_name}.npz", **challenge_inputs(image, prompt, previous)
            )
            seconds = self._run(inputs, outputs)
            mask = read_segs(outputs / f"{self.case_name}.npz", image.shape)
        self._seconds += max(0.0, seconds - (self.startup_seconds or 0.0))
        return Prediction(mask=mask, box=bounding_box(mask))

    def model_seconds(self) -> float:
        """Seconds the submission spent predicting since :meth:`reset_timer`."""
        return self._seconds

    def reset_timer(self) -> None:
        """Set the model-seconds counter to zero."""
        self._seconds = 0.0

    # -- running the command --------------------------------------------------------------
    def _run(self, inputs: Path, outputs: Path) -> float:
        command = [
            word.replace("{inputs}", str(inputs)).replace("{outputs}", str(outputs))
            for word in self.command
        ]
        env = {**os.environ, "INPUTS": str(inputs), "OUTPUTS": str(outputs)}
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                env=env,
                capture_output=True,
                timeout=self.timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise SubmissionError(f"cvpr25-submission: command not found: {command[0]}") from None
        except subprocess.TimeoutExpired:
            raise SubmissionError(
                f"cvpr25-submission: {command[0]} did not finish within "
                f"{self.timeout_s:g} s (timeout_s)"
            ) from None
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            last = _last_line(done.stderr) or _last_line(done.stdout)
            raise SubmissionError(
                f"cvpr25-submission: {command[0]} exited with code "
                f"{done.returncode}" + (f": {last}" if last else "")
            )
        return seconds


def challenge_inputs(image: Volume, prompt: Prompt, previous: Prediction | None) -> dict[str, Any]:
    """The arrays of one step's input ``.npz`` (see the module's docstring).

    Args:
        image: The case's volume: ``array`` (z, y, x), sent in its own dtype; spacing in mm.
        prompt: The interactions so far, in canonical (z, y, x) voxels.
        previous: The previous step's prediction, or None at the first step (zeros are sent).

    Returns:
        Array name (``imgs``, ``spacing``, ``clicks``, ``clicks_order``, ``prev_pred`` and, with
        a 3D box, ``boxes``) to array, as ``np.savez`` takes them.
    """
    points, labels = prompt.model_points()
    order = [("fg" if int(labels[i]) == 1 else "bg") for i in _point_order(prompt, len(points))]
    clicks = {
        "fg": points[labels == 1].astype(np.int64).tolist(),
        "bg": points[labels == 0].astype(np.int64).tolist(),
    }
    prev = (
        np.asarray(previous.mask, dtype=np.uint8)
        if previous is not None
        else np.zeros(image.shape, dtype=np.uint8)
    )
    arrays: dict[str, Any] = {
        "imgs": np.asarray(image.array),
        "spacing": np.asarray(image.spacing, dtype=np.float64),
        "clicks": np.array([clicks], dtype=object),
        "clicks_order": np.array([order], dtype=object),
        "prev_pred": prev,
    }
    box = prompt.box3d
    if box is not None:
        arrays["boxes"] = np.array(
            [
                {
                    "z_min": box.z_min,
                    "z_max": box.z_max,
                    "z_mid": (box.z_min + box.z_max) // 2,
                    "z_mid_x_min": box.x_min,
                    "z_mid_y_min": box.y_min,
                    "z_mid_x_max": box.x_max,
                    "z_mid_y_max": box.y_max,
                }
            ],
            dtype=object,
        )
    return arrays


def _point_order(prompt: Prompt, n_points: int) -> list[int]:
    """Indices into ``prompt.model_points()`` in the user's order: clicks by their place in
    the element order, each scribble's voxels where the scribble stands."""
    starts, count = {}, len(prompt.points)
    for index, scribble in enumerate(prompt.scribbles):
        starts[index] = count
        count += len(np.asarray(scribble.points).reshape(-1, 3))
    order: list[int] = []
    for kind, key in prompt.element_order():
        if kind == "point":
            order.append(int(key))
        elif kind == "scribble":
            size = len(np.asarray(prompt.scribbles[key].points).reshape(-1, 3))
            order.extend(range(starts[key], starts[key] + size))
    return order[:n_points]


def read_segs(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """Class 1 of the ``segs`` array in ``path``: a boolean (z, y, x) mask of ``shape``.

    Args:
        path: The ``.npz`` the submission wrote.
        shape: The image's (z, y, x) shape.

    Returns:
        Bool (z, y, x) mask, C-contiguous.

    Raises:
        SubmissionError: The file is missing or unreadable, has no ``segs``, or ``segs`` is not
            an integer map of ``shape``.
    """
    if not path.is_file():
        raise SubmissionError(
            f"cvpr25-submission: the command wrote no {path.name} into the outputs folder"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            if "segs" not in data.files:
                raise SubmissionError(
                    f"cvpr25-submission: {path.name} has no 'segs' (it has "
                    f"{', '.join(data.files[:8]) or 'nothing'})"
                )
            segs = data["segs"]
    except (OSError, ValueError) as error:
        raise SubmissionError(f"cvpr25-submission: {path.name} cannot be read ({error})") from None
    if segs.shape != tuple(shape) or segs.dtype.kind not in "biu":
        raise SubmissionError(
            f"cvpr25-submission: 'segs' is {segs.dtype} of shape "
            f"{segs.shape}; the image is {tuple(shape)} (an integer label map)"
        )
    return np.ascontiguousarray(segs == 1)


def _folders(root: Path) -> tuple[Path, Path]:
    inputs, outputs = root / "inputs", root / "outputs"
    inputs.mkdir()
    outputs.mkdir()
    os.chmod(outputs, 0o777)  # a container's user may be another than ours
    return inputs, outputs


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
