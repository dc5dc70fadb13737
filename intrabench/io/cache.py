"""Where IntraBench keeps what it can compute again (target attributes, exported encoders,
the ETA's record of unit times): one folder, ``$INTRABENCH_CACHE``, else
``~/.cache/intrabench``. The engine and the features read it from here.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$INTRABENCH_CACHE``, else ``~/.cache/intrabench``.

    Returns:
        The cache folder, ``~`` expanded (it may not exist yet).
    """
    return Path(os.environ.get("INTRABENCH_CACHE") or "~/.cache/intrabench").expanduser()
