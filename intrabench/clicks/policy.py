"""Where a simulated user clicks in a region: from a clicking group, or at its centre.

A :class:`ClickPolicy` is what a robustness run hands to click-based prompters and refiners
(through ``PromptContext.clicks`` / ``RefineContext.clicks``). The component keeps deciding
*which* region to click (the target, the slice's target, the largest error component) and asks
the policy *where* in it: :meth:`ClickPolicy.choose`.

Strategies: ``"baseline"`` is RClicks' baseline strategy, the voxel farthest from the region's
boundary (Euclidean, voxel units, as the CVPR 2025 challenge's and RITM's clicker; ties broken
with the episode's generator); ``"G<k>"`` draws from clicking group k of the clickability
model's map (:mod:`intrabench.clicks.groups`).

Arrays: regions are boolean, (z, y, x) for a click in the volume or (y, x) for a click on one
axial slice; ``origin`` is the full-volume (z, y, x) index of the region array's first voxel
(for a 2D region, z is its slice); ``spacing`` is the volume's (z, y, x) spacing in mm.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from intrabench.clicks.base import ClickabilityModel, ClickRegion, RegionKind, probabilities
from intrabench.clicks.groups import sample_from_group
from intrabench.masks.distance import squared_voxel_distances

#: voxels of context kept around a region for its map (its boundary inside the crop)
MARGIN = 4


@dataclass(frozen=True)
class ImageWindow:
    """A float32 crop of the case's image (z, y, x) whose first voxel is at ``origin``: what a
    simulated user with an image-conditioned clickability model is given of the image."""

    array: np.ndarray
    origin: tuple[int, int, int]

    @classmethod
    def around(cls, image: np.ndarray, box: tuple[slice, ...], margin: int = 24) -> ImageWindow:
        """The window of ``image`` over ``box`` (a target's bounding box) grown by ``margin``.

        Args:
            image: The case's image, (z, y, x).
            box: The target's bounding box, half-open slices (z, y, x).
            margin: Voxels added on each side of every axis (clipped to the image).

        Returns:
            The window: the crop as a C-contiguous float32 array, and its first voxel's
            (z, y, x) index.
        """
        window = tuple(
            slice(max(0, s.start - margin), min(n, s.stop + margin))
            for s, n in zip(box, image.shape)
        )
        return cls(
            np.ascontiguousarray(image[window], dtype=np.float32),
            tuple(int(s.start) for s in window),
        )  # type: ignore[arg-type]

    def crop(self, origin: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
        """Intensities (float64) of the box at ``origin`` of ``shape``, NaN outside the window.

        Args:
            origin: The box's first voxel, full-volume (z, y, x) indices.
            shape: The box's shape, (z, y, x).

        Returns:
            Float64 array of ``shape``.
        """
        out = np.full(shape, np.nan)
        source, target = [], []
        for start, size, window_start, window_size in zip(
            origin, shape, self.origin, self.array.shape
        ):
            low = max(start, window_start)
            high = min(start + size, window_start + window_size)
            if high <= low:
                return out
            source.append(slice(low - window_start, high - window_start))
            target.append(slice(low - start, high - start))
        out[tuple(target)] = self.array[tuple(source)]
        return out


def parse_strategy(strategy: str, n_groups: int) -> int | None:
    """The group number of ``"G<k>"`` (1..n_groups), None for ``"baseline"``; ValueError else.

    Args:
        strategy: ``"baseline"`` (the deepest voxel) or ``"G1"``..``"G<n_groups>"``.
        n_groups: The number of clicking groups.

    Returns:
        The group number, or None for the baseline.

    Raises:
        ValueError: Any other strategy.
    """
    if strategy == "baseline":
        return None
    match = re.fullmatch(r"G(\d+)", strategy)
    if match is None or not 1 <= int(match.group(1)) <= n_groups:
        raise ValueError(f"click strategy must be 'baseline' or G1..G{n_groups}, got {strategy!r}")
    return int(match.group(1))


@dataclass(eq=False)
class ClickPolicy:
    """Chooses click positions for one episode step (see the module docstring)."""

    model: ClickabilityModel
    strategy: str = "baseline"
    n_groups: int = 10
    image: ImageWindow | None = None
    identity: tuple[str, str, str] = ("", "", "")
    step: int = 0
    #: the maps that gave this step's click regions (source -> regions; see
    #: :meth:`ClickabilityModel.weights_and_source`)
    sources: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.group = parse_strategy(self.strategy, self.n_groups)

    def at_step(self, step: int) -> ClickPolicy:
        """This policy for ``step``, counting its own map sources.

        Args:
            step: The episode step (0: the initial prompt).

        Returns:
            A copy with that step and an empty ``sources`` counter.
        """
        return replace(self, step=step, sources=Counter())

    def region(
        self,
        mask: np.ndarray,
        origin: tuple[int, ...],
        spacing: tuple[float, ...],
        kind: RegionKind = "target",
        target: np.ndarray | None = None,
    ) -> ClickRegion:
        """The :class:`ClickRegion` the clickability model sees for ``mask``: the whole array
        (callers crop first, see :meth:`choose`).

        Args:
            mask: The bool region, (y, x) on an axial slice or (z, y, x).
            origin: Full-volume (z, y, x) index of the mask's first voxel (for a 2D mask, z is
                its slice).
            spacing: Voxel spacing in mm, (z, y, x); a 2D mask keeps (y, x).
            kind: "target", "false_negative" or "false_positive".
            target: The ground truth on the mask's grid, or None.

        Returns:
            The region, with the image crop when the model needs the image.
        """
        planar = mask.ndim == 2
        spacing = tuple(float(s) for s in (spacing[1:] if planar else spacing))
        image = None
        if self.image is not None and self.model.needs_image:
            full_origin = tuple(int(o) for o in origin)
            shape = (1, *mask.shape) if planar else mask.shape
            image = self.image.crop(full_origin, shape)
            image = image[0] if planar else image
        return ClickRegion(
            mask=mask,
            spacing=spacing,
            kind=kind,
            target=target,
            image=image,
            origin=tuple(int(o) for o in origin),  # type: ignore[arg-type]
            identity=self.identity,
            step=self.step,
        )

    def choose(
        self,
        mask: np.ndarray,
        n: int,
        rng: np.random.Generator,
        *,
        origin: tuple[int, ...] = (0, 0, 0),
        spacing: tuple[float, ...] = (1.0, 1.0, 1.0),
        kind: RegionKind = "target",
        target: np.ndarray | None = None,
    ) -> np.ndarray:
        """``n`` distinct voxels of ``mask`` to click (fewer if it has fewer), (k, mask.ndim)
        int64 indices into ``mask``. ``target``: the ground truth on ``mask``'s grid.

        Args:
            mask: The bool region to click in, (y, x) or (z, y, x).
            n: How many clicks.
            rng: The generator of the draws.
            origin: Full-volume (z, y, x) index of the mask's first voxel.
            spacing: Voxel spacing in mm, (z, y, x).
            kind: "target", "false_negative" or "false_positive".
            target: The ground truth on ``mask``'s grid, or None.

        Returns:
            (k, mask.ndim) int64 indices into ``mask``, k <= n ((0, ndim) for an empty mask).
        """
        mask = np.asarray(mask, dtype=bool)
        if not mask.any() or n < 1:
            return np.zeros((0, mask.ndim), dtype=np.int64)
        voxels = np.argwhere(mask)
        low = np.maximum(voxels.min(axis=0) - MARGIN, 0)
        high = np.minimum(voxels.max(axis=0) + MARGIN + 1, mask.shape)
        crop = tuple(slice(int(a), int(b)) for a, b in zip(low, high))
        local = mask[crop]
        if self.group is None:
            picked = self._deepest(local, n, rng)
        else:
            crop_origin = np.array(origin, dtype=np.int64)
            crop_origin[-mask.ndim :] += low
            region = self.region(
                local,
                tuple(crop_origin),
                spacing,
                kind,
                None if target is None else np.asarray(target, bool)[crop],
            )
            chances = probabilities(self.model, region, self.sources)
            flat = sample_from_group(chances, self.group, self.n_groups, n, rng)
            picked = np.stack(np.unravel_index(flat, local.shape), axis=1)
        return picked.astype(np.int64) + low

    @staticmethod
    def _deepest(local: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
        """The ``n`` voxels farthest from the boundary (voxel units), ties in random order."""
        padded = np.pad(local, 1)
        depth = squared_voxel_distances(padded)[tuple(slice(1, -1) for _ in local.shape)]
        values = depth[local]
        count = min(int(n), len(values))
        # only the voxels at least as deep as the n-th deepest are ordered (ties at random)
        cut = np.partition(values, len(values) - count)[len(values) - count]
        voxels = np.argwhere(local & (depth >= cut))
        values = depth[tuple(voxels.T)]
        order = np.lexsort((rng.permutation(len(voxels)), -values))
        return voxels[order[:count]]
