"""Click policies in prompters and refiners: exact baseline clicks, group clicks inside the
region, the right labels, the image window."""

from __future__ import annotations

import numpy as np
import pytest

from intrabench import registry
from intrabench.clicks.policy import ClickPolicy, ImageWindow, parse_strategy
from intrabench.interfaces import PromptContext, RefineContext
from intrabench.seeding import derive_rng


def box(shape, low, high) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[low[0] : high[0] + 1, low[1] : high[1] + 1, low[2] : high[2] + 1] = True
    return mask


def policy(strategy: str, model: str = "distance") -> ClickPolicy:
    return ClickPolicy(registry.clickability.create(model), strategy, 10)


def prompt_context(gt, strategy, seed=0) -> PromptContext:
    return PromptContext(
        ground_truth=gt,
        spacing=(1.0, 1.0, 1.0),
        rng=derive_rng(seed, "clicks", "initial"),
        clicks=policy(strategy),
    )


def refine_context(gt, prediction, strategy, dimension=3, seed=0) -> RefineContext:
    return RefineContext(
        ground_truth=gt,
        prediction=prediction,
        spacing=(1.0, 1.0, 1.0),
        rng=derive_rng(seed, "clicks", 1),
        step=1,
        model_dimension=dimension,
        clicks=policy(strategy),
    )


def test_strategies_parse():
    assert parse_strategy("baseline", 10) is None and parse_strategy("G7", 10) == 7
    for bad in ("G0", "G11", "g3", "centre"):
        with pytest.raises(ValueError, match="baseline' or G1..G10"):
            parse_strategy(bad, 10)


def test_baseline_clicks_the_centre_of_the_target():
    gt = box((20, 30, 30), (4, 5, 6), (10, 11, 12))  # a 7-voxel cube: centre (7, 8, 9)
    prompt = registry.prompters.create("points-per-volume").initial(prompt_context(gt, "baseline"))
    assert prompt.points.tolist() == [[7, 8, 9]] and prompt.point_labels.tolist() == [1]
    # per slice: the centre of every slice's square, (8, 9)
    prompt = registry.prompters.create("center-point-per-slice").initial(
        prompt_context(gt, "baseline")
    )
    assert prompt.points.tolist() == [[z, 8, 9] for z in range(4, 11)]


def test_group_clicks_lie_in_the_target_and_likely_groups_go_deeper():
    gt = box((20, 30, 30), (2, 2, 2), (16, 26, 26))
    depth = {}
    for strategy in ("G1", "G10"):
        values = []
        for seed in range(40):
            prompt = registry.prompters.create("points-per-volume").initial(
                prompt_context(gt, strategy, seed)
            )
            ((z, y, x),) = prompt.points.tolist()
            assert gt[z, y, x]
            values.append(min(z - 1, 17 - z, y - 1, 27 - y, x - 1, 27 - x))
        depth[strategy] = np.mean(values)
    assert depth["G10"] > depth["G1"] + 3
    # the same seed gives the same click
    first = registry.prompters.create("points-per-volume", {"n_points": 3}).initial(
        prompt_context(gt, "G4", 5)
    )
    again = registry.prompters.create("points-per-volume", {"n_points": 3}).initial(
        prompt_context(gt, "G4", 5)
    )
    assert first.points.tolist() == again.points.tolist() and len(first.points) == 3
    assert len({tuple(p) for p in first.points.tolist()}) == 3


def test_every_click_prompter_follows_the_policy():
    gt = box((12, 30, 30), (3, 5, 5), (8, 20, 24))
    for name in ("points-per-slice", "center-points-per-volume", "alternating-points-per-slice"):
        prompter = registry.prompters.create(name)
        assert prompter.takes_click_policy
        prompt = prompter.initial(prompt_context(gt, "G2", 3))
        points = prompt.points
        labels = prompt.point_labels
        assert gt[tuple(points[labels == 1].T)].all()
        assert not gt[tuple(points[labels == 0].T)].any()
    assert not registry.prompters.get("box-3d").takes_click_policy


