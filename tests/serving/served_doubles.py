"""Models for the serving tests, served by ``intrabench serve-model --import
tests.serving.served_doubles``: a real model (region growing) that dies, hangs or answers
wrongly on request, so that each fault of a server is produced on purpose."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import ClassVar

from intrabench.models.classical.region_growing_3d import RegionGrowing3D
from intrabench.registry import models


@models.register
class FaultyRegionGrowing(RegionGrowing3D):
    """Region growing whose server process fails at its ``at``-th forward pass, once: the
    first process to get there writes ``marker`` and then is killed (``fault: kill``) or
    hangs (``fault: hang``); a restarted server finds the marker and works."""

    name: ClassVar[str] = "faulty-region-growing"

    def __init__(self, marker: str = "", at: int = 3, fault: str = "kill") -> None:
        super().__init__()
        self.marker, self.at, self.fault = Path(marker), int(at), fault
        self.calls = 0

    def predict(self, prompt, previous=None, update_slices=None):
        self.calls += 1
        if self.calls == self.at and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            if self.fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)
        return super().predict(prompt, previous, update_slices)
