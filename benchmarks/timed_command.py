"""``python benchmarks/timed_command.py MODEL SPANS_FILE ARGS...``: the ``intrabench`` command
(``intrabench.cli.command``, as ``python -m intrabench ARGS...`` runs it) with the wall-clock
time (seconds since the epoch) of the model ``MODEL``'s first forward pass and the end of its
last written to ``SPANS_FILE`` as JSON: ``{"first_forward_at": ..., "last_forward_end": ...,
"forward_passes": N}``. A benchmark that timed the process from its launch splits the command
into its start (before the first forward pass) and its steady state (from there to the exit).

The wrapped methods are the model class's ``predict`` and ``segment_slice`` (a propagation
prompter's queries), outermost calls only, as ``bench_harness.timed_forward_passes`` times them;
only ``intrabench.registry`` is imported before the command, which imports it itself.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    model_name, spans_file, *arguments = sys.argv[1:]
    from intrabench import registry

    spans: list[tuple[float, float]] = []
    depth = [0]
    cls = registry.models.get(model_name)

    def wrapped(name: str):
        inherited = getattr(cls, name)

        def timed(self, *args, **kwargs):
            depth[0] += 1
            started = time.time()
            try:
                return inherited(self, *args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spans.append((started, time.time()))
        return timed

    for name in ("predict", "segment_slice"):
        if hasattr(cls, name):
            setattr(cls, name, wrapped(name))
    from intrabench.cli import command

    sys.argv = ["intrabench", *arguments]
    status = command()
    with open(spans_file, "w") as out:
        json.dump({"first_forward_at": spans[0][0] if spans else None,
                   "last_forward_end": spans[-1][1] if spans else None,
                   "forward_passes": len(spans)}, out)
    return status


if __name__ == "__main__":
    sys.exit(main())
