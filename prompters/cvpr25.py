"""The CVPR 2025 interactive challenge box ("Foundation Models for Interactive 3D Biomedical
Image Segmentation"), so results can be set beside that leaderboard.

The challenge gives a 2D box on the middle slice ``z_mid`` (the upper median of the unique
foreground slices, ``unique_z[len // 2]``) plus the z-range [z_min, z_max] of the target. The
xy box is the tight box of the target on ``z_mid`` enlarged on every side by one shared random
shift ``s`` in {0, ..., max_shift} pixels, scaled by (H / 256, W / 256) and truncated, then
clipped to the image.

To models it is given as one :class:`~intrabench.types.Box3D` spanning [z_min, z_max] with the
``z_mid`` xy box (how the nnInteractive challenge baseline reads it). A 2D model therefore gets
that xy box on every slice of the z-range (``Prompt.on_slice``).

Effort: the user draws one 2D box (2) and picks the two boundary slices (1 + 1) = 4.
"""

from __future__ import annotations

from typing import ClassVar

from intrabench.protocols import PromptContext, Prompter
from intrabench.registry import prompters
from intrabench.types import Box3D, Prompt, interactions

from ._geometry import foreground_crop, foreground_slices, median_slice, tight_box_2d


@prompters.register
class Cvpr25Box(Prompter):
    """CVPR 2025 challenge box: 2D box on the middle slice + z-range, given as a 3D box (4)."""

    name: ClassVar[str] = "cvpr25-box"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset({"box3d"})
    effort_rule: ClassVar[str] = "2D box on the middle slice (2) + 2 boundary slices = 4"

    def __init__(self, max_shift: int = 5) -> None:
        if int(max_shift) < 0:
            raise ValueError(f"max_shift must be >= 0, got {max_shift}")
        self.max_shift = int(max_shift)

    def initial(self, context: PromptContext) -> Prompt:
        gt = context.ground_truth
        if not gt.any():
            return Prompt()
        sub, offset = foreground_crop(gt)
        fg = foreground_slices(sub)
        z_mid = median_slice(fg, upper=True)
        box = tight_box_2d(sub[z_mid])
        _, height, width = gt.shape
        shift = int(context.rng.integers(0, self.max_shift + 1)) if self.max_shift else 0
        shift_y, shift_x = int(shift * height / 256), int(shift * width / 256)
        y_min = max(0, box.y_min + int(offset[1]) - shift_y)
        x_min = max(0, box.x_min + int(offset[2]) - shift_x)
        y_max = min(height - 1, box.y_max + int(offset[1]) + shift_y)
        x_max = min(width - 1, box.x_max + int(offset[2]) + shift_x)
        z_min, z_max = int(fg[0] + offset[0]), int(fg[-1] + offset[0])
        return Prompt(box3d=Box3D(z_min, y_min, x_min, z_max, y_max, x_max),
                      interactions=interactions("box2d", 1) + interactions("boundary_slice", 2),
                      effort_label="4")
