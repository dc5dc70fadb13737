"""One live session: a person, a case's target and a model running in this process.

The state is the stack of effective interactions, each with the merged prompt and the model's
prediction after it; every change is written to the session log first
(:mod:`intrabench.people.session_log`), so a session reopened from its log continues where it
stopped. Arrays are (z, y, x) on the case's canonical grid; masks are boolean.

The slice the person is shown is encoded ahead on a background thread (:class:`EncodeAhead`),
so that a click waits for the decoder only.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from intrabench.errors import DataError, UserError
from intrabench.people.session_log import (
    SessionWriter,
    check_geometry,
    encode_mask,
    new_header,
    read_session,
)
from intrabench.types import Case, Prediction, Prompt, Target

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")


@dataclass
class Step:
    """An effective interaction: the merged prompt so far and the model's prediction."""

    kind: str
    geometry: dict[str, Any]
    prompt: Prompt
    prediction: Prediction


def encode_ahead(model: Any, z: int) -> None:
    """Have ``model`` encode axial slice ``z`` now (a SAM-family model's embedding, another 2D
    model's ``prepare_slices``); nothing for a model without an encoder.

    Args:
        model: A built model (2D models are encoded; others are left alone).
        z: The axial slice index.
    """
    if getattr(model, "dimension", 3) != 2:
        return
    if hasattr(model, "embedding"):
        model.embedding(int(z))
    elif hasattr(model, "prepare_slices"):
        model.prepare_slices([int(z)])


class EncodeAhead:
    """A daemon thread that encodes the latest slice asked for (older asks are dropped) under
    the session's model lock. Only the shown slice: a neighbour's encode would make a click
    that comes meanwhile wait for it."""

    def __init__(self, model: Any, lock: threading.Lock, depth: int) -> None:
        self._model, self._lock, self._depth = model, lock, depth
        self._wanted: list[int] = []
        self._ready = threading.Condition()
        self.encoded: set[int] = set()
        self.errors: list[str] = []
        threading.Thread(target=self._loop, name="encode-ahead", daemon=True).start()

    def ask(self, z: int) -> None:
        """Ask for slice ``z`` to be encoded next (an older ask not started yet is dropped).

        Args:
            z: The axial slice index.
        """
        with self._ready:
            self._wanted = [z]
            self._ready.notify()

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._wanted:
                    self._ready.wait()
                z = self._wanted.pop(0)
            if not 0 <= z < self._depth or z in self.encoded:
                continue
            try:
                with self._lock:
                    encode_ahead(self._model, z)
                self.encoded.add(z)
            except Exception as error:  # noqa: BLE001 - said on the page, the click retries
                self.errors.append(f"{type(error).__name__}: {error}"[:300])


