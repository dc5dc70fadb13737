"""The lasso prompter and the Lasso prompt (issue #18: nnInteractive's lasso)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from prompter_testkit import prompt_context

from intrabench import registry
from intrabench.errors import ConfigError
from intrabench.types import Lasso, Prompt


def _lasso(gt: np.ndarray, spacing=(1.0, 1.0, 1.0), **params) -> Prompt:
    prompter = registry.prompters.create("lasso", params)
    return prompter.initial(prompt_context(gt, spacing=spacing))


def test_a_square_without_margin_is_circled_by_its_own_corners():
    gt = np.zeros((5, 30, 40), bool)
    gt[1:4, 10:15, 20:25] = True
    prompt = _lasso(gt, margin_mm=0)
    (lasso,) = prompt.lassos
    assert lasso.z == 2 and lasso.label == 1  # the median of slices 1, 2, 3
    assert sorted(map(tuple, lasso.contour.tolist())) == [(10, 20), (10, 24), (14, 20), (14, 24)]
    np.testing.assert_array_equal(lasso.region((30, 40)), gt[2])
    assert prompt.effort == 3 and prompt.kinds == {"lasso"} and prompt.effort_label == "3"
    assert [i.kind for i in prompt.interactions] == ["lasso"]


def test_the_margin_is_in_millimetres_in_the_slice_plane():
    """A 5 x 5 square grown by 2 mm at 1 mm pixels: an octagon through (8, 20), (8, 24), ...;
    at 0.5 mm columns the same 2 mm reach 4 columns."""
    gt = np.zeros((1, 30, 40), bool)
    gt[0, 10:15, 20:25] = True
    (lasso,) = _lasso(gt).lassos
    assert sorted(map(tuple, lasso.contour.tolist())) == sorted(
        [(10, 26), (14, 26), (16, 24), (16, 20), (14, 18), (10, 18), (8, 20), (8, 24)]
    )
    assert lasso.region((30, 40)).sum() == 69
    (lasso,) = _lasso(gt, spacing=(3.0, 1.0, 0.5)).lassos
    assert lasso.contour[:, 1].min() == 16 and lasso.contour[:, 1].max() == 28
    assert lasso.contour[:, 0].min() == 8 and lasso.contour[:, 0].max() == 16


def test_one_pixel_and_one_line_give_degenerate_but_enclosing_lassos():
    gt = np.zeros((1, 9, 9), bool)
    gt[0, 4, 4] = True
    (lasso,) = _lasso(gt, margin_mm=0).lassos
    assert lasso.contour.tolist() == [[4, 4]]
    np.testing.assert_array_equal(lasso.region((9, 9)), gt[0])
    gt[0, 4, 2:7] = True
    (lasso,) = _lasso(gt, margin_mm=0).lassos
    assert lasso.contour.tolist() == [[4, 2], [4, 6]]
    np.testing.assert_array_equal(lasso.region((9, 9)), gt[0])


def test_an_empty_target_gets_no_lasso_and_a_negative_margin_is_refused():
    assert _lasso(np.zeros((2, 5, 5), bool)).is_empty
    with pytest.raises(ConfigError, match="margin_mm must be >= 0"):
        registry.prompters.create("lasso", {"margin_mm": -1})


masks = (
    st.tuples(st.integers(1, 4), st.integers(1, 14), st.integers(1, 14))
    .flatmap(lambda shape: arrays(bool, shape))
    .filter(lambda m: m.any())
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gt=masks, margin=st.sampled_from([0.0, 1.0, 2.5]))
def test_the_lasso_encloses_the_whole_cross_section_and_stays_in_its_grown_hull(gt, margin):
    """Whatever the target: the lasso is on a foreground slice, its vertices are pixels of the
    slice grown by the margin, and its region holds every target pixel of that slice."""
    from scipy import ndimage

    (lasso,) = _lasso(gt, margin_mm=margin).lassos
    assert gt[lasso.z].any()
    grown = ndimage.distance_transform_edt(~gt[lasso.z]) <= margin
    assert grown[tuple(lasso.contour.T)].all()
    region = lasso.region(gt.shape[1:])
    assert region[gt[lasso.z]].all()
    assert region.sum() <= grown.size


def test_lassos_survive_the_json_round_trip_and_merge():
    lasso = Lasso(3, np.array([[1, 1], [1, 6], [5, 6]]), 0)
    prompt = Prompt(points=np.array([[0, 2, 2]]), point_labels=np.array([1]), lassos=(lasso,))
    back = Prompt.from_json(prompt.to_json())
    assert back.lassos[0].z == 3 and back.lassos[0].label == 0
    assert back.lassos[0].contour.tolist() == [[1, 1], [1, 6], [5, 6]]
    assert back.kinds == {"point", "lasso"} and back.slices() == [0, 3]
    assert '"lassos"' not in Prompt(box3d=None).to_json()  # rows without lassos: unchanged
    assert len(prompt.merged_with(Prompt(lassos=(lasso,))).lassos) == 2
    assert prompt.summary()["n_lassos"] == 1
