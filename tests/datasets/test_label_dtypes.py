"""Target maps in the smallest integer type that holds them (a quarter of int32 on CT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import ndimage

from intrabench.datasets.nnunet_folder import (
    _TABLE_VALUES,
    build_targets,
    check_label_values,
    label_values,
    load_pair,
    smallest_label_dtype,
)
from intrabench.errors import DataError


def test_smallest_label_dtype():
    assert smallest_label_dtype(0) == np.uint8
    assert smallest_label_dtype(255) == np.uint8
    assert smallest_label_dtype(256) == np.uint16
    assert smallest_label_dtype(65535) == np.uint16
    assert smallest_label_dtype(65536) == np.int32


def test_few_targets_give_a_uint8_map_with_the_same_targets():
    label = np.zeros((2, 40, 40), dtype=np.uint8)
    label[0, 1, 1] = label[0, 10, 10] = label[1, 30, 30] = 1
    target_map, targets, _ = build_targets(label, {"lesion": 1}, {}, "connected_components")
    assert target_map.dtype == np.uint8
    assert [t.label_value for t in targets] == [1, 2, 3]
    assert sorted(np.unique(target_map).tolist()) == [0, 1, 2, 3]


def test_more_than_255_targets_widen_the_map_without_losing_any():
    spaced = np.zeros((1, 60, 60), dtype=np.uint8)
    spaced[0, ::3, ::3] = 1  # 400 voxels, none touching
    target_map, targets, _ = build_targets(spaced, {"lesion": 1}, {}, "connected_components")
    assert len(targets) == 400
    assert target_map.dtype == np.uint16
    assert target_map.max() == 400
    np.testing.assert_array_equal(target_map > 0, spaced > 0)
    assert len(np.unique(target_map[spaced > 0])) == 400


def test_organs_and_instances_share_one_compact_map():
    label = np.zeros((4, 10, 10), dtype=np.uint8)
    label[0, :5] = 2  # organ
    label[2, 1:3, 1:3] = 1
    label[2, 6:8, 6:8] = 1
    target_map, targets, _ = build_targets(label, {"liver": 2, "lesion": 1}, {"liver": "organ"})
    assert target_map.dtype == np.uint8
    assert [(t.target_id, t.label_value) for t in targets] == [
        ("lesion_1", 1),
        ("lesion_2", 2),
        ("liver", 3),
    ]


def test_label_files_of_any_integer_type_give_the_same_compact_case(tmp_path):
    image = np.zeros((3, 8, 8), dtype=np.float32)
    sitk.WriteImage(sitk.GetImageFromArray(image), str(tmp_path / "image.nii.gz"))
    masks = []
    for dtype, second in ((np.uint8, 2), (np.int32, 300)):
        label = np.zeros((3, 8, 8), dtype=dtype)
        label[1, 2:4, 2:4] = 1
        label[1, 5:7, 5:8] = second
        path = tmp_path / f"label-{np.dtype(dtype).name}.nii.gz"
        sitk.WriteImage(sitk.GetImageFromArray(label), str(path))
        case = load_pair(
            "d",
            "c",
            tmp_path / "image.nii.gz",
            path,
            {"a": 1, "b": second},
            {"a": "organ", "b": "organ"},
        )
        assert case.label.dtype == np.uint8  # two targets, whatever the file's values
        assert [t.target_id for t in case.targets] == ["a", "b"]
        masks.append([case.target_mask(t) for t in case.targets])
    assert [m.sum() for m in masks[0]] == [4, 6]
    for first, second in zip(*masks):
        np.testing.assert_array_equal(first, second)


@settings(max_examples=60, deadline=None)
@given(
    label=arrays(
        np.uint8,
        st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)),
        elements=st.integers(0, 3),
    ),
    values_mode=st.booleans(),
)
def test_the_boxes_build_targets_gives_are_those_a_search_of_the_map_finds(label, values_mode):
    """The boxes handed to the case (no second pass over the map) are exactly find_objects'."""
    if values_mode:
        classes, types, source = {"lesion": 1}, {}, "values"
    else:
        classes, types, source = (
            {"organ": 1, "a": 2, "b": 3},
            {"organ": "organ"},
            "connected_components",
        )
    if not label.any():
        return
    try:
        target_map, targets, boxes = build_targets(label, classes, types, source)
    except DataError:  # e.g. no target of the declared classes: not what is tested here
        return
    assert boxes is not None
    assert boxes == ndimage.find_objects(target_map)[: len(targets)]


