"""The report a radiologist trusts (issue #20, items 10 and 11): the failure gallery with seeds,
slices and prompts drawn, first and last step side by side, one scale, distinct styles,
per-dataset curves with bands, and the page checked at 800 px in Chromium."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from intrabench import plotting as plots
from intrabench.cli import main
from intrabench.evaluation.episode_metrics import episode_table
from intrabench.io.results import load_results
from intrabench.reports.overlays import (
    BOX,
    NEGATIVE,
    POSITIVE,
    StepPanel,
    cut_centre,
    draw_overlay,
    failure_gallery,
    gallery,
    view_position,
)
from intrabench.types import Box3D, Lasso, Prompt
from tests.run_helpers import run_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Two models x two prompters, click refinement, two seeds, every step's mask saved."""
    return run_config(
        tmp_path_factory.mktemp("layout"),
        "name: layout\nseeds: [0, 1]\n"
        "datasets: [{name: demo-phantoms, n_cases: 2, label: phantoms}]\n"
        "models: [region-growing-3d, random-walker-3d]\n"
        "prompters: [box-3d, {name: center-points-per-volume, n_points: 1, label: 1-click}]\n"
        "refiners: [center-error-click]\nrefinement_steps: 2\nsave_predictions: all\n",
    )


# -- where things are drawn -------------------------------------------------------------------
def test_view_position_reverses_both_axes_inside_the_window():
    window = [slice(0, 10), slice(0, 40), slice(10, 40)]
    # axial: rows from y, columns from x, both reversed: y 35 -> row 39 - 35, x 30 -> 39 - 30
    assert view_position((3, 35, 30), 1, 2, window) == (4.0, 9.0)
    # coronal: rows from z
    assert view_position((3, 35, 30), 0, 2, window) == (6.0, 9.0)


def test_the_axial_cut_goes_through_the_slice_holding_the_prompt():
    truth = np.zeros((20, 10, 10), bool)
    truth[4:15, 3:8, 3:8] = True  # median voxel (9, 5, 5)
    clicks = Prompt(
        points=np.array([[6, 5, 5], [6, 4, 4], [12, 5, 5]]), point_labels=np.array([1, 1, 0])
    )
    assert cut_centre(truth, clicks) == (6, 5, 5)
    assert cut_centre(truth, None) == (9, 5, 5)
    box = Prompt(box3d=Box3D(4, 3, 3, 14, 6, 6))
    assert cut_centre(truth, box)[0] == 9


def _colour_centroid(png: bytes, colour: str, region) -> tuple[float, float] | None:
    """(row, column) centroid of the pixels within 40 of ``colour``, in ``region`` (slices)."""
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int32)[region]
    target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    rows, columns = np.nonzero(np.abs(picture - target).sum(axis=2) < 40)
    return (float(rows.mean()), float(columns.mean())) if rows.size else None


