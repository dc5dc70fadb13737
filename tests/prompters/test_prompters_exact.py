"""Initial prompters on hand-made volumes with known answers (exact coordinates)."""

from __future__ import annotations

import numpy as np
import pytest
from prompter_testkit import box_mask, points_set, prompt_context

from intrabench import registry
from intrabench.types import Box2D, Box3D

SHAPE = (8, 32, 40)


def make(name: str, **params):
    return registry.prompters.create(name, params)


def test_center_point_per_slice_is_the_box_centre_on_every_slice():
    gt = box_mask(SHAPE, (2, 10, 20), (4, 14, 26))
    prompt = make("center-point-per-slice").initial(prompt_context(gt))
    assert points_set(prompt) == {(2, 12, 23), (3, 12, 23), (4, 12, 23)}
    assert prompt.point_labels.tolist() == [1, 1, 1]
    assert prompt.effort == 3 and prompt.effort_label == "1X"


def test_center_point_snaps_into_a_non_convex_slice():
    gt = np.zeros(SHAPE, dtype=bool)
    gt[3, 5:20, 5:8] = True  # an L: vertical bar ...
    gt[3, 17:20, 5:20] = True  # ... and horizontal bar; the centroid lies outside
    (point,) = make("center-point-per-slice").initial(prompt_context(gt)).points
    assert gt[tuple(point)]


def test_box_per_slice_is_tight_and_inclusive():
    gt = box_mask(SHAPE, (2, 10, 20), (4, 14, 26))
    gt[4, 14, 27] = True  # one more pixel widens only slice 4
    prompt = make("box-per-slice").initial(prompt_context(gt))
    assert prompt.boxes == {
        2: Box2D(10, 20, 14, 26),
        3: Box2D(10, 20, 14, 26),
        4: Box2D(10, 20, 14, 27),
    }
    assert prompt.effort == 6 and prompt.effort_label == "2X"


def test_box_per_slice_from_3d_box_covers_the_whole_z_range_including_gaps():
    gt = box_mask(SHAPE, (1, 5, 5), (2, 8, 8)) | box_mask(SHAPE, (4, 10, 15), (4, 12, 18))
    prompt = make("box-per-slice-from-3d-box").initial(prompt_context(gt))
    assert prompt.boxes == {z: Box2D(5, 5, 12, 18) for z in (1, 2, 3, 4)}
    assert prompt.box3d is None
    assert prompt.effort == 3 and prompt.effort_label == "3"
    box = make("box-3d").initial(prompt_context(gt))
    assert box.box3d == Box3D(1, 5, 5, 4, 12, 18) and box.effort == 3


def test_points_per_slice_draws_distinct_pixels_inside_each_slice():
    gt = box_mask(SHAPE, (2, 10, 20), (4, 14, 26))
    prompt = make("points-per-slice", n_points=3).initial(prompt_context(gt))
    assert len(points_set(prompt)) == 9
    assert gt[tuple(prompt.points.T)].all()
    assert sorted(np.bincount(prompt.points[:, 0]).tolist()) == [0, 0, 3, 3, 3]
    assert prompt.effort == 9 and prompt.effort_label == "3X"


def test_points_per_slice_caps_at_the_pixels_a_slice_has():
    gt = np.zeros(SHAPE, dtype=bool)
    gt[2, 3, 3] = gt[2, 3, 4] = True
    gt[3, 10:20, 10:20] = True
    prompt = make("points-per-slice", n_points=5).initial(prompt_context(gt))
    assert np.bincount(prompt.points[:, 0]).tolist() == [0, 0, 2, 5]
    assert prompt.effort == 7 and prompt.effort_label == "5X"


def test_alternating_points_alternate_and_negatives_lie_in_the_outer_band():
    gt = box_mask(SHAPE, (2, 10, 20), (3, 14, 26))
    prompt = make("alternating-points-per-slice", n_points=3).initial(prompt_context(gt))
    assert prompt.point_labels.tolist() == [1, 0, 1, 1, 0, 1]
    assert prompt.points[:, 0].tolist() == [2, 2, 2, 3, 3, 3]
    positives = prompt.points[prompt.point_labels == 1]
    negatives = prompt.points[prompt.point_labels == 0]
    assert gt[tuple(positives.T)].all()
    for _z, y, x in negatives:
        dy = max(10 - y, 0, y - 14)
        dx = max(20 - x, 0, x - 26)
        assert 2 < np.hypot(dy, dx) <= 5
    assert prompt.effort == 6 and prompt.effort_label == "3X"


