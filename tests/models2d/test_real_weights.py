"""Smoke test with the published weights, where they are present (skipped otherwise).

Opt-in (``-m slow``): set ``INTRABENCH_CHECKPOINTS`` to a directory holding the files of
``intrabench.io.checkpoints.CHECKPOINTS``. Uses the smaller variants so that it also runs on a CPU.
A box around a demo lesion on its largest slice should give a clearly overlapping mask with
any of the real models (random weights would not).
"""

from __future__ import annotations

import numpy as np
import pytest

from intrabench import registry
from intrabench.io.checkpoints import CHECKPOINTS, is_present
from intrabench.types import Box2D, SlicePrompt

REAL = [
    ("sam", "vit_b", "sam-vit-b"),
    ("medsam", "vit_b", "medsam"),
    ("sam-med2d", "vit_b", "sam-med2d"),
    ("sam2", "sam2.1-hiera-tiny", "sam2.1-hiera-tiny"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,variant,key", REAL)
def test_published_weights_segment_a_boxed_lesion(
    name: str, variant: str, key: str, demo_cases
) -> None:
    if not is_present(key):
        pytest.skip(f"{CHECKPOINTS[key].filename} not in the checkpoint directory")
    case = demo_cases["brain1"]
    truth = case.target_mask(case.targets[1])
    z = int(np.argmax(truth.sum(axis=(1, 2))))
    ys, xs = np.nonzero(truth[z])
    model = registry.models.create(name, {"variant": variant, "device": "auto"})
    model.set_case(case.image)
    box = Box2D(int(ys.min()), int(xs.min()), int(ys.max()), int(xs.max()))
    output = model.predict_slice(
        SlicePrompt(z, np.zeros((0, 2), np.int64), np.zeros(0, np.int8), box)
    )
    overlap = (output.mask & truth[z]).sum()
    dice = 2 * overlap / (output.mask.sum() + truth[z].sum())
    assert dice > 0.5, f"{name}: Dice {dice:.2f} on a boxed lesion"