def test_refiners_click_in_the_error_with_its_label():
    gt = box((16, 30, 30), (2, 2, 2), (13, 27, 27))
    prediction = box((16, 30, 30), (2, 2, 2), (13, 27, 20))  # misses x 21..27: a false negative
    false_negative = gt & ~prediction
    for name in ("center-error-click", "cvpr25-click", "random-corrective-point"):
        for strategy in ("baseline", "G1", "G10"):
            prompt = registry.refiners.create(name).refine(refine_context(gt, prediction, strategy))
            assert false_negative[tuple(prompt.points.T)].all(), (name, strategy)
            assert prompt.point_labels.tolist() == [1]
    # the baseline is the centre of the error slab: x = 24, 4 voxels from both of its sides
    # (x 21..27); its depth along z and y is larger, so there it may be anywhere 4+ deep
    for seed in range(5):
        prompt = registry.refiners.create("center-error-click").refine(
            refine_context(gt, prediction, "baseline", seed=seed)
        )
        z, y, x = prompt.points[0]
        assert x == 24 and 5 <= y <= 24 and 5 <= z <= 10
    # a false positive gets label 0; per slice, one click on each slice with an error
    too_big = box((16, 30, 30), (2, 2, 2), (13, 27, 29))
    prompt = registry.refiners.create("corrective-point-per-slice").refine(
        refine_context(gt, too_big, "G5", dimension=2)
    )
    assert sorted(prompt.points[:, 0].tolist()) == list(range(2, 14))
    assert prompt.point_labels.tolist() == [0] * 12
    assert (prompt.points[:, 2] >= 28).all()


def test_image_window_crops_with_nan_outside():
    image = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    window = ImageWindow.around(image, (slice(2, 3), slice(2, 4), slice(3, 4)), margin=1)
    assert window.origin == (1, 1, 2) and window.array.shape == (3, 4, 3)
    crop = window.crop((0, 1, 2), (2, 2, 2))
    assert np.isnan(crop[0]).all()  # z = 0 is outside the window
    np.testing.assert_array_equal(crop[1], image[1, 1:3, 2:4])
    assert np.isnan(window.crop((4, 0, 0), (1, 1, 1))).all()


def test_an_image_model_sees_the_image_under_the_region():
    seen = {}

    class Spy(registry.clickability.get("uniform")):
        needs_image = True

        def weights(self, region):
            seen["image"], seen["origin"] = region.image, region.origin
            return super().weights(region)

    image = np.random.default_rng(0).normal(size=(10, 20, 20))
    gt = box((10, 20, 20), (3, 6, 7), (5, 12, 13))
    clicks = ClickPolicy(
        Spy(), "G3", 10, ImageWindow.around(image, (slice(3, 6), slice(6, 13), slice(7, 14)))
    )
    clicks.choose(gt[4], 1, np.random.default_rng(0), origin=(4, 0, 0))
    # the 2D region's crop: the slice's square (rows 6-12, columns 7-13) with a 4-voxel margin
    assert seen["origin"] == (4, 2, 3)
    np.testing.assert_allclose(seen["image"], image[4, 2:17, 3:18])


def test_point_interpolation_seeds_follow_the_policy():
    gt = box((12, 30, 30), (2, 5, 5), (10, 20, 20))
    prompter = registry.prompters.create("point-interpolation", {"n_slices": 3})
    assert prompter.takes_click_policy
    baseline = prompter.initial(prompt_context(gt, "baseline"))
    # every slice's square is rows and columns 5-20: the seeds' deepest pixels (y and x 12 or
    # 13), interpolated on every slice from 2 to 10
    assert baseline.points[:, 0].tolist() == list(range(2, 11))
    assert set(baseline.points[:, 1]) <= {12, 13} and set(baseline.points[:, 2]) <= {12, 13}
    assert baseline.effort == 3
    grouped = prompter.initial(prompt_context(gt, "G1", 2))
    assert gt[tuple(grouped.points.T)].all()  # a box target: interpolated clicks stay inside
