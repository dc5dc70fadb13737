"""Overlays in radiological display (issue #20, item 9), checked on a volume with markers."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from intrabench.plotting import VIEW_LETTERS, radiological
from intrabench.reports.overlays import StepPanel, draw_overlay


def _marked_volume() -> np.ndarray:
    """Canonical (z, y, x) = (S, A, R): one marker at the anterior-right-superior corner."""
    volume = np.zeros((9, 10, 11), np.float32)
    volume[8, 9, 10] = 1.0  # superior (high z), anterior (high y), right (high x)
    return volume


def test_each_view_shows_the_marker_where_a_radiologist_expects_it():
    volume = _marked_volume()
    axial = radiological(volume[8])  # (y, x)
    coronal = radiological(volume[:, 9, :])  # (z, x)
    sagittal = radiological(volume[:, :, 10])  # (z, y)
    # axial: anterior up, patient's right on the image's left -> top-left
    assert np.argwhere(axial).tolist() == [[0, 0]]
    # coronal: superior up, right on the left -> top-left
    assert np.argwhere(coronal).tolist() == [[0, 0]]
    # sagittal: superior up, anterior on the left -> top-left
    assert np.argwhere(sagittal).tolist() == [[0, 0]]
    assert VIEW_LETTERS["axial"] == ("A", "P", "R", "L")
    assert VIEW_LETTERS["sagittal"][2] == "A"


def test_the_axial_overlay_draws_an_anterior_right_target_top_left():
    """The rendered picture: a bright target in the anterior-right quarter of an axial slice
    appears in the top-left quarter of the axial panel."""
    image = np.zeros((6, 40, 40), np.float32)
    truth = np.zeros(image.shape, bool)
    image[:, 30:38, 30:38] = 1000.0  # anterior (high y) and right (high x)
    truth[2:4, 30:38, 30:38] = True
    png = draw_overlay(image, truth, [StepPanel("final", None)], (2.0, 1.0, 1.0), margin_mm=100.0)
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float32)
    width = picture.shape[1]
    third = picture[:, : width // 3]  # the first of the three panels, on a white figure
    dark = third < 30  # the panel is the black image (title text is dark too, but sparse)
    dark &= dark.sum(axis=1, keepdims=True) > third.shape[1] // 2
    dark_rows, dark_columns = np.nonzero(dark)
    panel = third[
        dark_rows.min() : dark_rows.max() + 1, dark_columns.min() : dark_columns.max() + 1
    ]
    rows, columns = np.nonzero(panel > 250)  # the white target inside it
    assert rows.size > 100
    assert np.median(rows) < panel.shape[0] / 4 and np.median(columns) < panel.shape[1] / 4