def test_overlapping_class_definitions_give_no_boxes_or_a_clear_error():
    import pytest

    from intrabench.errors import DataError

    label = np.zeros((2, 6, 6), dtype=np.uint8)
    label[0, 1:3, 1:3] = 1
    with pytest.raises(DataError, match="no voxels"):  # the organ is entirely overwritten
        build_targets(label, {"organ": 1, "again": 1}, {"organ": "organ"})


LABEL_DTYPES = st.sampled_from(
    [
        np.uint8,
        np.int8,
        np.uint16,
        np.int16,
        np.uint32,
        np.int32,
        np.uint64,
        np.int64,
        np.float32,
        np.float64,
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_label_values_are_the_sorted_distinct_values(data):
    """Whatever the dtype and values (negative, fractional, beyond the table, empty): the
    values np.unique gives, in the label's dtype."""
    dtype = data.draw(LABEL_DTYPES)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
    values = (
        st.integers(int(info.min), int(info.max))
        if info
        else st.floats(-1e6, 1e6, allow_nan=False, width=32)
    )
    small = (
        st.integers(max(0, int(info.min)), min(9, int(info.max)))
        if info
        else st.sampled_from([0.0, 1.0, 2.5])
    )
    label = data.draw(
        arrays(
            dtype,
            st.tuples(st.integers(0, 3), st.integers(1, 5), st.integers(1, 5)),
            elements=st.one_of(small, values),
        )
    )
    found = label_values(label)
    np.testing.assert_array_equal(found, np.unique(label))
    assert found.dtype == label.dtype


def test_label_values_use_the_table_up_to_its_size_and_hash_beyond():
    """The table's edge: the largest value it takes, and one past it (hashed): both exact."""
    for largest in (_TABLE_VALUES - 1, _TABLE_VALUES):
        label = np.array([[[0, 5], [largest, 5]]], dtype=np.int64)
        assert label_values(label).tolist() == [0, 5, largest]
    assert label_values(np.zeros((0, 2, 2), np.uint8)).tolist() == []
    assert label_values(np.array([[[3, -2]]], np.int16)).tolist() == [-2, 3]


def test_reading_a_demo_case_ahead_imports_no_pandas():
    """The read-ahead worker's job on an nnU-Net case (uint8 labels, declared classes) leaves
    pandas unimported: its 0.25 s import would share the 2 cores with the first forward
    passes."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from intrabench.engine.case_reader import load_case\n"
        "case = load_case([], 'demo-real', {}, 'brain1', False)\n"
        "assert case.targets, 'no targets'\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([0.0, 1.0, np.nan], "must be whole numbers; found nan"),
        ([0.0, 1.0, np.inf], r"must lie in 0\.\.2147483647; found 0\.\.inf"),
        ([0.0, -np.inf], r"must lie in 0\.\.2147483647; found -inf\.\.0"),
        ([0, 2**40], r"must lie in 0\.\.2147483647; found 0\.\.1\.09951e\+12"),
        ([0, -3], r"must lie in 0\.\.2147483647; found -3\.\.0"),
        ([0, 1, 7], r"label values \[7\] are not declared classes"),
    ],
)
def test_hostile_label_values_are_refused_in_one_line(values, message):
    """NaN, infinities, negative, huge and undeclared values: a DataError naming them, whichever
    way :func:`label_values` took (the table or pandas)."""
    label = np.array([[values]], dtype=np.float64 if isinstance(values[0], float) else np.int64)
    with pytest.raises(DataError, match=message):
        check_label_values(label, Path("case.nii.gz"), {"lesion": 1})
