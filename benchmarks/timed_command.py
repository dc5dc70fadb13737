"""``python benchmarks/timed_command.py MODEL SPANS_FILE ARGS...``: the ``intrabench`` command
(``intrabench.cli.command``, as ``python -m intrabench ARGS...`` runs it) with the wall-clock
time (seconds since the epoch) of the model ``MODEL``'s first forward pass and the end of its
last written to ``SPANS_FILE`` as JSON: ``{"first_forward_at": ..., "last_forward_end": ...,
"forward_passes": N}``. A benchmark that timed the process from its launch splits the command
into its start (before the first forward pass) and its steady state (from there to the exit).

The forward passes are timed by ``forward_spans.timed_forward_passes`` (the model class's
``predict`` and ``segment_slice``, outermost calls only), which imports only
``intrabench.registry`` before the command, which imports it itself.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    model_name, spans_file, *arguments = sys.argv[1:]
    from forward_spans import timed_forward_passes

    from intrabench.cli import command

    spans: list[tuple[float, float]] = []
    sys.argv = ["intrabench", *arguments]
    with timed_forward_passes([model_name], spans, clock=time.time):
        status = command()
    with open(spans_file, "w") as out:
        json.dump(
            {
                "first_forward_at": spans[0][0] if spans else None,
                "last_forward_end": spans[-1][1] if spans else None,
                "forward_passes": len(spans),
            },
            out,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
