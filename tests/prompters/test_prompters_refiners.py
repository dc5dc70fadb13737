"""Refiners on hand-made predictions with known errors."""

from __future__ import annotations

import numpy as np
import pytest
from prompter_testkit import box_mask, points_set, refine_context
from simulated_users import simulated

from intrabench import registry
from intrabench.types import Prompt

SHAPE = (12, 32, 32)


def make(name: str, **params):
    return registry.refiners.create(name, params)


@pytest.mark.parametrize("name", simulated(registry.refiners))
def test_a_perfect_prediction_gets_no_correction(name):
    gt = box_mask(SHAPE, (2, 10, 10), (4, 14, 14))
    assert make(name).refine(refine_context(gt, gt.copy())) is None
    empty = np.zeros(SHAPE, dtype=bool)
    assert make(name).refine(refine_context(empty, empty)) is None


# -- one corrective point per slice ------------------------------------------------------


def _missing_slice_and_stray_blob():
    gt = box_mask(SHAPE, (2, 10, 10), (4, 14, 14))
    prediction = gt.copy()
    prediction[3] = False  # false negatives on slice 3
    prediction[6, 20:23, 20:23] = True  # false positives on slice 6 (no target there)
    return gt, prediction


def test_corrective_point_per_slice_clicks_once_on_every_slice_with_an_error():
    gt, prediction = _missing_slice_and_stray_blob()
    prompt = make("corrective-point-per-slice").refine(refine_context(gt, prediction))
    by_slice = {
        int(p[0]): (tuple(p), int(label)) for p, label in zip(prompt.points, prompt.point_labels)
    }
    assert sorted(by_slice) == [3, 6]
    assert gt[by_slice[3][0]] and by_slice[3][1] == 1
    assert prediction[by_slice[6][0]] and by_slice[6][1] == 0
    assert prompt.effort == 2 and prompt.effort_label == "1X"
    assert prompt.slices() == [3, 6]  # the engine re-predicts exactly these slices


def test_corrective_point_per_slice_can_be_limited_to_the_initially_prompted_slices():
    gt, prediction = _missing_slice_and_stray_blob()
    history = [Prompt(points=[(2, 12, 12), (3, 12, 12), (4, 12, 12)], point_labels=[1, 1, 1])]
    prompt = make("corrective-point-per-slice", slices="prompted").refine(
        refine_context(gt, prediction, history=history)
    )
    assert prompt.points[:, 0].tolist() == [3] and prompt.effort == 1


def test_corrective_point_per_slice_center_placement_is_the_error_centre():
    gt, prediction = _missing_slice_and_stray_blob()
    prompt = make("corrective-point-per-slice", placement="center").refine(
        refine_context(gt, prediction)
    )
    assert points_set(prompt) == {(3, 12, 12), (6, 21, 21)}
    assert prompt.point_labels.tolist() == [1, 0]


# -- random corrective point(s) ----------------------------------------------------------


def test_random_corrective_points_sit_on_errors_with_their_true_label():
    gt, prediction = _missing_slice_and_stray_blob()
    prompt = make("random-corrective-point", n_points=4).refine(
        refine_context(gt, prediction, dimension=3)
    )
    assert len(points_set(prompt)) == 4
    index = tuple(prompt.points.T)
    assert (gt[index] != prediction[index]).all()
    assert (prompt.point_labels == gt[index]).all()
    assert prompt.effort == 4 and prompt.effort_label == "4"


# -- centre of the largest error ---------------------------------------------------------


def test_center_error_click_goes_to_the_middle_of_the_largest_error_component():
    gt = box_mask(SHAPE, (1, 5, 5), (9, 13, 13))  # 9^3 cube
    prediction = gt.copy()
    prediction[1:6, 5:10, 5:10] = False  # 5^3 false negatives, centre (3, 7, 7)
    prediction[0:3, 20:23, 20:23] = True  # 3^3 false positives, smaller
    prompt = make("center-error-click").refine(refine_context(gt, prediction, dimension=3))
    assert prompt.points.tolist() == [[3, 7, 7]] and prompt.point_labels.tolist() == [1]
    assert prompt.effort == 1 and prompt.effort_label == "1"


def test_center_error_click_labels_a_false_positive_negative():
    gt = box_mask(SHAPE, (4, 4, 4), (5, 5, 5))
    prediction = gt | box_mask(SHAPE, (3, 15, 15), (9, 21, 21))  # 7^3 FP, centre (6, 18, 18)
    prompt = make("center-error-click").refine(refine_context(gt, prediction, dimension=3))
    assert prompt.points.tolist() == [[6, 18, 18]] and prompt.point_labels.tolist() == [0]


def test_center_error_click_treats_the_image_border_as_boundary():
    gt = box_mask(SHAPE, (0, 0, 0), (11, 4, 31))  # a slab touching three borders
    prediction = np.zeros(SHAPE, dtype=bool)
    (point,) = make("center-error-click").refine(refine_context(gt, prediction)).points
    assert point[1] == 2  # the middle row of the 5-row slab, not a row at the border


def test_center_error_click_can_measure_in_millimetres_and_breaks_ties_randomly():
    gt = box_mask((9, 9, 9), (0, 0, 0), (8, 8, 8))
    prediction = np.zeros_like(gt)
    voxels = make("center-error-click").refine(refine_context(gt, prediction)).points
    assert voxels.tolist() == [[4, 4, 4]]
    # 5 mm slices: every slice is >= 5 mm from the z-boundary, so the in-plane centre of any
    # slice is a maximum (5 mm); the tie is broken by the rng
    zs = set()
    for seed in range(10):
        (point,) = (
            make("center-error-click", use_spacing=True)
            .refine(refine_context(gt, prediction, seed=seed, spacing=(5.0, 1.0, 1.0)))
            .points
        )
        assert point[1:].tolist() == [4, 4]
        zs.add(int(point[0]))
    assert len(zs) > 1


