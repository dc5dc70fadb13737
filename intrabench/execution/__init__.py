"""How a run's work is executed, apart from what it computes.

``settings``: :class:`~intrabench.execution.settings.ExecutionSettings`, every execution choice
of a run in one frozen object, built at the command line from its flags, an optional file and
the environment. ``base``: the executor interface and the choice of executor; ``pipelined``:
the local executors (worker lanes beside the model loop; in-process), with their private
strategies ``_read_ahead`` (the next groups' cases read by reader workers), ``_case_cache``
(cases kept for the next model), ``_model_ahead`` (the next model built ahead) and
``_case_ahead`` (the next case set up ahead); ``dask``: a Dask cluster.
The machinery they share: ``lanes`` (worker lanes and pools), ``subprocess_worker`` (a worker
process), ``parcels`` (arrays handed over through shared memory), ``scheduling`` (episodes in
flight, interleaved), ``user_worker`` (simulated users answered in a worker), ``loop_clock``
(where the model loop's time went), ``interrupts`` (Ctrl-C and SIGTERM), ``sizing`` (how
many workers of each kind a machine gets), ``progress`` and ``eta`` (the progress line and its
estimate of the time left), ``dry_run`` (the plan and its time estimate, without running it).

``runner``: :class:`~intrabench.execution.runner.Runner`, the top of a run: plan, resume,
executor choice, consolidation (``intrabench.engine.runner``, its old path, still imports,
with a DeprecationWarning).

Imports :mod:`intrabench.engine`'s pure modules (plan, episode, group, finishing, ...); the
engine never imports this package.
"""
