"""A Ctrl-C or ``kill`` that arrives inside a weakref callback (where Python prints the raised
exception as "Exception ignored" and goes on) still stops the command, without a traceback."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import textwrap

import pytest

from intrabench import registry
from intrabench.cli import Terminated
from intrabench.engine.simulated_user import SimulatedUser
from intrabench.execution import interrupts
from intrabench.execution.scheduling import EpisodeScheduler, EpisodeTask

SWALLOWED = textwrap.dedent("""
    import argparse, os, signal, sys, threading, weakref
    from intrabench import cli

    class Box:
        pass

    def command(args):
        box = Box()
        def callback(_ref):  # like the metrics' frozen-box cache
            signal.pthread_kill(threading.get_ident(), signal.{signal})  # this thread: now
            for _ in range(10000):  # the handler runs here, inside the callback
                pass
        ref = weakref.ref(box, callback)
        del box  # the callback runs now: its exception cannot propagate
        print("went on", flush=True)
        return 0

    class Parser:
        def parse_args(self, argv):
            return argparse.Namespace(verbose=False, func=command)

    cli.build_parser = Parser
    sys.exit(cli.main([]))
""")


def default_sigint() -> None:
    """In the child, before exec: Ctrl-C's default action, which Python turns into
    KeyboardInterrupt; a command started in the background (``&`` without job control)
    inherits SIGINT ignored, and an ignored SIGINT stays ignored, as it should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("SIGTERM", 143, "terminated (SIGTERM): finished work is saved; re-run the same command"),
        ("SIGINT", 130, "interrupted: finished work is saved; re-run the same command to resume"),
    ],
)
def test_a_stop_swallowed_in_a_weakref_callback_still_stops_the_command(name, status, message):
    done = subprocess.run(
        [sys.executable, "-c", SWALLOWED.format(signal=name)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=default_sigint,
    )
    assert done.stdout == "went on\n"  # the raise inside the callback was swallowed...
    assert done.returncode == status, done.stderr  # ...and the request raised again after
    assert message in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_other_unraisable_exceptions_are_still_reported():
    script = textwrap.dedent("""
        import weakref
        from intrabench.cli import Terminated
        from intrabench.execution import interrupts
        class Box:
            pass
        restore = interrupts.install(Terminated)
        box = Box()
        ref = weakref.ref(box, lambda _ref: 1 / 0)
        del box
        restore()
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "Exception ignored" in done.stderr and "ZeroDivisionError" in done.stderr


def test_an_ignored_sigint_stays_ignored():
    """A run started with ``&`` from a script or under ``nohup`` ignores Ctrl-C: so does
    IntraBench, while SIGTERM still stops it."""
    script = textwrap.dedent("""
        import signal
        from intrabench.cli import Terminated
        from intrabench.execution import interrupts
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        restore = interrupts.install(Terminated)
        print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
              signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None))
        restore()
        print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
              signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["True", "True", "True", "True"], done.stderr


def test_the_scheduler_raises_a_recorded_request_at_its_next_step():
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 1})
    case = dataset.load(dataset.case_ids()[0])
    target = case.targets[0]
    user = SimulatedUser(
        prompter=registry.prompters.create("box-3d", {}),
        prompter_key="box-3d",
        refiner=None,
        refiner_key="",
        seed=0,
        identity=(case.dataset, case.case_id, target.target_id),
        spacing=case.image.spacing,
        model_dimension=3,
    )
    task = EpisodeTask(
        key="box",
        user=user,
        ground_truth=case.target_mask(target),
        steps=1,
        refine=False,
        keep_previous_prompts=True,
        tag=None,
    )
    model = registry.models.create("region-growing-3d", {})
    model.set_case(case.image)
    done: list = []
    try:
        with pytest.raises(Terminated):
            with contextlib.suppress(Terminated):  # swallowed, as in a weakref callback
                interrupts.request(Terminated)
            EpisodeScheduler(model, [], 1).run([task], lambda t, results: done.append(t))
        assert done == []  # stopped before the episode's first model call
    finally:
        interrupts.clear()
    EpisodeScheduler(model, [], 1).run([task], lambda t, results: done.append(t))
    assert done == [task]
