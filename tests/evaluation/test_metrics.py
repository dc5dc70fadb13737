"""Per-step metrics: hand-computed values and agreement with MONAI (1e-6)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from monai.metrics import DiceMetric, compute_hausdorff_distance, compute_surface_dice

from intrabench.evaluation.metrics import (
    dice,
    hausdorff_distance_95,
    iou,
    normalized_surface_dice,
    step_metrics,
    surface,
)
from intrabench.masks import bounding_box, union_of_boxes

from .shapes import sphere


def monai_values(pred: np.ndarray, gt: np.ndarray, spacing, tolerance: float) -> dict:
    y_pred = torch.from_numpy(pred[None, None].astype(np.float32))
    y = torch.from_numpy(gt[None, None].astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metric = DiceMetric(include_background=True, reduction="none", ignore_empty=False)
        dsc = float(metric(y_pred, y)[0, 0])
        nsd = float(
            compute_surface_dice(
                y_pred, y, [tolerance], include_background=True, spacing=list(spacing)
            )[0, 0]
        )
        hd = float(
            compute_hausdorff_distance(
                y_pred, y, include_background=True, percentile=95, spacing=list(spacing)
            )[0, 0]
        )
    return {"dice": dsc, "nsd": nsd, "hd95": hd}


def test_two_spheres_hand_computed():
    # Two cubes are the hand-computable "spheres": 4x4x4 at offset 2 along x overlap 4x4x2.
    a = np.zeros((10, 10, 12), bool)
    b = np.zeros_like(a)
    a[3:7, 3:7, 3:7] = True
    b[3:7, 3:7, 5:9] = True
    m = step_metrics(a, b, (1.0, 1.0, 1.0), nsd_tolerance_mm=1.0)
    assert m["true_positives"] == 32 and m["false_positives"] == 32 and m["false_negatives"] == 32
    assert m["dice"] == pytest.approx(0.5)
    assert m["iou"] == pytest.approx(32 / 96)
    # Surface of a 4^3 cube: 64 - 8 interior = 56 voxels. A's x=3,4 layers (16 voxels, all
    # on the surface) are > 1 mm from B's surface; the rest of A's surface is within 1 mm.
    assert m["nsd"] == pytest.approx((2 * (56 - 16)) / 112)
    assert m["hd95"] == pytest.approx(2.0)


def test_identical_and_disjoint():
    s = sphere((20, 20, 40), (10, 10, 10), 5)
    m = step_metrics(s, s, (1.0, 1.0, 1.0))
    assert (m["dice"], m["iou"], m["nsd"], m["hd95"]) == (1.0, 1.0, 1.0, 0.0)
    far = np.roll(s, 14, axis=2)  # no overlap, surfaces 4 voxels apart
    far_metrics = step_metrics(s, far, (1.0, 1.0, 1.0))
    assert far_metrics["dice"] == 0.0 and far_metrics["nsd"] == 0.0
    # Nearest surfaces are 4 mm apart (x = 15 vs 19), so the 95th percentile is larger.
    assert far_metrics["hd95"] > 4.0


def test_empty_prediction_conventions():
    gt = sphere((16, 16, 16), (8, 8, 8), 4)
    empty = np.zeros_like(gt)
    m = step_metrics(empty, gt, (1.0, 1.0, 1.0))
    assert m["dice"] == 0.0 and m["iou"] == 0.0 and m["nsd"] == 0.0
    assert math.isnan(m["hd95"])
    assert m["false_negatives"] == int(gt.sum())
    both = step_metrics(empty, empty, (1.0, 1.0, 1.0))
    assert both["dice"] == 1.0 and both["iou"] == 1.0 and both["nsd"] == 1.0
    assert math.isnan(both["hd95"])
    assert dice(empty, gt) == 0.0 and iou(empty, gt) == 0.0
    assert normalized_surface_dice(empty, gt, (1, 1, 1)) == 0.0
    assert math.isnan(hausdorff_distance_95(gt, empty, (1, 1, 1)))


def test_multi_instance_case_uses_the_known_pairing():
    # Label map with three instances; each target is scored against its own mask only.
    label = np.zeros((20, 40, 40), np.uint8)
    label[5:10, 5:10, 5:10] = 1
    label[5:10, 20:30, 20:30] = 2
    label[12:16, 30:36, 2:8] = 3
    predictions = {
        1: label == 1,  # perfect
        2: (label == 2) | (label == 1),  # covers instance 1 as well: FP = 125
        3: np.zeros_like(label, dtype=bool),  # missed
    }
    scores = {
        k: step_metrics(p, label == k, (2.0, 1.0, 1.0))["dice"] for k, p in predictions.items()
    }
    assert scores[1] == 1.0
    assert scores[2] == pytest.approx(2 * 500 / (625 + 500))
    assert scores[3] == 0.0


def test_bounding_boxes():
    mask = np.zeros((8, 9, 10), bool)
    assert bounding_box(mask) is None and union_of_boxes([bounding_box(mask)] * 2) is None
    mask[2, 3:5, 7] = True
    other = np.zeros_like(mask)
    other[6, 1, 1] = True
    assert bounding_box(mask) == (slice(2, 3), slice(3, 5), slice(7, 8))
    assert union_of_boxes(map(bounding_box, (mask, other))) == (
        slice(2, 7),
        slice(1, 5),
        slice(1, 8),
    )


def test_surface_matches_scipy_erosion():
    from scipy.ndimage import binary_erosion

    rng = np.random.default_rng(0)
    mask = rng.random((12, 13, 14)) > 0.4
    np.testing.assert_array_equal(surface(mask), mask ^ binary_erosion(mask))


CASES = [
    # (description, shape, center_a, radius_a, center_b, radius_b, spacing)
    ("offset spheres iso", (40, 40, 40), (20, 20, 20), 8, (20, 22, 19), 7, (1.0, 1.0, 1.0)),
    ("anisotropic z", (24, 48, 48), (12, 24, 24), 9, (13, 26, 23), 8, (3.0, 0.8, 0.8)),
    ("anisotropic all axes", (30, 36, 44), (15, 18, 20), 10, (14, 17, 24), 9, (2.5, 0.7, 1.3)),
    ("touching the border", (20, 20, 20), (0, 10, 10), 6, (2, 12, 9), 6, (1.5, 1.0, 0.5)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("tolerance", [1.0, 2.0])
def test_agrees_with_monai(case, tolerance):
    _, shape, ca, ra, cb, rb, spacing = case
    pred = sphere(shape, ca, ra, spacing)
    gt = sphere(shape, cb, rb, spacing)
    ours = step_metrics(pred, gt, spacing, nsd_tolerance_mm=tolerance)
    reference = monai_values(pred, gt, spacing, tolerance)
    assert ours["dice"] == pytest.approx(reference["dice"], abs=1e-6)
    assert ours["nsd"] == pytest.approx(reference["nsd"], abs=1e-6)
    # MONAI returns float32; compare relative to the value (float32 has ~7 significant digits).
    assert ours["hd95"] == pytest.approx(reference["hd95"], rel=1e-6, abs=1e-6)
    assert 0 < ours["nsd"] < 1


def test_spacing_order_matters():
    # Two single voxels one index apart along axis 0 (z): their distance is the z spacing.
    a = np.zeros((4, 4, 4), bool)
    b = np.zeros_like(a)
    a[1, 2, 2] = True
    b[2, 2, 2] = True
    thick_z = step_metrics(a, b, (5.0, 1.0, 1.0), nsd_tolerance_mm=2.0)
    thick_x = step_metrics(a, b, (1.0, 1.0, 5.0), nsd_tolerance_mm=2.0)
    assert thick_z["hd95"] == 5.0 and thick_z["nsd"] == 0.0
    assert thick_x["hd95"] == 1.0 and thick_x["nsd"] == 1.0
    assert thick_z["voxel_volume_mm3"] == 5.0


def test_random_shapes_against_monai_with_both_distance_paths():
    # Irregular masks; a large sparse crop exercises the KD-tree path, a compact one the EDT.
    rng = np.random.default_rng(7)
    for trial in range(4):
        shape = (18, 22, 26) if trial % 2 == 0 else (60, 70, 80)
        pred = np.zeros(shape, bool)
        gt = np.zeros(shape, bool)
        for mask in (pred, gt):
            for _ in range(3):
                z, y, x = (int(rng.integers(2, s - 6)) for s in shape)
                mask[z : z + 4, y : y + int(rng.integers(2, 6)), x : x + 3] = True
        spacing = tuple(float(v) for v in rng.uniform(0.5, 3.0, 3))
        ours = step_metrics(pred, gt, spacing, nsd_tolerance_mm=2.0)
        reference = monai_values(pred, gt, spacing, 2.0)
        assert ours["dice"] == pytest.approx(reference["dice"], abs=1e-6)
        assert ours["nsd"] == pytest.approx(reference["nsd"], abs=1e-6)
        assert ours["hd95"] == pytest.approx(reference["hd95"], rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("z_positions", [(0,), (39,), (3, 17), (8, 9), (0, 39), (15, 16, 31)])
def test_bounding_box_matches_projection(z_positions):
    mask = np.zeros((40, 6, 7), bool)
    for i, z in enumerate(z_positions):
        mask[z, i % 6, (2 * i) % 7] = True
    expected = tuple(
        slice(
            int(np.flatnonzero(mask.any(axis=tuple(o for o in range(3) if o != a)))[0]),
            int(np.flatnonzero(mask.any(axis=tuple(o for o in range(3) if o != a)))[-1]) + 1,
        )
        for a in range(3)
    )
    assert bounding_box(mask) == expected
    assert bounding_box(np.asfortranarray(mask)) == expected  # non-contiguous path


def test_both_distance_methods_agree():
    from intrabench.masks.distance import _distances_by_transform as _distances_edt
    from intrabench.masks.distance import _distances_kdtree

    rng = np.random.default_rng(1)
    sources = rng.random((15, 17, 19)) > 0.9
    targets = rng.random((15, 17, 19)) > 0.95
    spacing = np.array([2.5, 0.7, 1.1])
    edt = _distances_edt(sources, targets, spacing)
    tree = _distances_kdtree(sources, targets, spacing)
    assert edt.shape == (int(sources.sum()),)
    np.testing.assert_allclose(edt, tree, rtol=0, atol=1e-9)
    assert (edt[targets[sources]] == 0).all()


# --------------------------------------------------------------------------------------
# NSD at exact ties: a surface distance equal to the tolerance counts as within it
# --------------------------------------------------------------------------------------


def test_nsd_exact_tie_on_the_kdtree_path():
    # Ground truth at x = 0 and 3, prediction at x = 2, spacing 0.7 mm along x, tolerance
    # 0.7 mm: the prediction voxel is 1 voxel (0.7 mm) from x = 3, within the tolerance; the
    # ground truth at x = 3 is 0.7 mm from it too; x = 0 is 1.4 mm away. NSD = 2/3 exactly.
    from intrabench.masks.distance import _distances_by_transform as _distances_edt
    from intrabench.masks.distance import _distances_kdtree

    gt = np.zeros((1, 1, 4), bool)
    gt[0, 0, [0, 3]] = True
    pred = np.zeros_like(gt)
    pred[0, 0, 2] = True
    spacing = (1.0, 1.0, 0.7)
    assert step_metrics(pred, gt, spacing, nsd_tolerance_mm=0.7)["nsd"] == pytest.approx(2 / 3)
    assert normalized_surface_dice(pred, gt, spacing, 0.7) == pytest.approx(2 / 3)
    assert monai_values(pred, gt, spacing, 0.7)["nsd"] == pytest.approx(2 / 3)
    sampling = np.asarray(spacing)
    # Both paths give the EDT's arithmetic: sqrt((1 * 0.7) ** 2), not 4 * 0.7 - 3 * 0.7.
    np.testing.assert_array_equal(
        _distances_kdtree(gt, pred, sampling), _distances_edt(gt, pred, sampling)
    )
    assert _distances_kdtree(pred, gt, sampling)[0] <= 0.7


TIE_SPACINGS = [0.1, 0.3, 0.4, 0.7, 0.8, 1.0, 1.5]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_nsd_matches_monai_at_tie_prone_spacings(data):
    """Sparse random masks, spacings like 0.4/0.7/0.8 mm and tolerances that are whole multiples
    of them (so many distances equal the tolerance): both distance paths agree with MONAI."""
    from intrabench.evaluation.metrics import _nsd
    from intrabench.masks.distance import _distances_by_transform as _distances_edt
    from intrabench.masks.distance import _distances_kdtree

    shape = tuple(data.draw(st.integers(1, 6), label=f"size{a}") for a in range(3))
    seed = data.draw(st.integers(0, 2**16), label="seed")
    rng = np.random.default_rng(seed)
    pred = rng.random(shape) > 0.7
    gt = rng.random(shape) > 0.7
    if not pred.any() or not gt.any():
        return
    spacing = tuple(data.draw(st.sampled_from(TIE_SPACINGS), label=f"s{a}") for a in range(3))
    tolerance = data.draw(st.sampled_from(spacing), label="axis") * data.draw(
        st.integers(1, 3), label="multiple"
    )
    reference = monai_values(pred, gt, spacing, tolerance)["nsd"]
    padded_pred, padded_gt = np.pad(pred, 1), np.pad(gt, 1)
    pred_surface, gt_surface = surface(padded_pred), surface(padded_gt)
    sampling = np.asarray(spacing, dtype=np.float64)
    for method in (_distances_edt, _distances_kdtree):
        distances = (
            method(pred_surface, gt_surface, sampling),
            method(gt_surface, pred_surface, sampling),
        )
        assert _nsd(distances, tolerance) == pytest.approx(reference, abs=1e-6), method.__name__
    assert step_metrics(pred, gt, spacing, tolerance)["nsd"] == pytest.approx(reference, abs=1e-6)


def test_a_distance_equal_to_the_tolerance_across_axes_is_within():
    """Hypothesis found it: 3 voxels of 0.1 mm along x against a 0.3 mm tolerance (the z
    spacing) computes as 0.30000000000000004 mm; it is a tie, within the tolerance (MONAI: 1.0)."""
    pred = np.zeros((1, 1, 6), dtype=bool)
    gt = np.zeros((1, 1, 6), dtype=bool)
    pred[0, 0, [4, 5]] = True
    gt[0, 0, [1, 3, 4]] = True
    spacing = (0.3, 0.1, 0.1)
    assert monai_values(pred, gt, spacing, 0.3)["nsd"] == pytest.approx(1.0)
    assert step_metrics(pred, gt, spacing, 0.3)["nsd"] == 1.0
    # a hair below the tie, the farthest surface voxel (0.3 mm away) is outside
    assert step_metrics(pred, gt, spacing, 0.2999)["nsd"] == pytest.approx(0.8)
