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

The challenge's corrective click is :class:`Cvpr25Click` (``cvpr25-click``): the centre of the
largest error, with the challenge's tie-breaking and its 2x downsampling of large components,
so that ``protocol: cvpr25`` runs get the challenge's clicks (see :mod:`intrabench.evaluation.cvpr25`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from intrabench.interfaces import PromptContext, Prompter, RefineContext
from intrabench.masks.distance import squared_voxel_distances
from intrabench.registry import prompters, refiners
from intrabench.types import Box3D, Prompt, interactions

from ._geometry import (
    foreground_crop,
    foreground_slices,
    mask_corners,
    median_slice,
    tight_box_2d,
)
from .refiners import CenterErrorClick

#: The challenge computes the distance transform at half resolution above this many voxels
#: (the component's box with its 25% margins).
LARGE_ROI_VOXELS = 60_000_000

#: The challenge seeds NumPy's global generator with this before every click.
TIE_BREAK_SEED = 42


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
        """The challenge's 3D box: the 2D box of the middle slice and the target's z-range.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        gt = context.ground_truth
        if not gt.any():
            return Prompt()
        sub, offset = foreground_crop(gt)
        fg = foreground_slices(sub)
        return self._prompt(context, self.xy_box(sub, fg), offset, fg)

    def xy_box(self, sub: np.ndarray, fg: np.ndarray):
        """The tight xy box (crop coordinates) the challenge enlarges: the target on z_mid.

        Args:
            sub: The target's bool (z, y, x) mask cropped to its foreground.
            fg: The crop's foreground slice indices (z), ascending.

        Returns:
            The inclusive (y, x) box of the target on the upper median slice.
        """
        return tight_box_2d(sub[median_slice(fg, upper=True)])

    def _prompt(self, context: PromptContext, box, offset: np.ndarray, fg: np.ndarray) -> Prompt:
        """The 3D box over the target's slices ``fg`` (crop coordinates, crop at ``offset``)
        with ``box`` enlarged by the challenge's shared random shift and clipped (4)."""
        _, height, width = context.ground_truth.shape
        shift = int(context.rng.integers(0, self.max_shift + 1)) if self.max_shift else 0
        shift_y, shift_x = int(shift * height / 256), int(shift * width / 256)
        y_min = max(0, box.y_min + int(offset[1]) - shift_y)
        x_min = max(0, box.x_min + int(offset[2]) - shift_x)
        y_max = min(height - 1, box.y_max + int(offset[1]) + shift_y)
        x_max = min(width - 1, box.x_max + int(offset[2]) + shift_x)
        z_min, z_max = int(fg[0] + offset[0]), int(fg[-1] + offset[0])
        return Prompt(
            box3d=Box3D(z_min, y_min, x_min, z_max, y_max, x_max),
            interactions=interactions("box2d", 1) + interactions("boundary_slice", 2),
            effort_label="4",
        )


@prompters.register
class Cvpr25BoxCorrected(Cvpr25Box):
    """The CVPR 2025 box with the participants' correction (``protocol: cvpr25-corrected``):
    the xy box encloses the whole target, not its extent on one slice (4).

    JunMa11/CVPR-MedSegFMCompetition#5 (F. Isensee): the challenge's xy box is the target's
    extent on ``z_mid`` alone, which for a target whose cross-section changes along z (a
    liver) is a box no user would draw: it cuts off everything wider than that slice. This
    variant takes the tight xy box of the target's projection over all its slices, with the
    challenge's shared random enlargement (scaled by H / 256, W / 256) and clipping, and the
    same z-range. The middle slice is the upper median of the unique foreground slices, as the
    challenge chose after JunMa11/CVPR-MedSegFMCompetition#7 (its first code took the slice of the median voxel); the exact
    ``cvpr25-box`` keeps that too. Models get one :class:`~intrabench.types.Box3D`, as from
    ``cvpr25-box``.
    """

    name: ClassVar[str] = "cvpr25-box-corrected"
    effort_rule: ClassVar[str] = (
        "2D box around the whole target (2) + 2 boundary slices = 4 (CVPR25#5)"
    )

    def xy_box(self, sub: np.ndarray, fg: np.ndarray):
        """The tight xy box of the target's projection over all its slices."""
        return tight_box_2d(sub.any(axis=0))


def challenge_click(component: np.ndarray) -> tuple[int, ...]:
    """The challenge's click in a non-empty boolean (z, y, x) error component, as an index.

    As ``CVPR25_iter_eval.py`` (``compute_edt``, ``sample_coord``): the component's bounding
    box grown on every side by 25% of its size (at least one voxel, truncated); if that box has
    more than 60 M voxels it is max-pooled 2x2x2 (``skimage.measure.block_reduce``, zero-padded
    at the end) and the distance transform (voxel units) computed there is repeated back 2x;
    the distances are kept on the component only, or, if none is left (a tiny component lost to
    the pooling), the component itself is used; the maxima are listed in C order and one is
    drawn with ``np.random.seed(42); np.random.choice(n)`` (a fresh ``RandomState(42)``).

    Args:
        component: A non-empty bool (z, y, x) error component.

    Returns:
        The chosen voxel, (z, y, x) indices into ``component``.
    """
    low, high = mask_corners(component)
    high = high + 1
    size = high - low
    crop = tuple(slice(int(a), int(b)) for a, b in zip(low, high))
    local = component[crop]
    margin = np.maximum((size * 0.25).astype(int), 1)
    padded = np.zeros(tuple(size + 2 * margin), dtype=np.uint8)
    inner = tuple(slice(int(m), int(m + s)) for m, s in zip(margin, size))
    padded[inner] = local
    large = padded.size > LARGE_ROI_VOXELS
    if large:
        from skimage.measure import block_reduce

        padded = block_reduce(padded, block_size=(2, 2, 2), func=np.max)
    # squared voxel distances: exact integers, so the maxima are those of SciPy's transform
    distance = squared_voxel_distances(padded)
    if large:
        distance = distance.repeat(2, axis=0).repeat(2, axis=1).repeat(2, axis=2)
    distance = distance[inner] * local
    if not distance.any():
        distance = local.astype(np.float64)
    maxima = np.argwhere(distance == distance.max())
    chosen = maxima[np.random.RandomState(TIE_BREAK_SEED).choice(len(maxima))]
    return tuple(int(c + o) for c, o in zip(chosen, low))


@refiners.register
class Cvpr25Click(CenterErrorClick):
    """The CVPR 2025 challenge's corrective click: centre of the largest error, its tie-break.

    False negatives and false positives pooled; the largest 26-connected component (ties: the
    lowest cc3d label, as ``np.bincount(...).argmax()``); the click at its distance-transform
    maximum in voxel units (:func:`challenge_click`: the challenge's seed-42 tie-break, not the
    run's seed, and its 2x downsampling of large components). Labelled with the ground truth
    there (foreground on a false negative, background on a false positive). Effort 1.
    ``center-error-click`` is the same click with ties broken by the run's seed.
    """

    name: ClassVar[str] = "cvpr25-click"

    def __init__(self) -> None:
        super().__init__(use_spacing=False)

    def click_in(self, component: np.ndarray, context: RefineContext) -> tuple[int, ...]:
        """The challenge's click in one error component (bool, the crop's axes): its centre, with
        the challenge's tie-break.

        Args:
            component: A non-empty bool (z, y, x) error component.
            context: The step's context (not read: the challenge's click is deterministic).

        Returns:
            The voxel, (z, y, x) indices into ``component``.
        """
        return challenge_click(component)
