"""When did a model compute? :func:`timed_forward_passes` records the (start, end) of every
outermost forward pass of the named models' classes (``predict``, and ``segment_slice`` when a
propagation prompter queries a 2D model). Light on purpose (the registry only): a command timed
from its launch (``timed_command.py``) imports nothing here that the command would not."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from intrabench import registry


@contextmanager
def timed_forward_passes(
    model_names: list[str],
    spans: list[tuple[float, float]],
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[None]:
    """Append (start, end) of every outermost forward pass of these models' classes to
    ``spans``, in ``clock``'s seconds (``time.time`` for wall-clock epochs); the classes are
    restored on exit."""
    depth = [0]
    originals = []

    def wrap(cls: type, name: str) -> None:
        original = cls.__dict__.get(name)
        inherited = getattr(cls, name)

        def timed(self, *args, **kwargs):
            depth[0] += 1
            started = clock()
            try:
                return inherited(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spans.append((started, clock()))

        originals.append((cls, name, original))
        setattr(cls, name, timed)

    for model_name in model_names:
        cls = registry.models.get(model_name)
        wrap(cls, "predict")
        if hasattr(cls, "segment_slice"):
            wrap(cls, "segment_slice")
    try:
        yield
    finally:
        for cls, name, original in reversed(originals):
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
