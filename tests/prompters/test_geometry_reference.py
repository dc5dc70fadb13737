"""Hand-made cases where the reference's choices decide the click (centroid rounding before the
snap, cKDTree ties) and the largest-component ties."""

from __future__ import annotations

import numpy as np

from intrabench.prompters._geometry import centroid_point_2d, largest_component


def test_a_ring_is_clicked_where_the_rounded_centroid_leads():
    """A ring of radius 10 around (20.4, 20.4): the centroid falls in the hole; rounded to
    (20, 20), its nearest ring pixel is the reference's, the unrounded one is another."""
    yy, xx = np.mgrid[:41, :41]
    distance = np.hypot(yy - 20.4, xx - 20.4)
    ring = (distance >= 9.5) & (distance < 10.5)
    pixels = np.argwhere(ring)
    centre = pixels.mean(axis=0)
    from scipy.spatial import cKDTree

    _, index = cKDTree(pixels).query(np.round(centre))
    assert centroid_point_2d(ring) == tuple(int(v) for v in pixels[index]) == (19, 11)
    assert ring[centroid_point_2d(ring)]
    # the unrounded centroid (20.05, 20.05) snaps elsewhere on the ring: 11 px away
    unrounded = pixels[np.argmin(((pixels - centre) ** 2).sum(axis=1))]
    assert tuple(unrounded) == (11, 19)


def test_equal_size_components_tie_to_the_lowest_label():
    """Two 3 x 3 squares: the largest-component tie goes to the first in scan order (label 1),
    and the click is that square's centre."""
    mask = np.zeros((10, 12), bool)
    mask[6:9, 1:4] = True  # scanned second (lower rows) ...
    mask[1:4, 7:10] = True  # ... this one first: label 1
    chosen = largest_component(mask)
    assert chosen[1:4, 7:10].all() and not chosen[6:9, 1:4].any()
    assert centroid_point_2d(mask) == (2, 8)
