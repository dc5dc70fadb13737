"""Centroid clicks do not depend on where a crop starts (#49 item 7).

The reference (radioactive's ``CenterPointPrompter`` and ``get_fg_point_from_cc_center``) never
crops: it rounds the largest component's centroid in the full slice's coordinates (numpy: halves
to even), then snaps to the component's nearest pixel with ``cKDTree``. The prompters crop to
the target first; rounding a centroid of x.5 in crop coordinates then moved it by one pixel
whenever the crop's offset was odd. ``reference_click`` below is the reference's rule on the
full slice.
"""

from __future__ import annotations

import cc3d
import numpy as np
import pytest
from prompter_testkit import prompt_context, refine_context
from scipy.spatial import cKDTree

from intrabench import registry


def reference_click(plane: np.ndarray) -> tuple[int, int]:
    """(y, x): the largest 8-connected component's centroid, rounded in the full slice's
    coordinates, snapped to the component's nearest pixel by cKDTree."""
    labels = cc3d.connected_components(plane.astype(np.uint8), connectivity=8)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    pixels = np.argwhere(labels == int(np.argmax(sizes)))
    _, index = cKDTree(pixels).query(np.round(pixels.mean(axis=0)))
    return int(pixels[index][0]), int(pixels[index][1])


def ring(
    shape: tuple[int, int, int], z: int, top: int, left: int, height: int, width: int
) -> np.ndarray:
    volume = np.zeros(shape, dtype=bool)
    volume[z, top : top + height, left : left + width] = True
    volume[z, top + 1 : top + height - 1, left + 1 : left + width - 1] = False
    return volume


def test_centroid_offset_parity_the_issue_ring():
    """A 5 x 8 ring at offset (2, 3): the reference clicks (6, 6); rounding in the crop's
    coordinates gave (6, 7)."""
    gt = ring((3, 16, 16), 1, 2, 3, 5, 8)
    assert reference_click(gt[1]) == (6, 6)
    (point,) = (
        registry.prompters.create("center-point-per-slice", {}).initial(prompt_context(gt)).points
    )
    assert tuple(int(v) for v in point) == (1, 6, 6)


@pytest.mark.parametrize("top", [2, 3])
@pytest.mark.parametrize("left", [4, 5])
def test_centroid_offset_parity_every_offset_and_shape(top, left):
    """Random rings and blobs at both parities of each axis: center-point-per-slice equals the
    reference on every slice."""
    rng = np.random.default_rng(top * 10 + left)
    shape = (6, 48, 48)
    for _ in range(15):
        gt = np.zeros(shape, dtype=bool)
        for z in range(1, 5):
            height, width = (int(v) for v in rng.integers(3, 20, size=2))
            gt |= ring(
                shape,
                z,
                top + int(rng.integers(0, 2)) * 2,
                left + int(rng.integers(0, 2)) * 2,
                height,
                width,
            )
            if rng.random() < 0.5:  # a solid part too: centroids off the ring's centre
                gt[z, top : top + 3, left : left + int(rng.integers(2, 9))] = True
        prompt = registry.prompters.create("center-point-per-slice", {}).initial(prompt_context(gt))
        clicks = {int(p[0]): (int(p[1]), int(p[2])) for p in prompt.points}
        assert clicks == {z: reference_click(gt[z]) for z in range(1, 5)}


@pytest.mark.parametrize("name", ["point-interpolation", "center-points-per-volume"])
@pytest.mark.parametrize("shift", [0, 1])
def test_centroid_offset_parity_seed_clicks(name, shift):
    """Prompters whose seeds are centroid clicks on a crop: with the same ring on every slice,
    every click is the reference's click of that slice, at an odd and an even offset (rings of
    even width: centroids at x.5, where numpy's rounding depends on the parity)."""
    shape = (8, 40, 40)
    gt = np.zeros(shape, dtype=bool)
    for z in range(1, 7):
        gt |= ring(shape, z, 2 + shift, 3 + shift, 5, 8)
    prompt = registry.prompters.create(name, {}).initial(prompt_context(gt))
    for z, y, x in np.asarray(prompt.points):
        assert (int(y), int(x)) == reference_click(gt[z])


def test_centroid_offset_parity_positive_scribble():
    """The positive scribble's points are the reference's centroid clicks, one per slice of the
    false-negative component, wherever the error's crop starts."""
    shape = (8, 40, 40)
    base = np.zeros(shape, dtype=bool)
    for z in range(1, 7):
        base |= ring(shape, z, 2, 3, 5, 8 + 2 * (z % 2))
    empty = np.zeros(shape, dtype=bool)
    for gt in (base, np.roll(base, (0, 1, 1), axis=(0, 1, 2))):
        # nothing predicted: every error is a false negative, so the scribble is positive
        prompt = registry.refiners.create("scribble", {}).refine(
            refine_context(gt, empty, dimension=2)
        )
        (scribble,) = prompt.scribbles
        assert scribble.label == 1
        clicks = {int(p[0]): (int(p[1]), int(p[2])) for p in scribble.points}
        assert clicks == {z: reference_click(gt[z]) for z in range(1, 7)}
