"""Serve one registered model over the model protocol (:mod:`intrabench.serving.protocol`).

``intrabench serve-model NAME`` runs this in the model's own environment: over its standard
input and output (``--stdio``, for a client that starts it as a command, in another virtual
environment or a container), or on a TCP port (``--listen HOST:PORT``, one client at a time,
for a model on another machine). The model is built once and kept for every session.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import sys
import time
from typing import Any

import numpy as np

from intrabench import __version__
from intrabench.errors import DataError, UserError, one_line_cause
from intrabench.interfaces import Model
from intrabench.masks import bounding_box
from intrabench.serving.protocol import (
    PROTOCOL_VERSION,
    pack_mask,
    prompt_from_wire,
    slice_prompt_from_wire,
    volume_from_wire,
)
from intrabench.serving.wire import Channel, WireError
from intrabench.types import Prediction

log = logging.getLogger(__name__)


class _Session:
    """One client's session with the served model: its current image and its predictions."""

    def __init__(self, model: Model, params: dict[str, Any], channel: Channel) -> None:
        self.model = model
        self.params = params
        self.channel = channel
        self.predictions: dict[int, Prediction] = {}
        self.next_handle = 1
        self.shape: tuple[int, ...] | None = None
        self.model_seconds = 0.0

    def run(self) -> None:
        """Answer requests until ``bye`` or the end of the stream."""
        while True:
            try:
                header, arrays = self.channel.receive()
            except WireError as error:
                log.debug("session ended: %s", error)
                return
            op = header.get("op")
            if op == "bye":
                self.channel.send({"ok": True})
                return
            try:
                answer, payload = self.answer(str(op), header, arrays)
            except Exception as error:  # noqa: BLE001 - every failure goes back as one line
                self.channel.send(
                    {"ok": False, "kind": _error_kind(error), "error": one_line_cause(error)}
                )
                continue
            self.channel.send({"ok": True, **answer}, payload)

    def answer(
        self, op: str, header: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if op == "hello":
            return self.hello(header), {}
        if op == "set_case":
            return self.set_case(header, arrays), {}
        if op == "predict":
            return self.predict(header)
        if op == "segment_slice":
            return self.segment_slice(header)
        if op == "release":
            self.release(header.get("release"))
            return {}, {}
        raise ValueError(
            f"unknown op {str(op)[:40]!r} (this server speaks protocol {PROTOCOL_VERSION})"
        )

    def hello(self, header: dict[str, Any]) -> dict[str, Any]:
        asked = header.get("protocol")
        if asked != PROTOCOL_VERSION:
            raise ValueError(
                f"the client speaks model protocol {str(asked)[:20]}, this server "
                f"(IntraBench {__version__}) speaks {PROTOCOL_VERSION}: install "
                "the same IntraBench version on both sides"
            )
        self.model.prepare()
        return {
            "protocol": PROTOCOL_VERSION,
            "model": describe(self.model, self.params),
            "server": _environment(),
        }

    def set_case(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        path = header.get("path")
        if path is not None:
            array = np.load(str(path), allow_pickle=False)
        elif "image" in arrays:
            array = arrays["image"]
        else:
            raise ValueError("set_case: neither an 'image' array nor a 'path'")
        image = volume_from_wire(header, array)
        self.predictions.clear()  # an episode never spans two cases
        self.model.set_case(image)
        self.shape = image.shape
        return {"shape": list(image.shape)}

    def predict(self, header: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self.shape is None:
            raise ValueError("predict before set_case")
        self.release(header.get("release"))
        prompt = prompt_from_wire(header.get("prompt"))
        previous = self._previous(header.get("previous"))
        target_class = header.get("target_class")
        if target_class is not None:
            self.model.set_target_class(str(target_class))
        update = header.get("update_slices")
        self.model.reset_timer()
        started = time.perf_counter()
        if previous is None:
            prediction = self.model.predict(prompt)
        else:
            prediction = self.model.predict(
                prompt,
                previous=previous,
                update_slices=None if update is None else [int(z) for z in update],
            )
        seconds = self.model.model_seconds()
        self.model_seconds = seconds if seconds == seconds else time.perf_counter() - started
        mask = np.asarray(prediction.mask)
        if mask.shape != self.shape or mask.dtype != bool:
            raise ValueError(
                f"the model returned a {mask.dtype} mask of shape {mask.shape} "
                f"for an image of shape {self.shape}"
            )
        handle = self.next_handle
        self.next_handle += 1
        self.predictions[handle] = prediction
        box, bits = pack_mask(mask, bounding_box(mask))
        return ({"handle": handle, "box": box, "model_seconds": self.model_seconds}, {"bits": bits})

    def segment_slice(self, header: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        segment = getattr(self.model, "segment_slice", None)
        if segment is None or self.model.dimension != 2:
            raise ValueError(f"model '{self.model.name}' is not a 2D model")
        prompt = slice_prompt_from_wire(header)
        self.model.reset_timer()
        mask = np.asarray(segment(prompt), dtype=bool)
        seconds = self.model.model_seconds()
        box, bits = pack_mask(mask, bounding_box(mask))
        return {"box": box, "model_seconds": seconds if seconds == seconds else 0.0}, {"bits": bits}

    def _previous(self, handle: Any) -> Prediction | None:
        if handle is None:
            return None
        try:
            return self.predictions[int(handle)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"no prediction {str(handle)[:20]} on this server (it was "
                "restarted, or the prediction was released)"
            ) from None

    def release(self, handles: Any) -> None:
        for handle in handles or []:
            self.predictions.pop(int(handle), None)


def describe(model: Model, params: dict[str, Any]) -> dict[str, Any]:
    """The facts of ``model`` (built with ``params``) a client plans with (``hello``'s
    ``model``).

    Args:
        model: The served model.
        params: The parameters it was built with (the prompt kinds it accepts may depend on
            them).

    Returns:
        ``name``, ``dimension`` (2 or 3), ``accepts`` (sorted prompt kinds), ``licence``,
        ``forward_frees_cpu`` (bool) and ``class`` (its module-qualified class name).
    """
    from intrabench.interfaces import model_accepts

    cls = type(model)
    return {
        "name": cls.name,
        "dimension": int(cls.dimension),
        "accepts": sorted(model_accepts(cls, params)),
        "licence": str(cls.licence),
        "forward_frees_cpu": bool(cls.forward_frees_cpu(params)),
        "class": f"{cls.__module__}.{cls.__qualname__}",
    }


def _environment() -> dict[str, str]:
    versions = {
        "intrabench": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch"] = str(torch.__version__)
    return versions


def _error_kind(error: BaseException) -> str:
    from intrabench.io.checkpoints import CheckpointError

    if isinstance(error, CheckpointError):
        return "checkpoint"
    if isinstance(error, DataError):
        return "data"
    if isinstance(error, UserError):
        return "user"
    return "model"


# -- the ways to serve ------------------------------------------------------------------------
def claim_stdout() -> int:
    """Keep file descriptor 1 for the protocol alone: whatever the model's libraries print
    afterwards goes to standard error. Call before anything that may print (building the
    model).

    Returns:
        A duplicate of the original file descriptor 1, for :func:`serve_stdio`'s
        ``protocol_out``.
    """
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_out


def serve_stdio(model: Model, params: dict[str, Any], protocol_out: int) -> None:
    """One session over standard input and ``protocol_out`` (from :func:`claim_stdout`).

    Returns when the client says ``bye`` or closes the stream.

    Args:
        model: The model, built (the ``hello`` prepares it).
        params: The parameters it was built with (reported in ``hello``).
        protocol_out: The file descriptor answers are written to.
    """
    _Session(model, params, Channel(0, protocol_out, peer="the client")).run()


def serve_tcp(
    model: Model,
    params: dict[str, Any],
    host: str,
    port: int,
    sessions: int | None = None,
    ready: Any = None,
) -> None:
    """Sessions on ``host:port``, one client at a time; the model is kept between them.

    Args:
        model: The model, built.
        params: The parameters it was built with (reported in ``hello``).
        host: The address to listen on (``127.0.0.1``, ``0.0.0.0``...).
        port: The TCP port; 0 picks a free one.
        sessions: Stop after that many sessions; None: serve until interrupted.
        ready: Called once as ``ready(port)`` when listening, with the bound port; None:
            nothing is called.
    """
    with socket.create_server((host, port)) as listener:
        bound = listener.getsockname()[1]
        print(
            f"serving model '{model.name}' on {host}:{bound} (model protocol "
            f"{PROTOCOL_VERSION}); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        if ready is not None:
            ready(bound)
        served = 0
        while sessions is None or served < sessions:
            connection, address = listener.accept()
            with connection:
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                fd = connection.fileno()
                _Session(model, params, Channel(fd, fd, peer=f"the client {address[0]}")).run()
            served += 1
