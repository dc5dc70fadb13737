"""The host's side of a served model: a :class:`~intrabench.interfaces.Model` whose forward
passes run in a model server (:mod:`intrabench.serving.server`) in another process,
environment, container or machine.

The image goes to the server once per case; a prediction comes back as its mask's bounding
box and packed bits, while its feedback (logits) stays on the server under a handle that the
next refinement step passes back. A server that dies, hangs or answers garbage fails the call
in one line (:class:`~intrabench.serving.connection.ModelServerError`): the engine fails that
unit and goes on, and the next call starts a new server (or connects again) and sends the case
again, so only the units that were in flight are lost, and a rerun of the same command redoes
them.
"""

from __future__ import annotations

import shutil
import threading
import weakref
from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import Model
from intrabench.io.volume import Volume
from intrabench.masks import with_box
from intrabench.serving.connection import ModelServerError, ServerConnection
from intrabench.serving.protocol import (
    prompt_to_wire,
    slice_prompt_to_wire,
    unpack_mask,
    volume_header,
)
from intrabench.serving.spec import RunsIn
from intrabench.types import Prediction, Prompt, SlicePrompt


class ServedHandle:
    """A prediction kept on the server (``Prediction.feedback`` of a served model): its
    handle and the server session (``generation``) it belongs to. When the host drops it, the
    server is told to drop the prediction too (with the next request)."""

    __slots__ = ("generation", "handle", "__weakref__")

    def __init__(self, generation: int, handle: int, released: list[tuple[int, int]] | None):
        self.generation = generation
        self.handle = handle
        if released is not None:
            weakref.finalize(self, released.append, (generation, handle))

    def __reduce__(self):  # a copy (pickled to a worker) does not release the original
        return (ServedHandle, (self.generation, self.handle, None))


