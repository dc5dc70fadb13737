"""intrabench.masks.boxes: one box convention (half-open slices), its conversions, and masks
that carry their known box."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from intrabench.masks import (
    UNKNOWN,
    bounding_box,
    box_from_inclusive,
    inclusive_corners,
    known_box,
    mask_corners,
    masks_equal,
    measure_box,
    union_of_boxes,
    with_box,
)
from intrabench.types import Box2D, Box3D

small_masks = arrays(
    bool, st.tuples(st.integers(1, 6), st.integers(1, 7), st.integers(1, 7)), elements=st.booleans()
)
corners = st.lists(st.integers(0, 50), min_size=3, max_size=3)


def test_a_mask_with_its_box_answers_from_it_and_derived_arrays_measure():
    mask = np.zeros((4, 5, 6), dtype=bool)
    mask[2, 2, 2] = True
    carrier = with_box(mask, (slice(2, 3),) * 3)
    assert not carrier.flags.writeable and not mask.flags.writeable
    assert known_box(carrier) == (slice(2, 3),) * 3
    # the vouched box is what comes back (deliberately another one here): it is not measured
    vouched = with_box(np.zeros((4, 5, 6), dtype=bool), (slice(0, 1),) * 3)
    assert bounding_box(vouched) == (slice(0, 1),) * 3
    # views, copies and results of operations forget it
    assert known_box(carrier[1:]) is UNKNOWN
    assert bounding_box(carrier[1:]) == (slice(1, 2), slice(2, 3), slice(2, 3))
    assert known_box(carrier.copy()) is UNKNOWN
    assert known_box(carrier & carrier) is UNKNOWN
    # results of operations are what an ndarray gives: plain arrays and numpy scalars
    assert type(carrier & carrier) is np.ndarray and type(carrier.sum()) is np.int64
    assert type(carrier.any()) is np.bool_ and int(carrier.sum()) == 1
    assert type(carrier.astype(np.uint8)) is np.ndarray and type(carrier.copy()) is np.ndarray
    assert bounding_box(np.asarray(carrier)) == (slice(2, 3),) * 3


def test_a_writable_mask_is_measured_every_time():
    mask = np.zeros((4, 5, 6), dtype=bool)
    mask[1:3, 2, 3:5] = True
    assert bounding_box(mask) == (slice(1, 3), slice(2, 3), slice(3, 5))
    mask[0, 0, 0] = True
    assert bounding_box(mask) == (slice(0, 3), slice(0, 3), slice(0, 5))
    assert known_box(mask) is UNKNOWN


def test_a_view_is_made_read_only_but_carries_nothing():
    owner = np.zeros((3, 3, 3), dtype=bool)
    view = owner[1:]
    assert with_box(view, None) is view and not view.flags.writeable
    assert known_box(view) is UNKNOWN


def test_the_known_box_survives_pickling_read_only():
    mask = np.zeros((3, 4, 5), dtype=bool)
    mask[1, 2, 3] = True
    carrier = with_box(mask, ((slice(1, 2), slice(2, 3), slice(3, 4))))
    back = pickle.loads(pickle.dumps(carrier))
    np.testing.assert_array_equal(back, mask)
    assert not back.flags.writeable
    assert known_box(back) == (slice(1, 2), slice(2, 3), slice(3, 4))
    assert known_box(pickle.loads(pickle.dumps(np.array(carrier)))) is UNKNOWN


def test_empty_masks_and_unions():
    empty = np.zeros((3, 3, 3), dtype=bool)
    assert bounding_box(empty) is None and union_of_boxes([None, None]) is None
    assert known_box(with_box(empty.copy(), None)) is None
    with pytest.raises(ValueError, match="bounding box of an empty mask"):
        mask_corners(empty)
    boxes = [(slice(2, 4), slice(1, 5), slice(7, 8)), None, (slice(5, 7), slice(3, 4), slice(1, 3))]
    assert union_of_boxes(boxes) == (slice(2, 7), slice(1, 5), slice(1, 8))


@settings(max_examples=200, deadline=None)
@given(small_masks)
def test_the_box_is_the_smallest_holding_every_voxel(mask):
    box = measure_box(mask)
    if not mask.any():
        assert box is None
        return
    assert mask[box].sum() == mask.sum()
    low, high = mask_corners(mask)
    where = np.argwhere(mask)
    np.testing.assert_array_equal(low, where.min(axis=0))
    np.testing.assert_array_equal(high, where.max(axis=0))
    assert measure_box(np.asfortranarray(mask)) == box


@settings(max_examples=200, deadline=None)
@given(small_masks, small_masks)
def test_masks_equal_is_array_equal(first, second):
    shape = tuple(min(a, b) for a, b in zip(first.shape, second.shape))
    a = first[: shape[0], : shape[1], : shape[2]].copy()
    b = second[: shape[0], : shape[1], : shape[2]].copy()
    assert masks_equal(a, b) == np.array_equal(a, b)
    assert masks_equal(a, a.copy())


@settings(max_examples=300, deadline=None)
@given(corners, st.lists(st.integers(0, 20), min_size=3, max_size=3))
def test_inclusive_corners_and_slices_round_trip(low, size):
    high = [lo + s for lo, s in zip(low, size)]
    box = box_from_inclusive(low, high)
    assert [s.stop - s.start for s in box] == [s + 1 for s in size]
    back_low, back_high = inclusive_corners(box)
    assert back_low.tolist() == low and back_high.tolist() == high
    assert box_from_inclusive(back_low, back_high) == box


@settings(max_examples=300, deadline=None)
@given(corners, st.lists(st.integers(0, 20), min_size=3, max_size=3))
def test_the_prompt_boxes_convert_to_and_from_the_one_box(low, size):
    high = [lo + s for lo, s in zip(low, size)]
    box = box_from_inclusive(low, high)
    box3d = Box3D.from_box(box)
    assert box3d.as_tuple() == (*low, *high)
    assert box3d.to_box() == box
    plane = Box2D.from_box(box[1:])
    assert plane.as_tuple() == (low[1], low[2], high[1], high[2])
    assert plane.to_box() == box[1:]
    # the box of a mask filled inside the prompt box is that box
    mask = np.zeros([h + 2 for h in high], dtype=bool)
    mask[box] = True
    assert Box3D.from_box(bounding_box(mask)) == box3d
