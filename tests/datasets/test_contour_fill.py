"""The RTSTRUCT contour fill gives exactly the pixels of the fill it replaced (the reference,
``_reference_fill.py``): on random polygons (hypothesis: vertices on integers, half-integers
and anywhere, inside and outside the image, few and many crossings per row), on a circle and a
comb, and through ``read_rtstruct`` (holes, overlapping contours on one slice, a contour over
the image's edge) against ``read_rtstruct`` with the reference fill."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence
from pydicom.uid import generate_uid

from intrabench.datasets import dicom
from intrabench.datasets._decimals import parse_decimals
from intrabench.datasets.dicom import (
    _polygon_box,
    fill_polygon,
    read_rtstruct,
    read_series,
)

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct  # noqa: E402
from _reference_fill import reference_fill  # noqa: E402

SHAPE = (40, 48)


def _coordinate(low: float, high: float):
    return st.one_of(
        st.integers(int(low), int(high)).map(float),
        st.integers(int(2 * low), int(2 * high)).map(lambda v: v / 2),
        st.floats(low, high, allow_nan=False, allow_infinity=False),
    )


polygons = st.integers(3, 60).flatmap(
    lambda n: st.tuples(
        st.lists(_coordinate(-6, SHAPE[0] + 6), min_size=n, max_size=n),
        st.lists(_coordinate(-6, SHAPE[1] + 6), min_size=n, max_size=n),
    )
)


@settings(max_examples=250, deadline=None)
@given(polygons)
def test_the_fill_is_the_reference_fill_on_random_polygons(polygon):
    rows, columns = (np.asarray(v, dtype=float) for v in polygon)
    np.testing.assert_array_equal(
        fill_polygon(rows, columns, SHAPE), reference_fill(rows, columns, SHAPE)
    )


def test_both_ways_of_filling_rows_are_taken_and_agree():
    """A circle (2 crossings a row: spans by comparison) and a comb of 9 teeth (18: a running
    sum), hand-checked: the comb's row 5 has its 9 teeth of 2 pixels."""
    angles = np.linspace(0, 2 * np.pi, 400, endpoint=False)
    rows, columns = 20 + 15.3 * np.sin(angles), 24 + 17.7 * np.cos(angles)
    np.testing.assert_array_equal(
        fill_polygon(rows, columns, SHAPE), reference_fill(rows, columns, SHAPE)
    )
    comb = [(12.5, 1.5)]
    for t in range(9):  # up the tooth's left side, across, down its right side
        comb += [(10.5, 4 * t + 1.5), (0.5, 4 * t + 1.5), (0.5, 4 * t + 3.5), (10.5, 4 * t + 3.5)]
    comb[-1] = (12.5, 35.5)  # the last tooth's right side runs down to the spine's bottom
    comb_rows, comb_columns = (np.asarray(v) for v in zip(*comb))
    filled = fill_polygon(comb_rows, comb_columns, SHAPE)
    np.testing.assert_array_equal(filled, reference_fill(comb_rows, comb_columns, SHAPE))
    assert np.flatnonzero(filled[5]).tolist() == [
        c for t in range(9) for c in (4 * t + 2, 4 * t + 3)
    ]


def test_a_polygon_off_the_image_has_no_box():
    assert _polygon_box(np.array([-5.0, -2, -3]), np.array([1.0, 4, 9]), SHAPE) is None
    assert _polygon_box(np.array([3.2, 3.8, 3.5]), np.array([1.0, 4, 9]), SHAPE) is None


def _contour(points_ij: np.ndarray, k: int, origin, spacing) -> Dataset:
    item = Dataset()
    item.ContourGeometricType = "CLOSED_PLANAR"
    item.NumberOfContourPoints = len(points_ij)
    x = origin[0] + points_ij[:, 0] * spacing[0]
    y = origin[1] + points_ij[:, 1] * spacing[1]
    z = np.full(len(points_ij), origin[2] + k * spacing[2])
    item.ContourData = [f"{v:.6g}" for v in np.column_stack([x, y, z]).ravel()]
    return item