class ServedModel(Model):
    """A model served elsewhere. Subclasses made by :func:`served_class` carry the served
    model's facts (``name``, ``dimension``, ``accepts``, ``licence``) as class attributes."""

    name: ClassVar[str] = ""
    served_facts: ClassVar[dict[str, Any]] = {}

    def __init__(self, params: dict[str, Any], runs_in: RunsIn) -> None:
        self.params = dict(params)
        self.runs_in = runs_in
        self._connection: ServerConnection | None = None
        self._generation = 0
        self._lock = threading.Lock()  # prepare() runs in the runner's build thread
        self._image: Volume | None = None
        self._image_sent = False
        self._target_class: str | None = None
        self._seconds = 0.0
        self._released: list[tuple[int, int]] = []
        self._closer = weakref.finalize(self, _close, [None])

    # -- the connection -----------------------------------------------------------------
    def _connected(self) -> ServerConnection:
        with self._lock:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if connection is not None:
                connection.close(kill=True)
            self._generation += 1
            self._released.clear()
            self._image_sent = False
            self._connection = ServerConnection(self.name, self.params, self.runs_in)
            self._closer.detach()
            self._closer = weakref.finalize(self, _close, [self._connection])
            return self._connection

    def _request(
        self,
        header: dict[str, Any],
        arrays: dict[str, np.ndarray] | None = None,
        max_payload: int | None = None,
    ) -> Any:
        connection = self._connected()
        if not self._image_sent and header["op"] != "hello" and self._image is not None:
            self._send_case(connection)
        return connection.request(header, arrays, max_payload=max_payload)

    def _send_case(self, connection: ServerConnection) -> None:
        image = self._image
        assert image is not None
        header: dict[str, Any] = {"op": "set_case", **volume_header(image)}
        if self.runs_in.transfers_files():
            path = connection.folder / f"case-{self._generation}.npy"
            np.save(path, np.ascontiguousarray(image.array), allow_pickle=False)
            try:
                connection.request({**header, "path": str(path)})
            finally:
                path.unlink(missing_ok=True)
        else:
            connection.request(header, {"image": image.array})
        self._image_sent = True

    def close(self) -> None:
        """Stop the server (or leave a URL's server) now; it is also stopped when the model is
        dropped or the interpreter exits."""
        self._closer()

    # -- the Model protocol ---------------------------------------------------------------
    def prepare(self) -> None:
        """Start the server and build the model there (the hello waits for it)."""
        self._connected()

    def set_case(self, image: Volume) -> None:
        """Send the case's image to the server (once per image)."""
        if image is self._image and self._image_sent:
            return
        self._image = image
        self._image_sent = False
        self._send_case(self._connected())

    def set_target_class(self, class_name: str) -> None:
        """The class of the next target, sent with each prediction request."""
        self._target_class = class_name

    def predict(
        self,
        prompt: Prompt,
        previous: Prediction | None = None,
        update_slices: list[int] | None = None,
    ) -> Prediction:
        """The served model's prediction for ``prompt``, through the connection.

        Args:
            prompt: The interactions so far, in canonical (z, y, x) voxels.
            previous: The previous prediction, whose feedback stays on the server (sent as a
                handle).
            update_slices: For 2D models, the slices to predict again (None: all prompted).

        Raises:
            RuntimeError: :meth:`set_case` was not called.
        """
        if self._image is None:
            raise RuntimeError(f"{self.name}: set_case() was not called")
        connection = self._connected()
        handle = None
        if previous is not None:
            feedback = previous.feedback
            if not isinstance(feedback, ServedHandle) or feedback.generation != self._generation:
                raise ModelServerError(
                    f"model server of '{self.name}' was restarted since the "
                    "prediction this step refines; the episode cannot go on"
                )
            handle = feedback.handle
        released = [h for g, h in self._drain_released() if g == self._generation]
        header = {
            "op": "predict",
            "prompt": prompt_to_wire(prompt),
            "previous": handle,
            "update_slices": None if update_slices is None else [int(z) for z in update_slices],
            "target_class": self._target_class,
            "release": released,
        }
        shape = self._image.shape
        answer, arrays = self._request(header, max_payload=_mask_bytes(shape))
        mask, box = self._mask(answer, arrays, shape)
        self._seconds += _seconds(answer)
        generation = self._generation if connection is self._connection else -1
        return Prediction(
            mask=with_box(mask, box),
            feedback=ServedHandle(generation, int(answer["handle"]), self._released),
        )

    def segment_slice(self, prompt: SlicePrompt) -> np.ndarray:
        """One axial slice from a 2D prompt (propagation prompters), computed by the server."""
        if self._image is None:
            raise RuntimeError(f"{self.name}: set_case() was not called")
        shape = self._image.shape[1:]
        answer, arrays = self._request(
            {"op": "segment_slice", **slice_prompt_to_wire(prompt)}, max_payload=_mask_bytes(shape)
        )
        self._seconds += _seconds(answer)
        return self._mask(answer, arrays, shape)[0]

    def model_seconds(self) -> float:
        """Seconds the server's model spent predicting since :meth:`reset_timer`."""
        return self._seconds

    def reset_timer(self) -> None:
        """Set the model-seconds counter to zero."""
        self._seconds = 0.0

    @classmethod
    def forward_frees_cpu(cls, params: dict[str, Any]) -> bool:
        """Whether the served model's forward pass leaves the CPU free, as the server reported."""
        return bool(cls.served_facts.get("forward_frees_cpu", False))

    # -- helpers --------------------------------------------------------------------------
    def _mask(
        self, answer: dict[str, Any], arrays: dict[str, np.ndarray], shape: tuple[int, ...]
    ) -> tuple[np.ndarray, tuple[slice, ...] | None]:
        try:
            return unpack_mask(answer.get("box"), arrays.get("bits", np.zeros(0, np.uint8)), shape)
        except ValueError as error:
            self._connection and self._connection.close(kill=True)
            raise ModelServerError(
                f"model server of '{self.name}' answered a mask that cannot be read: {error}"
            ) from None

    def _drain_released(self) -> list[tuple[int, int]]:
        drained = []
        while self._released:
            drained.append(self._released.pop())
        return drained


def served_class(name: str, facts: dict[str, Any]) -> type[ServedModel]:
    """A :class:`ServedModel` subclass for the model ``name`` with ``facts``.

    Args:
        name: The model's registry name.
        facts: ``dimension`` (2 or 3) and ``accepts`` (prompt kinds), and optionally
            ``licence`` and ``forward_frees_cpu``, from the model's class here
            (:func:`~intrabench.serving.building.model_facts`) or from the server's hello.

    Returns:
        A class named ``Served[<name>]`` with those facts as class attributes, built with
        ``(params, runs_in)``.
    """
    return type(
        f"Served[{name}]",
        (ServedModel,),
        {
            "name": name,
            "dimension": int(facts["dimension"]),
            "accepts": frozenset(str(kind) for kind in facts["accepts"]),
            "licence": str(facts.get("licence", "")),
            "served_facts": dict(facts),
            "__module__": __name__,
        },
    )


def _close(holder: list) -> None:
    connection = holder[0]
    if connection is not None:
        connection.close()
        shutil.rmtree(connection.folder, ignore_errors=True)


def _mask_bytes(shape: tuple[int, ...]) -> int:
    """The most bytes a mask of ``shape`` takes packed (plus slack for the entry's rounding)."""
    return int(np.prod(shape, dtype=np.int64)) // 8 + 64


def _seconds(answer: dict[str, Any]) -> float:
    try:
        seconds = float(answer.get("model_seconds", 0.0))
    except (TypeError, ValueError):
        return 0.0
    return seconds if seconds >= 0 and seconds == seconds and seconds != float("inf") else 0.0
