"""Former home of the distance transforms, kept for plugins that import it: everything public
is in :mod:`intrabench.masks.distance` (``set_device`` and the environment variable included)."""

from intrabench.masks.distance import *  # noqa: F403
