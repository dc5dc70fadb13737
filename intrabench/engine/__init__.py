"""The benchmark itself: what a run computes, in plain sight.

``plan``: ``make_plan(config, datasets)`` turns a run config into work units (dataset, case,
model, prompter, refiner, seed); ``group``: a (dataset, case, model) group of units as
episodes, each with its seeded simulated user (``simulated_user``, ``seeding`` at the top of
the package) and its ground truth; ``episode``: one target's interaction, prompt -> predict ->
metrics -> refine, written once as a program; ``finishing``: finished episodes into the unit's
rows and files; ``case_reader``: a case read (with its target attributes); ``resume``: what
a resumed run still computes; ``failures``,
``skipped_work``, ``model_needs``, ``resources``: failed units, skipped groups, what a model
needs of a dataset, memory and set-up seconds.

May import :mod:`intrabench.evaluation` and :mod:`intrabench.io` and the shared vocabulary at
the top of the package; never :mod:`intrabench.execution` (which runs this layer: its
``runner`` plans, resumes and executes a run), never
``intrabench.models``, ``intrabench.prompters`` or ``intrabench.datasets`` (components come
through the registries).
"""
