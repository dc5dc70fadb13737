"""Module paths that moved, kept importable for configs and plugins written for the old layout.

A config's ``imports:`` or a plugin may name a module by the path it had before the layout
was regrouped (``intrabench.models.sam``, ``intrabench.protocols``, ...). Importing an old
path gives the module at its new path (the very same module object, so classes and
registrations are shared) and one :class:`DeprecationWarning` line naming the new path.

The aliases are resolved by a finder on :data:`sys.meta_path`, installed when ``intrabench``
is imported, rather than by files at the old paths: a file there would be imported by the
registries' scan of the built-in packages and register nothing but a warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import warnings
from types import ModuleType

_MODELS = {
    "sam_family": (
        "sam",
        "sam2",
        "medsam",
        "medsam2",
        "litemedsam",
        "mobilesam",
        "sam_med2d",
        "_sam_common",
        "_sam_med2d_adapter",
        "_sam_network",
        "_segment_anything",
        "_litemedsam_device_input",
        "_numpy_interpolate",
        "_slice_intensity",
        "_encoder_speed",
    ),
    "volumetric": (
        "sam_med3d",
        "segvol",
        "vista3d",
        "nninteractive",
        "cvpr25_submission",
        "_3d_common",
        "_3d_sam_blocks",
        "_sammed3d_arch",
        "_segvol_arch",
    ),
    "classical": ("random_walker_2d", "random_walker_3d", "region_growing_3d", "_classical"),
    "runtime": (
        "_encoder_backends",
        "_exports_ahead",
        "_openvino_compiled",
        "_precision",
        "_embedding_cache",
        "_checkpoint_digests",
        "_preprocessing_place",
        "_tinyvit_export",
    ),
}

#: old module (or package) path -> its new path; a moved package's submodules follow it
MOVED: dict[str, str] = {
    **{
        f"intrabench.models.{module}": f"intrabench.models.{group}.{module}"
        for group, modules in _MODELS.items()
        for module in modules
    },
    "intrabench.models.synthetic_network": "intrabench.testing.synthetic_network",
    "intrabench.flops": "intrabench.testing.flops",
    "intrabench.clicks.maps": "intrabench.prompters.clickability",
    "intrabench.protocols": "intrabench.interfaces",
    "intrabench.engine.seeding": "intrabench.seeding",
    "intrabench.io.slice_view": "intrabench.models.sam_family._slice_view",
    "intrabench.datasets.verify": "intrabench.commands.datasets_verify",
    # mask geometry, in its own low package (``components`` was also a name that collided
    # with the registry's components)
    "intrabench.components": "intrabench.masks.components",
    "intrabench.distance": "intrabench.masks.distance",
    # the execution machinery, out of the engine (its runner too: it chooses the executor)
    "intrabench.engine.runner": "intrabench.execution.runner",
    "intrabench.engine.dask_executor": "intrabench.execution.dask",
    "intrabench.engine.pipeline": "intrabench.execution.lanes",
    "intrabench.engine.subprocess_executor": "intrabench.execution.subprocess_worker",
    "intrabench.engine.parcels": "intrabench.execution.parcels",
    "intrabench.engine.scheduling": "intrabench.execution.scheduling",
    "intrabench.engine.user_worker": "intrabench.execution.user_worker",
    "intrabench.engine.loop_clock": "intrabench.execution.loop_clock",
    "intrabench.engine.interrupts": "intrabench.execution.interrupts",
    "intrabench.engine.case_cache": "intrabench.execution._case_cache",
    "intrabench.engine.case_ahead": "intrabench.execution._case_ahead",
    "intrabench.engine.model_ahead": "intrabench.execution._model_ahead",
    "intrabench.engine.eta": "intrabench.execution.eta",
    "intrabench.engine.progress": "intrabench.execution.progress",
    "intrabench.engine.dry_run": "intrabench.execution.dry_run",
}


def new_path(name: str) -> str | None:
    """The current path of the module that was ``name``, or None when ``name`` did not move.

    Args:
        name: A dotted module path, e.g. ``intrabench.models.sam`` or a submodule of a moved
            package (``intrabench.protocols.x`` follows ``intrabench.protocols``).

    Returns:
        The dotted path it has now (:data:`MOVED`), or None.
    """
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


#: the environment variable that lists the old paths warned about already: the run's worker
#: processes inherit it, so a config's out-of-date ``imports:`` is one warning, not one per
#: worker
WARNED = "INTRABENCH_WARNED_OLD_PATHS"


def warn_once(key: str, message: str) -> None:
    """One DeprecationWarning line (``intrabench: DeprecationWarning: ...``, no source line)
    unless this process or its parent gave it for ``key`` already.

    The keys warned about are kept in the environment variable :data:`WARNED`, which worker
    processes inherit.

    Args:
        key: What the warning is about (an old module path), to give it once.
        message: The warning's text, one line.
    """
    warned = os.environ.get(WARNED, "").split(",")
    if key in warned:
        return
    os.environ[WARNED] = ",".join([*filter(None, warned), key])
    warnings.warn_explicit(message, DeprecationWarning, filename="intrabench", lineno=0)


class _AliasLoader(importlib.abc.Loader):
    """Gives the module at its new path under its old name, with one warning."""

    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the old name's spec on the shared module: put its own back
        module.__spec__ = self._spec
        warn_once(
            self.old,
            f"{self.old} moved to {self.new}; import {self.new} instead "
            "(the old path will be removed)",
        )


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (nothing else)."""

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith("intrabench."):
            return None
        new = new_path(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


#: the warnings of this module and of the registry's moved-out components: shown once per
#: place by default (Python hides a DeprecationWarning raised outside ``__main__``, so a user
#: running ``intrabench run`` would never see that the config's ``imports:`` is out of date)
SHOWN_WARNINGS = (r"intrabench\.\S+ moved to ", r"\S+ '[^']+' is no longer built in")


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once) and let its warnings show."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
        for message in SHOWN_WARNINGS:
            warnings.filterwarnings("default", message=message, category=DeprecationWarning)