def test_the_negative_ring_is_the_references_two_dilations():
    """dil(dil(GT, disk 2), disk 3) - dil(GT, disk 2), as the reference computes it with
    skimage discs; a Euclidean (2, 5] band would also hold offset (3, 4), at distance 5."""
    from scipy import ndimage
    from skimage.morphology import disk

    from intrabench.prompters._geometry import ring_2d

    single = np.zeros((21, 21), bool)
    single[10, 10] = True
    ring = ring_2d(single, 2.0, 5.0)
    assert not ring[10 + 3, 10 + 4] and not ring[10 + 4, 10 + 3]  # distance 5, not reachable
    assert ring[10, 15] and ring[10 + 3, 10 + 3] and ring[10, 13]
    assert not ring[10, 12] and not ring[10, 16]
    blob = np.zeros((40, 40), bool)
    blob[12:25, 15:22] = True
    blob[20:30, 10:30] = True
    near = ndimage.binary_dilation(blob, structure=disk(2))
    expected = ndimage.binary_dilation(near, structure=disk(3)) & ~near
    assert np.array_equal(ring_2d(blob, 2.0, 5.0), expected)


def test_point_interpolation_hits_every_slice_and_can_leave_the_target():
    gt = np.zeros((9, 32, 32), dtype=bool)
    for z in range(9):
        x = 10 if z <= 4 else 18
        gt[z, 9:12, x - 1 : x + 2] = True
    prompt = make("point-interpolation", n_slices=3).initial(prompt_context(gt))
    expected = [(z, 10, 10) for z in range(5)] + [
        (5, 10, 12),
        (6, 10, 14),
        (7, 10, 16),
        (8, 10, 18),
    ]
    assert [tuple(p) for p in prompt.points.tolist()] == expected
    assert not gt[5, 10, 12]  # the interpolated click on slice 5 misses the shifted target
    assert prompt.effort == 3 and prompt.effort_label == "3"


def test_point_interpolation_rounds_half_up_between_two_seeds():
    gt = np.zeros((4, 20, 20), dtype=bool)
    gt[0, 5, 10] = gt[3, 5, 11] = True
    gt[1, 0, 0] = gt[2, 0, 0] = True  # foreground slices in between, far away
    prompt = make("point-interpolation", n_slices=2).initial(prompt_context(gt))
    assert prompt.points.tolist() == [[0, 5, 10], [1, 5, 10], [2, 5, 11], [3, 5, 11]]
    assert prompt.effort == 2


def test_seed_slices_are_spread_from_first_to_last_foreground_slice():
    gt = box_mask((30, 8, 8), (3, 2, 2), (23, 4, 4))
    prompt = make("point-interpolation", n_slices=5).initial(prompt_context(gt))
    assert prompt.points[:, 0].tolist() == list(range(3, 24))
    assert prompt.effort == 5 and prompt.effort_label == "5"


def test_box_interpolation_rounds_outwards_between_seeds():
    gt = np.zeros((5, 32, 32), dtype=bool)
    gt[0, 10:13, 10:13] = True  # box (10, 10, 12, 12)
    gt[4, 11:14, 10:18] = True  # box (11, 10, 13, 17)
    prompt = make("box-interpolation", n_slices=2).initial(prompt_context(gt))
    assert prompt.boxes == {
        0: Box2D(10, 10, 12, 12),
        1: Box2D(10, 10, 13, 14),  # y_min 10.25 -> 10, y_max 12.25 -> 13, x_max 13.25 -> 14
        2: Box2D(10, 10, 13, 15),  # x_max 14.5 -> 15
        3: Box2D(10, 10, 13, 16),  # y_min 10.75 -> 10, x_max 15.75 -> 16
        4: Box2D(11, 10, 13, 17),
    }
    assert prompt.effort == 4 and prompt.effort_label == "4"


