"""How a run executes.

``plan`` turns a run config into work units; ``runner`` executes them (locally, with background
worker processes from ``pipeline`` and ``subprocess_executor``) and ``dask_executor`` on a Dask
cluster; ``episode`` is one target's interaction, written once as a program that ``scheduling``
interleaves with others; ``simulated_user`` and ``user_worker`` answer the prompts;
``finishing`` turns finished episodes into rows and files; ``case_reader`` reads cases ahead;
``seeding`` derives every random generator.

May import :mod:`intrabench.evaluation` and :mod:`intrabench.io` and the shared vocabulary at
the top of the package; never ``intrabench.models``, ``intrabench.prompters`` or
``intrabench.datasets`` (components come through the registries).
"""