def _axial_panel(png: bytes) -> tuple[tuple[slice, slice], int, int]:
    """(region, height, width) of the axial panel: the dark image in the figure's left third."""
    picture = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    third = slice(None), slice(0, picture.shape[1] // 3)
    dark = picture[third] < 30
    rows = np.flatnonzero(dark.sum(axis=1) > dark.shape[1] // 2)
    columns = np.flatnonzero(dark[rows].any(axis=0))
    panel = slice(rows[0], rows[-1] + 1), slice(columns[0], columns[-1] + 1)
    return panel, rows[-1] - rows[0] + 1, columns[-1] - columns[0] + 1


def test_clicks_and_boxes_are_drawn_where_the_voxels_are():
    """A positive click anterior-right (high y, high x) lands top-left in the axial panel, a
    negative click posterior-left bottom-right, and the box's edges are drawn."""
    image = np.zeros((3, 40, 40), np.float32)
    truth = np.zeros(image.shape, bool)
    truth[1, 10:30, 10:30] = True
    prompt = Prompt(
        points=np.array([[1, 35, 35], [1, 4, 4]]),
        point_labels=np.array([1, 0]),
        box3d=Box3D(0, 8, 8, 2, 31, 31),
    )
    png = draw_overlay(
        image, truth, [StepPanel("step 0", None, prompt, 0.5)], (2.0, 1.0, 1.0), margin_mm=100.0
    )
    panel, height, width = _axial_panel(png)
    positive = _colour_centroid(png, POSITIVE, panel)
    negative = _colour_centroid(png, NEGATIVE, panel)
    box = _colour_centroid(png, BOX, panel)
    # voxel (y 35, x 35) sits 4.5 voxels from the top-left corner of a 40-voxel panel
    assert positive[0] == pytest.approx(4.5 / 40 * height, abs=0.03 * height)
    assert positive[1] == pytest.approx(4.5 / 40 * width, abs=0.03 * width)
    assert negative[0] == pytest.approx(35.5 / 40 * height, abs=0.03 * height)
    assert negative[1] == pytest.approx(35.5 / 40 * width, abs=0.03 * width)
    # a square around the centre, drawn above the ground truth's contour
    assert box[0] == pytest.approx(height / 2, abs=0.03 * height)
    assert box[1] == pytest.approx(width / 2, abs=0.03 * width)
    yellow = _colour_centroid(png, BOX, (slice(None), slice(None)))
    assert yellow is not None


def test_a_lasso_is_drawn_as_a_closed_line_around_its_voxels():
    """A positive lasso around (y 28..36, x 28..36) on the cut slice: anterior-right, so the
    blue loop's centre lands top-left in the axial panel (as a click there would)."""
    image = np.zeros((3, 40, 40), np.float32)
    truth = np.zeros(image.shape, bool)
    truth[1, 30:35, 30:35] = True
    lasso = Lasso(1, np.array([[28, 28], [28, 36], [36, 36], [36, 28]]), 1)
    png = draw_overlay(
        image,
        truth,
        [StepPanel("step 0", None, Prompt(lassos=(lasso,)), 0.5)],
        (2.0, 1.0, 1.0),
        margin_mm=100.0,
    )
    panel, height, width = _axial_panel(png)
    loop = _colour_centroid(png, POSITIVE, panel)
    # the loop's centre, voxel (32, 32), is 39 - 32 = 7 voxels from the top-left corner
    assert loop[0] == pytest.approx(7.5 / 40 * height, abs=0.03 * height)
    assert loop[1] == pytest.approx(7.5 / 40 * width, abs=0.03 * width)


# -- which targets and how they are named ------------------------------------------------------
def test_the_gallery_takes_the_worst_targets_of_each_model():
    episodes = pd.DataFrame(
        {
            "model": ["a", "a", "a", "b", "b"],
            "dataset": "d",
            "case": ["c1", "c2", "c3", "c1", "c2"],
            "target": "t",
            "prompter": "p",
            "refiner": "none",
            "seed": 0,
            "dice_final": [0.9, 0.1, 0.1, 0.5, 0.7],
        }
    )
    picked = failure_gallery(episodes, 2)
    assert picked[["model", "case"]].values.tolist() == [
        ["a", "c2"],
        ["a", "c3"],
        ["b", "c1"],
        ["b", "c2"],
    ]


def test_gallery_overlays_name_seed_and_configuration_and_show_first_and_last_step(run_dir):
    rows = load_results(run_dir)
    episodes = episode_table(rows)
    items, notes = gallery(run_dir, rows, episodes, None, 3)
    assert notes == []
    expected = failure_gallery(episodes, 3)
    assert len(items) == len(expected) == 6
    assert len({item.name for item in items}) == len(items)
    for item, episode in zip(items, expected.itertuples()):
        assert item.name.endswith(f"-seed{episode.seed}")
        assert f"- seed {episode.seed}" in item.caption and episode.model in item.name
        assert item.steps == (0, 2)  # first and final step drawn
    # the same target of two seeds gets two files
    report = run_dir / "report"
    assert main(["report", str(run_dir), "--max-overlays", "40"]) == 0
    overlays = sorted(p.name for p in report.glob("overlay-*.png"))
    assert len(overlays) == len(episodes)
    assert any(name.endswith("-seed0.png") for name in overlays)
    assert any(name.endswith("-seed1.png") for name in overlays)


def test_only_final_masks_say_how_to_get_the_first_step(tmp_path):
    run = run_config(
        tmp_path,
        "name: finals\ndatasets: [{name: demo-phantoms, n_cases: 1}]\n"
        "models: [region-growing-3d]\nprompters: [box-3d]\nrefiners: [center-error-click]\n"
        "refinement_steps: 1\nsave_predictions: true\n",
    )
    rows = load_results(run)
    items, notes = gallery(run, rows, episode_table(rows), None, 1)
    assert [item.steps for item in items] == [(1,)]
    assert any("save_predictions: all" in note for note in notes)


# -- one scale, styles, layout ------------------------------------------------------------------
def test_styles_stay_distinct_beyond_ten_configurations():
    rows = pd.DataFrame(
        {
            "model": [f"m{i}" for i in range(25)],
            "prompter": "p",
            "refiner": ["none"] * 24 + ["scribble"],
        }
    )
    styles = plots.configuration_styles(rows)
    pairs = {(s["color"], s["marker"]) for s in styles.values()}
    assert len(pairs) == 25
    assert len({s["hatch"] for s in styles.values()}) == 3  # 10 + 10 + 5
    assert styles[("m9", "p", "none")]["linestyle"] == "-"
    assert styles[("m24", "p", "scribble")]["linestyle"] == "--"
    # a configuration's style depends on the whole set, not on the figure's subset
    assert plots.configuration_styles(rows)[("m3", "p", "none")] == styles[("m3", "p", "none")]


def test_the_page_puts_figures_first_and_uses_one_scale(run_dir):
    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "report" / "report.html").read_text()
    order = [
        page.index(h)
        for h in (
            "<h2>Figures</h2>",
            "<h2>Summary</h2>",
            "<h2>Failure gallery",
            "<h2>Per-case results</h2>",
            "<h2>Run details</h2>",
        )
    ]
    assert order == sorted(order)
    assert "0-1 scale" not in page
    assert "dice-vs-interactions-per-dataset" in {
        p.stem for p in (run_dir / "report").glob("*.png")
    }
    assert "<th>Dice final x100</th>" in page
    # the per-configuration table is x100: 100 x (mean over classes of the mean over cases of
    # each case's mean over its targets and seeds), computed here by hand
    from intrabench.reports.html import configuration_summary

    episodes = episode_table(load_results(run_dir))
    config = ["model", "prompter", "refiner"]
    by_hand = (
        episodes.groupby([*config, "target_class", "case"])["dice_final"]
        .mean()
        .groupby([*config, "target_class"])
        .mean()
        .groupby(config)
        .mean()
    )
    shown = configuration_summary(episodes).set_index(config)["Dice final x100"]
    assert np.allclose(shown.sort_index(), 100 * by_hand.sort_index())
    assert shown.max() > 1


@pytest.mark.browser
def test_the_report_reads_at_800_px_in_chromium(run_dir, tmp_path):
    from tests.review.test_page import _chromium

    assert main(["report", str(run_dir)]) == 0
    page = run_dir / "report" / "report.html"
    browser = _chromium()
    try:
        browser.set_window_size(800, 1000)
        browser.get(page.as_uri())
        width = browser.execute_script("return document.documentElement.clientWidth")
        assert width <= 800
        # nothing but the tables' own scroll boxes is wider than the window
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.alt, i.naturalWidth, i.width])"
        )
        assert len(images) >= 8
        for alt, natural, shown in images:
            assert natural > 0, alt  # decoded
            # a figure is shown at least 55% of its size: 8-pt text stays >= 9 px
            assert shown >= min(natural, width) * 0.55 or shown / natural >= 0.55, alt
            assert shown <= width
        headings = browser.execute_script(
            "return Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
        )
        assert headings.index("Figures") < headings.index("Per-case results")
        screenshot = tmp_path / "report-800px.png"
        assert browser.save_screenshot(str(screenshot))
        shot = np.asarray(Image.open(screenshot).convert("L"))
        assert shot.shape[1] <= 800 and shot.std() > 10  # something drawn, not a blank page
    finally:
        browser.quit()
    assert re.search(r"<meta name='viewport'", page.read_text())
