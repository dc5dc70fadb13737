"""The model's time and the latency of an interaction include the encoder work a 2D model
does in ``prepare_slices`` (issue: a plugin's 6.36 s wait was recorded as 0.34 s)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.interfaces import SliceModel, SliceOutput
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.types import Case, SlicePrompt, Target

ENCODER_SECONDS = 0.05


class _SleepyEncoder(SliceModel):
    """Encodes every slice it is told about in ``prepare_slices`` (sleeping a known time);
    decoding is instant: the box, filled."""

    name: ClassVar[str] = "test-sleepy-encoder"
    accepts: ClassVar[frozenset[str]] = frozenset({"box2d", "box3d"})

    def __init__(self) -> None:
        super().__init__()
        self.encoded: set[int] = set()

    def prepare_slices(self, zs: list[int]) -> None:
        for z in zs:
            if z not in self.encoded:
                time.sleep(ENCODER_SECONDS)
                self.encoded.add(z)

    def predict_slice(self, prompt: SlicePrompt, feedback: Any = None) -> SliceOutput:
        mask = np.zeros(self.image.shape[1:], dtype=bool)
        box = prompt.box
        mask[box.y_min : box.y_max + 1, box.x_min : box.x_max + 1] = True
        return SliceOutput(mask, None)


def test_encoder_time_in_prepare_slices_counts_as_model_time_and_latency():
    label = np.zeros((8, 20, 20), np.uint8)
    label[2:6, 5:12, 6:14] = 1
    geometry = ImageGeometry(
        (20, 20, 8), (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1, 0, 0, 0, 1, 0, 0, 0, 1)
    )
    case = Case(
        "hand",
        "box",
        Volume(label.astype(np.float32), (1.0, 1.0, 1.0), geometry),
        label,
        (Target("t", 1, "lesion"),),
    )
    model = _SleepyEncoder()
    model.set_case(case.image)
    [result] = run_episode(
        case, case.targets[0], model, registry.prompters.create("box-per-slice"), "box-per-slice"
    )
    encoded = 4 * ENCODER_SECONDS
    assert result.metrics["dice"] == 1.0
    assert result.model_seconds >= encoded
    assert result.latency_seconds >= result.model_seconds
