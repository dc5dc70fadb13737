"""The next case's set-up, computed in a thread while the model predicts on the current case.

A model's ``set_case`` does per-case work that depends on the image alone: SAM-Med3D resamples
the case to 1.5 mm, SegVol normalises its foreground and crops it. Done in the model loop, it
falls between the last forward pass on one case and the first on the next, while a card waits:
for a 3D model with fast forward passes and a few targets a case, a large share of each case
(the figures are in docs/performance.md).

Models whose set-up can be split out implement :meth:`~intrabench.interfaces.Model.prepare_case`
(computed from the image alone, kept for the ``set_case`` of that image). :class:`CaseSetupAhead`
calls it in a thread once the next group's case is read, when the next group uses the same
model and the model computes off the CPU (a CPU model would lose a core to it, as in
:mod:`.model_ahead`). A set-up that fails ahead is dropped: ``set_case`` does the work again
where it always did, and reports what goes wrong there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from intrabench.interfaces import Model

log = logging.getLogger(__name__)


def sets_up_ahead(model: Model) -> bool:
    """Whether ``model``'s class splits its case set-up out (overrides ``prepare_case``)."""
    return type(model).prepare_case is not Model.prepare_case


def prepare_case_quietly(model: Model, image_of: Callable[[], Any]) -> bool:
    """``model.prepare_case(image_of())``; whether it worked. A failure is only logged:
    ``set_case`` does the work again and reports it."""
    try:
        model.prepare_case(image_of())
    except Exception as error:  # noqa: BLE001 - set_case does it again, and reports it
        log.debug(
            "setting up a case ahead for %s failed (%s: %s); left to set_case",
            type(model).__name__,
            type(error).__name__,
            error,
        )
        return False
    return True


class CaseSetupAhead:
    """At most one case set-up in a thread; :meth:`wait` before the model's next ``set_case``."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        #: set-ups started and finished without error (for tests and benchmarks)
        self.started = 0
        self.done = 0

    def start(self, model: Model, image_of: Callable[[], Any]) -> None:
        """``model.prepare_case(image_of())`` in the thread; ``image_of`` may wait for the case
        to be read (a reader's future). Waits for an earlier set-up first."""
        self.wait()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="intrabench-case-setup")
        self.started += 1
        self._pending = self._executor.submit(self._set_up, model, image_of)

    def _set_up(self, model: Model, image_of: Callable[[], Any]) -> None:
        if prepare_case_quietly(model, image_of):
            self.done += 1

    def wait(self) -> None:
        """Wait for the set-up in flight, if any."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        """Wait for the set-up in flight and stop the thread."""
        self.wait()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
