"""Former home of :func:`connected_components`, kept for plugins that import it: it lives in
:mod:`intrabench.masks.components`."""

from intrabench.masks.components import connected_components

__all__ = ["connected_components"]
