"""The CVPR 2025 protocol's corrected variant (``protocol: cvpr25-corrected``): the box around
the whole target (CVPR25#5), the middle slice of the unique slices (#7), the exact protocol's
metrics and clicks; ``protocol: cvpr25`` is unchanged."""

from __future__ import annotations

import numpy as np

from intrabench.config import RunConfig
from intrabench.engine.finishing import metrics_for_protocol
from intrabench.evaluation.cvpr25 import step_metrics_cvpr25
from intrabench.interfaces import PromptContext
from intrabench.prompters.cvpr25 import Cvpr25Box, Cvpr25BoxCorrected
from intrabench.seeding import derive_rng
from intrabench.types import Box3D


def _target() -> np.ndarray:
    """Wide on slice 2, narrow on slices 3 to 5: the middle of the unique slices (2..5) is 4,
    where the target is narrow; the median voxel's slice would be 2 (most voxels)."""
    gt = np.zeros((8, 12, 12), dtype=bool)
    gt[2, 1:10, 2:11] = True  # 9 x 9 = 81 voxels
    gt[3:6, 4:6, 4:7] = True  # 3 slices x 2 x 3
    return gt


def _context(gt: np.ndarray) -> PromptContext:
    return PromptContext(
        ground_truth=gt, spacing=(1.0, 1.0, 1.0), rng=derive_rng(0, "d", "c", "t", "p")
    )


def test_the_corrected_box_encloses_the_whole_target_and_the_exact_box_its_middle_slice():
    gt = _target()
    exact = Cvpr25Box(max_shift=0).initial(_context(gt))
    corrected = Cvpr25BoxCorrected(max_shift=0).initial(_context(gt))
    # the exact challenge box: the extent on z_mid = unique slices [2, 3, 4, 5][4 // 2] = 4
    assert exact.box3d == Box3D(2, 4, 4, 5, 5, 6)
    # corrected: the projection over slices 2..5, y 1..9 and x 2..10, the same z-range
    assert corrected.box3d == Box3D(2, 1, 2, 5, 9, 10)
    assert corrected.effort == exact.effort == 4 and corrected.effort_label == "4"


def test_the_corrected_box_keeps_the_challenges_random_enlargement():
    gt = np.zeros((4, 512, 512), dtype=bool)
    gt[1:3, 100:150, 200:260] = True
    for seed in range(5):
        context = _context(gt)
        context.rng = derive_rng(seed, "d", "c", "t", "p")
        box = Cvpr25BoxCorrected().initial(context).box3d
        shift = 100 - box.y_min
        assert shift % 2 == 0 and 0 <= shift <= 10  # randint(0, 5) * 512 / 256
        assert (box.x_min, box.y_max, box.x_max) == (200 - shift, 149 + shift, 259 + shift)
        same = derive_rng(seed, "d", "c", "t", "p")
        assert shift == 2 * int(same.integers(0, 6))


def test_the_corrected_protocol_defaults_to_its_box_and_scores_as_the_challenge():
    config = RunConfig.model_validate(
        {
            "name": "x",
            "datasets": ["demo-phantoms"],
            "models": ["region-growing-3d"],
            "protocol": "cvpr25-corrected",
        }
    )
    assert [p.name for p in config.prompters] == ["cvpr25-box-corrected"]
    assert [r.name for r in config.refiners] == ["cvpr25-click"] and config.refinement_steps == 5
    exact = RunConfig.model_validate(
        {
            "name": "x",
            "datasets": ["demo-phantoms"],
            "models": ["region-growing-3d"],
            "protocol": "cvpr25",
        }
    )
    assert [p.name for p in exact.prompters] == ["cvpr25-box"]
    assert metrics_for_protocol("cvpr25-corrected") is step_metrics_cvpr25
    assert metrics_for_protocol("cvpr25") is step_metrics_cvpr25
