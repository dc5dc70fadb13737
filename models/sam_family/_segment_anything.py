"""segment_anything's network modules, without the package's ``__init__``.

``import segment_anything.modeling`` first runs ``segment_anything/__init__.py``, which imports
``SamPredictor`` and through it torchvision, which imports ``torch._dynamo``: seconds before
the first forward pass of every run of SAM, MedSAM or SAM-Med2D (docs/performance.md),
for code those adapters never call (they prepare images and prompts themselves, see
``_sam_common``). :func:`modeling` imports the ``modeling`` subpackage alone: the package is
registered without running its ``__init__``, which runs when another of its names is first
asked for, so ``from segment_anything import SamPredictor`` still works and gives the same
classes. ``modeling("mobile_sam")`` does the same for MobileSAM's package (``mobilesam-mirror``),
whose ``__init__`` imports torchvision too.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

_lock = threading.RLock()


def modeling(package: str = "segment_anything") -> ModuleType:
    """The module ``<package>.modeling`` (``Sam``, ``ImageEncoderViT``, ...; its submodules
    ``image_encoder`` etc. are attributes), imported without torchvision."""
    with _lock:
        if package not in sys.modules:
            spec = importlib.util.find_spec(package)
            if spec is not None and spec.loader is not None and spec.submodule_search_locations:
                sys.modules[package] = _unexecuted_package(spec, package)
        return importlib.import_module(f"{package}.modeling")


def _unexecuted_package(spec: importlib.machinery.ModuleSpec, name: str) -> ModuleType:
    """The package's module with its ``__path__`` but its ``__init__`` not yet run; the first
    lookup of a name it does not have runs it (PEP 562 module ``__getattr__``)."""
    package = importlib.util.module_from_spec(spec)
    package_name = name

    def complete(name: str) -> object:
        with _lock:
            if package.__dict__.get("__getattr__") is complete:
                del package.__dict__["__getattr__"]
                spec.loader.exec_module(package)
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}") from None

    package.__getattr__ = complete  # type: ignore[method-assign]
    return package