class LiveSession:
    """A person's session on one target with a live model (see the module's docstring)."""

    def __init__(
        self,
        case: Case,
        target: Target,
        model: Any,
        writer: SessionWriter,
        steps: list[Step] | None = None,
        accepted: bool = False,
    ) -> None:
        self.case, self.target, self.model, self.writer = case, target, model, writer
        self.shape: tuple[int, int, int] = tuple(int(v) for v in case.image.shape)  # type: ignore[assignment]
        self.steps: list[Step] = list(steps or [])
        self.accepted = accepted
        self.lock = threading.Lock()
        self.accepts = frozenset(getattr(model, "accepts", ()))
        self.encoder = EncodeAhead(model, self.lock, self.shape[0])
        self.last_view: dict[str, Any] | None = None

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        out: Path,
        case: Case,
        target: Target,
        model: Any,
        *,
        session_id: str,
        header: dict[str, Any],
    ) -> LiveSession:
        """The session ``session_id`` in ``out/sessions/``: resumed from its log when it exists
        (its header must name the same case, target and model), else started.

        Args:
            out: The session tool's output folder.
            case: The loaded case (the model's case is set to its image).
            target: The target to segment.
            model: The built model.
            session_id: The session's id (letters, digits, ``.``, ``_``, ``-``).
            header: The header of a new log (:func:`session_header`).

        Returns:
            The live session.

        Raises:
            UserError: The id is not a plain name, or the existing log is of another case, target
                or model.
        """
        if not SAFE_NAME.match(session_id):
            raise UserError(
                f"session id {session_id[:80]!r}: use letters, digits, '.', '_' and '-' only"
            )
        path = Path(out) / "sessions" / f"{session_id}.jsonl"
        model.set_case(case.image)
        if not path.exists():
            return cls(case, target, model, SessionWriter.create(path, header))
        old = read_session(path)
        for key in ("dataset", "case_id", "target"):
            if old.header[key] != header[key]:
                raise UserError(
                    f"{path} is a session of {key} {old.header[key]!r}, not {header[key]!r}: "
                    "give another --session"
                )
        if old.header["model"]["name"] != header["model"]["name"]:
            raise UserError(
                f"{path} is a session with model {old.header['model']['name']!r}: "
                "give another --session"
            )
        steps = []
        for event, prompt, mask in zip(
            old.effective_interactions(), _merged(old.prompts()), old.masks()
        ):
            steps.append(Step(event["kind"], event["geometry"], prompt, Prediction(mask)))
        return cls(case, target, model, SessionWriter.resume(path), steps, old.accepted)

    # -- what the page asks --------------------------------------------------------------
    @property
    def mask(self) -> np.ndarray:
        """The current boolean (z, y, x) mask (all False before any interaction)."""
        return self.steps[-1].prediction.mask if self.steps else np.zeros(self.shape, bool)

    def state(self) -> dict[str, Any]:
        """What the page needs to show the session (after a reload too).

        Returns:
            The ids, the model's accepted kinds, the grid (z, y, x) and spacing (mm), the steps so
            far, the current mask (encoded), the last view, the start slice, the slices encoded, the
            default window, and the Dice only when the protocol shows it.
        """
        header = self.writer.header
        return {
            "session_id": header["session_id"],
            "rater": header["rater"],
            "case_id": header["case_id"],
            "target": header["target"],
            "target_class": self.target.class_name,
            "model": header["model"]["name"],
            "accepts": sorted(self.accepts & {"point", "box2d", "box3d", "scribble", "lasso"}),
            "shape": list(self.shape),
            "spacing": [float(v) for v in self.case.image.spacing],
            "step": len(self.steps),
            "accepted": self.accepted,
            "interactions": [{"kind": s.kind, "geometry": s.geometry} for s in self.steps],
            "mask": encode_mask(self.mask),
            "view": self.last_view,
            "start_slice": self.start_slice(),
            "encoded": sorted(self.encoder.encoded),
            "window": default_window(self.case.image.array),
            "shows_dice": bool(header["protocol"].get("shows_dice")),
            **(
                {"dice": self._with_dice({})["dice"]}
                if self.steps and header["protocol"].get("shows_dice")
                else {}
            ),
        }

    def start_slice(self) -> int:
        """The slice the page opens on: through the target's centre (which target is meant;
        its outline is never shown), the middle slice when the case lacks it.

        Returns:
            A z index.
        """
        box = self.case.target_box(self.target)
        return self.shape[0] // 2 if box is None else (box[0].start + box[0].stop - 1) // 2

    def slice_bytes(self, z: int) -> bytes:
        """Axial slice ``z`` of the image as little-endian float32 (y, x), C order.

        Args:
            z: The axial slice index.

        Returns:
            The slice's y * x float32 values (4 bytes each), rows of constant y.

        Raises:
            DataError: ``z`` is off the grid.
        """
        if not 0 <= z < self.shape[0]:
            raise DataError(f"slice {z} is off the grid (0 to {self.shape[0] - 1})")
        return np.ascontiguousarray(self.case.image.array[z], dtype="<f4").tobytes()

    def view(self, z: int, window: tuple[float, float], shown_ago: float = 0.0) -> None:
        """The page shows slice ``z`` in ``window`` (level, width): logged, and encoded ahead.

        Args:
            z: The axial slice index.
            window: ``(level, width)`` in the image's units.
            shown_ago: Seconds since the page showed it (at most 60 counted).

        Raises:
            DataError: ``z`` is not a slice of the grid, or ``window`` not [level, width]
                with a positive width.
        """
        if not isinstance(z, int) or isinstance(z, bool) or not 0 <= z < self.shape[0]:
            raise DataError(f"slice {z!r} is off the grid (0 to {self.shape[0] - 1})")
        level, width = _window(window)
        self.encoder.ask(z)
        event = self.writer.view(z, (level, width), t=self._ago(shown_ago))
        self.last_view = {"slice": z, "window": [level, width], "t": event["t"]}

    def interact(
        self, kind: str, geometry: dict[str, Any], shown_ago: float | None, ago: float = 0.0
    ) -> dict[str, Any]:
        """Run the model on the prompt so far plus this interaction; log it; the new mask.

        Args:
            kind: One of the interaction kinds (``point``, ``box2d``, ``box3d``, ``scribble``,
                ``lasso``).
            geometry: The interaction's geometry in voxel indices.
            shown_ago: Seconds since the previous mask appeared; None: unknown.
            ago: Seconds since the person made it (at most 60 counted).

        Returns:
            ``step``, ``latency_s`` (the model's seconds) and the encoded ``mask``; ``dice``
            too when the protocol shows it.

        Raises:
            UserError: The mask is accepted already, or the model does not take ``kind``.
            DataError: The geometry is not a ``kind``'s or is off the grid.
        """
        if self.accepted:
            raise UserError("this session's mask is accepted; start another session to go on")
        new = check_geometry(kind, geometry, self.shape)
        takes = {kind, "point"} if kind == "scribble" else {kind}  # voxels as points
        if not takes & self.accepts:
            raise UserError(
                f"{self.writer.header['model']['name']} does not take a {kind}; it takes "
                + ", ".join(sorted(self.accepts - {"mask"}))
            )
        t = self._ago(ago)
        shown_at = None if shown_ago is None else self._ago(shown_ago)
        with self.lock:
            started = time.perf_counter()
            prompt, prediction = self._predict(new)
            latency = time.perf_counter() - started
        event = self.writer.interaction(
            kind, geometry, prediction.mask, latency_s=latency, shown_at=shown_at, t=t
        )
        self.steps.append(Step(kind, geometry, prompt, prediction))
        done = {"step": len(self.steps), "latency_s": event["latency_s"], "mask": event["mask"]}
        return self._with_dice(done)

    def undo(self) -> dict[str, Any]:
        """Undo the last interaction and log it.

        Returns:
            The page's reply: the step count and the mask after the undo.

        Raises:
            UserError: The session is accepted, or has nothing to undo.
        """
        if self.accepted:
            raise UserError("this session's mask is accepted; start another session to go on")
        if not self.steps:
            raise UserError("nothing to undo")
        self.writer.undo()
        self.steps.pop()
        return self._with_dice({"step": len(self.steps), "mask": encode_mask(self.mask)})

    def accept(self) -> dict[str, Any]:
        """Accept the current mask and log it (once; accepting again changes nothing).

        Returns:
            The page's reply: the step count and ``accepted``.

        Raises:
            UserError: No interaction was made yet.
        """
        if not self.steps:
            raise UserError("nothing to accept yet: make an interaction first")
        if not self.accepted:
            self.writer.accept()
            self.accepted = True
        return {"step": len(self.steps), "accepted": True}

    def _with_dice(self, answer: dict[str, Any]) -> dict[str, Any]:
        """``answer`` with the current mask's Dice against the reference, only when the
        session's protocol shows it (``shows_dice``); never otherwise."""
        if self.writer.header["protocol"].get("shows_dice"):
            from intrabench.evaluation.metrics import dice

            reference = np.asarray(self.case.label) == self.target.label_value
            answer["dice"] = round(float(dice(self.mask, reference)), 4)
        return answer

    # -- the model -----------------------------------------------------------------------
    def _predict(self, new: Prompt) -> tuple[Prompt, Prediction]:
        previous = self.steps[-1] if self.steps else None
        prompt = new if previous is None else previous.prompt.merged_with(new)
        refine = previous is not None and "mask" in self.accepts
        if getattr(self.model, "dimension", 3) == 2:
            kept = None
            if previous is not None:
                feedback = previous.prediction.feedback if refine else None
                kept = Prediction(previous.prediction.mask, feedback)
            update = new.slices() if previous is not None else None
            prediction = self.model.predict(prompt, kept, update_slices=update)
        else:
            prediction = self.model.predict(prompt, previous.prediction if refine else None)
        mask = np.asarray(prediction.mask, dtype=bool)
        if mask.shape != self.shape:
            raise DataError(f"the model returned a mask of shape {mask.shape}, not {self.shape}")
        return prompt, Prediction(mask, prediction.feedback)

    def _ago(self, seconds: float) -> float:
        """The session's t ``seconds`` ago (what the page measured), never before 0."""
        seconds = float(seconds) if _finite(seconds) else 0.0
        return max(0.0, self.writer.now() - min(max(seconds, 0.0), 60.0))