@pytest.mark.parametrize("shift", [3, 5])
def test_noisy_box_interpolation_moves_seed_corners_by_at_most_shift(shift):
    gt = box_mask((9, 64, 64), (0, 20, 20), (8, 40, 44))
    exact = make("box-interpolation", n_slices=3).initial(prompt_context(gt))
    moved = []
    for seed in range(10):
        noisy = make("box-interpolation", n_slices=3, shift=shift).initial(
            prompt_context(gt, seed=seed)
        )
        assert noisy.effort == 6
        for z in (0, 4, 8):
            delta = np.array(noisy.boxes[z].as_tuple()) - np.array(exact.boxes[z].as_tuple())
            assert np.abs(delta).max() <= shift
            moved.append(np.abs(delta).max())
    assert max(moved) > 0


def test_noisy_box_stays_inside_the_image_at_the_border():
    gt = box_mask((3, 16, 16), (0, 0, 0), (2, 3, 15))
    for seed in range(10):
        prompt = make("box-interpolation", n_slices=3, shift=5).initial(
            prompt_context(gt, seed=seed)
        )
        for box in prompt.boxes.values():
            assert 0 <= box.y_min <= box.y_max <= 15 and 0 <= box.x_min <= box.x_max <= 15


@pytest.mark.parametrize("n, zs", [(1, [4]), (3, [3, 4, 5])])
def test_center_points_per_volume_follow_the_centre_line(n, zs):
    gt = box_mask((10, 32, 32), (2, 10, 20), (6, 14, 24))
    prompt = make("center-points-per-volume", n_points=n).initial(prompt_context(gt))
    assert prompt.points.tolist() == [[z, 12, 22] for z in zs]
    assert prompt.effort == n and prompt.effort_label == str(n)


def test_center_points_per_volume_truncate_as_the_reference_on_an_even_line():
    # 4 slices (2..5): linspace(0, 3, 3)[1] = 1.5 -> 1 (the reference's dtype=int), so the one
    # click is on slice 3, not 4; with 2 clicks: linspace(0, 3, 4)[1:3] = 1, 2 -> slices 3, 4
    gt = box_mask((10, 32, 32), (2, 10, 20), (5, 14, 24))
    one = make("center-points-per-volume", n_points=1).initial(prompt_context(gt))
    assert one.points.tolist() == [[3, 12, 22]]
    two = make("center-points-per-volume", n_points=2).initial(prompt_context(gt))
    assert two.points.tolist() == [[3, 12, 22], [4, 12, 22]]


def test_center_points_per_volume_stay_distinct_and_inside_when_crowded():
    gt = box_mask((10, 32, 32), (2, 10, 20), (6, 14, 24))
    prompt = make("center-points-per-volume", n_points=10).initial(prompt_context(gt))
    assert len(points_set(prompt)) == 10 and gt[tuple(prompt.points.T)].all()


def test_points_per_volume_on_a_one_voxel_target_clicks_once():
    gt = np.zeros(SHAPE, dtype=bool)
    gt[7, 31, 39] = True
    prompt = make("points-per-volume", n_points=5).initial(prompt_context(gt))
    assert prompt.points.tolist() == [[7, 31, 39]] and prompt.effort == 1


def test_cvpr25_box_is_the_middle_slice_box_over_the_z_range():
    gt = box_mask((12, 64, 64), (2, 20, 20), (5, 30, 30))  # unique z 2..5 -> z_mid = 4
    gt[4, 18:33, 25:40] = True
    prompt = make("cvpr25-box", max_shift=0).initial(prompt_context(gt))
    assert prompt.box3d == Box3D(2, 18, 20, 5, 32, 39)
    assert prompt.boxes == {} and prompt.effort == 4 and prompt.effort_label == "4"


def test_cvpr25_box_shift_is_shared_scaled_and_clipped():
    gt = box_mask((5, 512, 256), (1, 2, 100), (3, 40, 120))
    seen = set()
    for seed in range(20):
        box = make("cvpr25-box").initial(prompt_context(gt, seed=seed)).box3d
        s = 100 - box.x_min  # x scale 256 / 256 = 1
        assert 0 <= s <= 5 and box.x_max == 120 + s
        assert box.y_min == max(0, 2 - 2 * s) and box.y_max == 40 + 2 * s  # y scale 2
        assert (box.z_min, box.z_max) == (1, 3)
        seen.add(s)
    assert len(seen) > 1
