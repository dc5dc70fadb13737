"""Fixtures for the 2D SAM-family adapter tests: tiny random-weight models on the demo data.

Everything runs on the CPU with 2 torch threads and without checkpoints: the real architectures
in tiny configurations (``weights="random", tiny=True``) and full-size ones on the meta device.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(2)

from intrabench import registry  # noqa: E402
from intrabench.types import Box2D, Case, Prompt, Target  # noqa: E402

MODEL_NAMES = ("sam", "sam2", "medsam", "sam-med2d")


@pytest.fixture(scope="session")
def demo_cases() -> dict[str, Case]:
    dataset = registry.datasets.create("demo-real")
    return {case_id: dataset.load(case_id) for case_id in dataset.case_ids()}


@pytest.fixture(scope="session")
def lung(demo_cases: dict[str, Case]) -> Case:
    return demo_cases["lung1"]


def tiny_model(name: str, **params):
    """A registered adapter in its tiny random-weight configuration, on the CPU."""
    return registry.models.create(
        name, {"weights": "random", "tiny": True, "device": "cpu", **params}
    )


def box_and_center_prompt(case: Case, target: Target) -> Prompt:
    """A box and the centre click on every slice of the target (what prompters produce)."""
    truth = case.target_mask(target)
    points, boxes = [], {}
    for z in np.flatnonzero(truth.any(axis=(1, 2))):
        ys, xs = np.nonzero(truth[z])
        boxes[int(z)] = Box2D(int(ys.min()), int(xs.min()), int(ys.max()), int(xs.max()))
        points.append((int(z), int(np.median(ys)), int(np.median(xs))))
    return Prompt(points=points, point_labels=[1] * len(points), boxes=boxes)