# -- scribbles ---------------------------------------------------------------------------


def test_positive_scribble_runs_through_the_centroid_of_the_largest_miss():
    gt = box_mask(SHAPE, (2, 10, 10), (6, 20, 20))
    prediction = gt.copy()
    prediction[3:6, 10:21, 10:15] = False  # FN: z 3..5, centroid (15, 12)
    prediction[2, 20, 20] = False  # a one-voxel miss elsewhere, smaller
    prompt = make("scribble").refine(refine_context(gt, prediction))
    (scribble,) = prompt.scribbles
    assert scribble.label == 1
    assert scribble.points.tolist() == [[3, 15, 12], [4, 15, 12], [5, 15, 12]]
    assert prompt.effort == 3 and prompt.effort_label == "3"
    assert prompt.slices() == [3, 4, 5]


def test_positive_scribble_takes_the_centre_of_each_slices_largest_piece():
    """A false-negative component that splits into two 2D pieces on one slice (joined through
    the slice below): on that slice the scribble goes through the larger piece's centre, as the
    reference; the centroid of both pieces fell on the small piece's edge."""
    gt = np.zeros(SHAPE, dtype=bool)
    gt[2:5, 8:20, 8:14] = True  # the main part: z 2..4, rows 8..19, cols 8..13
    gt[2:4, 8:11, 22:25] = True  # a small part, joined to the main one on z 2
    gt[2, 8:11, 14:22] = True  # the bridge on slice 2
    prediction = np.zeros_like(gt)  # everything missed: one 26-connected FN component
    prompt = make("scribble").refine(refine_context(gt, prediction))
    (scribble,) = prompt.scribbles
    on_slice_3 = [p for p in scribble.points.tolist() if p[0] == 3]
    # slice 3 holds the main piece (12 x 6, centre (13.5, 10.5), rounded half to even as the
    # reference does -> (14, 10), a pixel of it) and the small one (3 x 3); all pixels
    # together centre at (12.6, 12.0)
    assert on_slice_3 == [[3, 14, 10]]
    assert scribble.label == 1 and prompt.slices() == [2, 3, 4]


def test_negative_scribble_follows_the_contour_two_pixels_outside_the_target():
    gt = box_mask(SHAPE, (2, 10, 10), (8, 20, 20))
    prediction = gt | box_mask(SHAPE, (9, 10, 10), (10, 20, 20))  # over-segmented in z
    prompt = make("scribble").refine(refine_context(gt, prediction))
    (scribble,) = prompt.scribbles
    assert scribble.label == 0
    # most FPs: the coronal planes y = 10..20 tie, the first (y = 10) wins; the contour at
    # distance 2 passes through z = 10 over the target's x-range: all false positives
    assert points_set(Prompt(points=scribble.points, point_labels=[0] * len(scribble.points))) == {
        (10, 10, x) for x in range(10, 21)
    }


def test_negative_scribble_without_target_on_the_plane_is_still_negative():
    """The reference fell back to *positive* clicks on false positives (bug); not here."""
    gt = box_mask(SHAPE, (2, 10, 10), (8, 20, 20))
    prediction = gt | box_mask(SHAPE, (2, 6, 6), (8, 24, 24))  # a 4 px FP rim around it
    prompt = make("scribble").refine(refine_context(gt, prediction))
    (scribble,) = prompt.scribbles
    assert scribble.label == 0
    assert scribble.points.tolist() == [[z, 6, 15] for z in range(2, 9)]


def test_scribble_choice_follows_bernoulli_fn_over_fn_plus_fp():
    gt = box_mask(SHAPE, (2, 10, 10), (5, 13, 13))  # 64 voxels
    prediction = gt.copy()
    prediction[2:5, 10:13, 10:14] = False  # 48 FN
    prediction[7, 0:4, 0:4] = True  # 16 FP -> p(positive) = 0.75
    labels = [
        make("scribble").refine(refine_context(gt, prediction, seed=s)).scribbles[0].label
        for s in range(200)
    ]
    assert 0.65 < np.mean(labels) < 0.85


def test_scribble_for_3d_models_sends_one_negative_point_but_the_whole_positive_scribble():
    gt = box_mask(SHAPE, (2, 10, 10), (8, 20, 20))
    over = gt | box_mask(SHAPE, (9, 10, 10), (10, 20, 20))
    negative = make("scribble").refine(refine_context(gt, over, dimension=3))
    assert len(negative.points) == 1 and negative.point_labels.tolist() == [0]
    assert negative.points[0, 0] == 10 and not negative.scribbles and negative.effort == 3
    under = gt.copy()
    under[3:6] = False
    positive = make("scribble").refine(refine_context(gt, under, dimension=3))
    assert len(positive.scribbles[0].points) == 3 and positive.effort == 3
    single = make("scribble", three_d_points="one").refine(refine_context(gt, under, dimension=3))
    assert len(single.points) == 1 and single.point_labels.tolist() == [1]


def test_scribble_points_reach_point_only_models_as_clicks_on_errors():
    gt = box_mask(SHAPE, (2, 10, 10), (8, 20, 20))
    prediction = gt | box_mask(SHAPE, (9, 10, 10), (10, 20, 20))
    prompt = make("scribble").refine(refine_context(gt, prediction))
    points, labels = prompt.model_points()
    assert len(points) == 11 and (labels == 0).all()
    assert prediction[tuple(points.T)].all() and not gt[tuple(points.T)].any()
