"""Realistic clicks and robustness to where people click (the RClicks protocol, in 3D).

A *clickability model* gives every voxel of the region a user would click (the target for an
initial click, an error component for a correction) a probability of being clicked
(:mod:`intrabench.clicks.base`, built-in models in :mod:`intrabench.prompters.clickability`). The region's
voxels, sorted by probability, are split into *clicking groups* of equal probability mass
(:mod:`intrabench.clicks.groups`); a :class:`~intrabench.clicks.policy.ClickPolicy` draws the
clicks of a prompter or refiner from one group, or at the region's centre (the baseline
strategy). :mod:`intrabench.clicks.robustness` turns a robustness run's rows into NoC, AUC,
Sample NoC, SB, GR, HH and NSR. See docs/realistic-clicks.md.
"""

from intrabench.clicks.base import ClickabilityModel, ClickRegion
from intrabench.clicks.groups import clicking_groups, sample_from_group
from intrabench.clicks.policy import ClickPolicy, ImageWindow

__all__ = [
    "ClickPolicy",
    "ClickRegion",
    "ClickabilityModel",
    "ImageWindow",
    "clicking_groups",
    "sample_from_group",
]
