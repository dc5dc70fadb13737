"""The run's next model, built in a thread while the current model's last group runs.

A run goes model by model (one model in memory). Between the last forward pass of one model and
the first of the next, the model loop builds the next one: imports (SegVol's MONAI), the
network, its weights, the move to the device. On a GPU node the card waits all that time (the
figures are in docs/performance.md). :class:`NextModel` builds it beside the current model's last
group instead, when the machine has room for both:

* both models compute off the CPU (:meth:`~intrabench.interfaces.Model.forward_frees_cpu`): the
  loop's core waits for the card anyway; CPU models would lose their cores to the build;
* and a CUDA device already in use has at least :data:`FREE_SHARE` of its memory free, since
  the next model's weights arrive there while the current model still holds its own.

The model then sets up its first case (``prepare_case``, :mod:`.case_ahead`) when that case is
in memory or being read. A build that fails here is dropped in silence: the runner builds the
model again where it is used, and reports the failure there, once, as it did before.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from intrabench import registry
from intrabench.execution._case_ahead import prepare_case_quietly, sets_up_ahead
from intrabench.serving.building import build_model

log = logging.getLogger(__name__)

#: a CUDA device in use must have this share of its memory free for the next model to be built
#: beside the current one
FREE_SHARE = 0.5


def device_memory_free_share() -> float | None:
    """The free share of the current CUDA device's memory, or None when this process uses no
    CUDA device (torch not imported, or CUDA not initialised)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    free, total = torch.cuda.mem_get_info()
    return free / total if total else None


def room_for_both(current: Any, following: Any) -> bool:
    """Whether the model of spec ``following`` may be built while the model of ``current``
    computes (see the module's docstring)."""
    for spec in (current, following):
        if not registry.models.get(spec.name).forward_frees_cpu(spec.build_params):
            return False
    share = device_memory_free_share()
    return share is None or share >= FREE_SHARE


class NextModel:
    """At most one model being built ahead, by key; :meth:`take` hands it over."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._pending: tuple[str, Future] | None = None

    def start(self, spec: Any, image_of: Callable[[], Any] | None = None) -> None:
        """Build the model of ``spec`` (a ComponentSpec) and ``prepare`` it in a thread,
        replacing any model built ahead before and not taken; then, with ``image_of`` (a
        function giving the image of the model's first case), set that case up
        (``prepare_case``, see :mod:`.case_ahead`)."""
        self.discard()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="intrabench-next-model")
        self._pending = (spec.key, self._executor.submit(_built, spec, image_of))

    @property
    def key(self) -> str | None:
        """The key of the model being built ahead, if any."""
        return self._pending[0] if self._pending is not None else None

    def take(self, key: str) -> Any | None:
        """The model of ``key``, prepared, once its build ends (waits for it); None when it is
        not the one built ahead, or its build failed."""
        if self._pending is None or self._pending[0] != key:
            return None
        future = self._pending[1]
        self._pending = None
        return future.result()

    def discard(self) -> None:
        """Drop a model built ahead and not taken (its build, if running, ends first)."""
        if self._pending is not None:
            _, future = self._pending
            self._pending = None
            future.cancel() or future.result()

    def close(self) -> None:
        """Drop what was built ahead and stop the thread."""
        self.discard()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _built(spec: Any, image_of: Callable[[], Any] | None = None) -> Any | None:
    """The model of ``spec``, built and prepared, or None if that failed (left for its use);
    its first case set up when ``image_of`` gives its image (a failure there is left to the
    model's ``set_case``)."""
    try:
        model = build_model(spec)
        model.prepare()
    except Exception as error:  # noqa: BLE001 - reported where the model is used
        log.debug(
            "building model '%s' ahead failed (%s: %s); left for its first use",
            spec.key,
            type(error).__name__,
            error,
        )
        return None
    if image_of is not None and sets_up_ahead(model):
        prepare_case_quietly(model, image_of)
    return model
