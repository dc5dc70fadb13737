"""An example third-party plugin: nothing in IntraBench imports or names it.

It is installed by the plugin test and found through its entry points only.
"""

from __future__ import annotations

import numpy as np

from intrabench.interfaces import Model, PromptContext, Prompter
from intrabench.types import Prediction, Prompt, interactions


class BoxThreshold3D(Model):
    """Inside the 3D box, everything brighter than the box's mean intensity."""

    dimension = 3
    accepts = frozenset({"box3d"})

    def __init__(
        self, offset: float = 0.0, weights: str = "none", checkpoint_dir: str | None = None
    ) -> None:
        """``weights='checkpoint'``: the offset comes from the card's pinned checkpoint in the
        checkpoint directory (size and SHA-256 checked before it is read)."""
        self.offset = offset
        self.image = None
        if weights == "checkpoint":
            import json

            from intrabench.io.checkpoints import check_pinned, checkpoint_path

            path = checkpoint_path("box-threshold-3d-offset", checkpoint_dir)
            check_pinned("box-threshold-3d-offset", path)
            self.offset = float(json.loads(path.read_text())["offset"])

    def set_case(self, image) -> None:
        self.image = image

    def predict(self, prompt: Prompt, previous=None, update_slices=None) -> Prediction:
        box = prompt.box3d
        mask = np.zeros(self.image.shape, dtype=bool)
        region = (
            slice(box.z_min, box.z_max + 1),
            slice(box.y_min, box.y_max + 1),
            slice(box.x_min, box.x_max + 1),
        )
        values = self.image.array[region]
        mask[region] = values > values.mean() + self.offset
        return Prediction(mask)


class TwoCenterClicks(Prompter):
    """Two positive clicks: the target voxels nearest to its centroid, on two slices."""

    dimensions = frozenset({2, 3})
    kinds = frozenset({"point"})
    effort_rule = "2 clicks = 2"

    def initial(self, context: PromptContext) -> Prompt:
        voxels = np.argwhere(context.ground_truth)
        order = np.argsort(((voxels - voxels.mean(0)) ** 2).sum(1))
        points = voxels[order[:2]]
        return Prompt(
            points=points,
            point_labels=np.ones(len(points)),
            interactions=interactions("click", len(points)),
            effort_label="2",
        )