def test_read_rtstruct_gives_the_masks_of_the_reference_fill(tmp_path, monkeypatch):
    """A ring (outer and inner outline on one slice), two overlapping random polygons on one
    slice, and an outline over the image's edge, as written to the file (6 digits)."""
    spacing, origin = (0.8, 0.7, 2.5), (-10.0, 20.0, 30.0)
    sources = write_ct(
        tmp_path / "CT",
        np.zeros((4, 30, 34), np.int16),
        spacing=spacing,
        origin=origin,
        patient="p",
        study_uid=generate_uid(),
    )
    ds = write_rtstruct(tmp_path / "RS.dcm", sources, {"ring": [], "random": [], "edge": []})
    angles = np.linspace(0, 2 * np.pi, 90, endpoint=False)
    circle = np.column_stack([np.cos(angles), np.sin(angles)])
    rng = np.random.default_rng(5)
    contours = {
        "ring": [(circle * 12 + (17, 15), 1), (circle * 5.5 + (16.2, 14.7), 1)],
        "random": [(rng.uniform(0, 30, (25, 2)), 2), (rng.uniform(0, 30, (9, 2)), 2)],
        "edge": [(circle * 14 + (30, 2), 3)],
    }
    for roi, name in zip(ds.ROIContourSequence, contours):
        roi.ContourSequence = Sequence(
            [_contour(points, k, origin, spacing) for points, k in contours[name]]
        )
    ds.save_as(tmp_path / "RS.dcm", enforce_file_format=True)
    series = read_series(tmp_path / "CT")
    masks = read_rtstruct(tmp_path / "RS.dcm", series)
    monkeypatch.setattr(dicom, "_polygon_box", lambda r, c, s: (0, 0, reference_fill(r, c, s)))
    before = read_rtstruct(tmp_path / "RS.dcm", series)
    assert list(masks) == list(before) == ["ring", "random", "edge"]
    for name in masks:
        np.testing.assert_array_equal(masks[name], before[name])
    assert masks["ring"][1].sum() > 300 and not masks["ring"][1, 15, 16]  # the hole
    assert masks["edge"][3, 0, :].any() and masks["edge"][3, :, 33].any()  # cut by two edges


_formats = st.sampled_from(["{!r}", "{:.6g}", "{:.3f}", "{:+.4e}", " {:.5f} ", "{:.0f}"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6, allow_nan=False), _formats), min_size=1))
def test_contour_coordinates_parse_as_float_parses_each(values):
    """numpy's parse of the whole string gives float()'s value of each decimal string."""
    texts = [form.format(value) for value, form in values]
    parsed = parse_decimals("\\".join(texts).encode())
    assert parsed is not None
    assert parsed.tolist() == [float(text) for text in texts]


def test_coordinates_that_are_not_all_numbers_are_not_parsed():
    for raw in (b"1.5\\abc\\2", b"1.5\\\\2", b"", b"1.5\\2e", b"1,5\\2", b"0x10\\1"):
        assert parse_decimals(raw) is None, raw


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1e7, 1e7, allow_nan=False), st.integers(0, 8)),
        min_size=1,
        max_size=50,
    )
)
def test_plain_decimals_parse_to_the_bits_float_gives(values):
    """Fixed-point decimals as planning systems write them: the very same doubles."""
    texts = [f"{value:.{places}f}" for value, places in values]
    parsed = parse_decimals("\\".join(texts).encode())
    assert parsed is not None
    assert [v.hex() for v in parsed.tolist()] == [float(text).hex() for text in texts]


def test_hand_picked_decimals():
    texts = ["-0.0", "+.5", "1.", "0.1", "-123.456", "9007199254740991", "0000.30000"]
    assert parse_decimals("\\".join(texts).encode()).tolist() == [float(t) for t in texts]
    assert str(parse_decimals(b"-0.0")[0]) == "-0.0"
    assert parse_decimals(b"9007199254740993").tolist() == [9007199254740992.0]
    assert parse_decimals(b"1e3\\-2.5E-1 ").tolist() == [1000.0, -0.25]