def _merged(prompts: list[Prompt]) -> list[Prompt]:
    out: list[Prompt] = []
    for prompt in prompts:
        out.append(prompt if not out else out[-1].merged_with(prompt))
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)


def _window(window: Any) -> tuple[float, float]:
    if (
        not isinstance(window, (list, tuple))
        or len(window) != 2
        or not all(map(_finite, window))
        or window[1] <= 0
    ):
        raise DataError("window is not [level, width] with a positive width")
    return float(window[0]), float(window[1])


def default_window(image: np.ndarray) -> list[float]:
    """[level, width] spanning the image's 0.5th to 99.5th percentile.

    Args:
        image: The case's image, canonical (z, y, x) (every 16th-or-so slice is sampled).

    Returns:
        ``[level, width]`` in the image's units, rounded to 3 decimals.
    """
    sample = np.asarray(image)[:: max(1, image.shape[0] // 16)]
    low, high = np.percentile(sample, [0.5, 99.5])
    width = float(max(high - low, 1e-3))
    return [round(float(low) + width / 2, 3), round(width, 3)]


def session_header(
    session_id: str,
    rater: str,
    dataset: str,
    case: Case,
    target: Target,
    model: str,
    params: dict[str, Any],
    dataset_params: dict[str, Any],
    shows_dice: bool = False,
) -> dict[str, Any]:
    """The log header of a session on ``case``'s ``target`` (dataset parameters kept so that
    the import reads the same case).

    Args:
        session_id: The session's id.
        rater: The person's name.
        dataset: The dataset's key.
        case: The loaded case (its id, grid and spacing are recorded).
        target: The target.
        model: The model's registered name.
        params: The model's parameters.
        dataset_params: The dataset's parameters (recorded when not empty).
        shows_dice: Whether the page shows the Dice of each mask.

    Returns:
        The header (:func:`~intrabench.people.session_log.new_header`'s, with
        ``dataset_params``).
    """
    header = new_header(
        session_id=session_id,
        rater=rater,
        dataset=dataset,
        case_id=case.case_id,
        target=target.target_id,
        shape=tuple(case.image.shape),
        spacing=tuple(case.image.spacing),
        model=model,
        params=params,
        shows_dice=shows_dice,
    )
    if dataset_params:
        header["dataset_params"] = dict(dataset_params)
    return header
