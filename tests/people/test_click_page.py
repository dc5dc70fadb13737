"""The click page in a real browser (Chromium driven by Selenium, 1280x800): a scripted person
clicks at known pixels, scrolls, windows, works with the keyboard only and reloads mid-way;
what the page recorded and exported is imported as the recorded map's CSV."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from review.test_page import _chromium, _downloaded, _wait

from intrabench.cli import main

from .click_fixtures import task_of

WIDTH, HEIGHT = 1280, 800


def _open(out, downloads=None):
    """The click page in Chromium at a 1280x800 viewport."""
    driver = _chromium()
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    if downloads is not None:
        driver.execute_cdp_cmd(
            "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
    driver.get((out / "index.html").resolve().as_uri())
    assert driver.execute_script("return [innerWidth, innerHeight]") == [WIDTH, HEIGHT]
    return driver


def _ready(driver, task: str) -> None:
    """Wait until ``task`` is drawn and takes a click."""
    _wait(lambda: driver.execute_script("return document.body.dataset.ready") == task)


def _drawn(driver, task: str, z: int) -> None:
    _wait(lambda: driver.execute_script("return document.body.dataset.drawn") == f"{task}:{z}")


def _clicks(driver, rater: str) -> dict:
    """What the page keeps in localStorage for ``rater``: task -> click."""
    state = driver.execute_script(
        "return JSON.parse(localStorage.getItem("
        "'intrabench-clicks-' + window.intrabenchClickTasks.collection))"
    )
    return state["raters"].get(rater, {})


def _pixel(driver, row: int, col: int, rows: int, cols: int) -> tuple[int, int]:
    """The viewport pixel in the middle of picture cell (row, col) of the canvas."""
    rect = driver.execute_script(
        "return document.getElementById('view').getBoundingClientRect().toJSON()"
    )
    return (
        int(rect["left"] + (col + 0.5) * rect["width"] / cols),
        int(rect["top"] + (row + 0.5) * rect["height"] / rows),
    )


def _click_at(driver, x: int, y: int, right: bool = False) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.actions.mouse_button import MouseButton

    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(x, y)
    button = MouseButton.RIGHT if right else MouseButton.LEFT
    actions.pointer_action.pointer_down(button).pointer_up(button)
    actions.perform()


@pytest.mark.browser
def test_a_mouse_click_at_a_known_pixel_records_the_exact_voxel_slice_and_window(
    click_site, tmp_path, capsys
):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    built, out = click_site
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    first, second = task_of(out, "task-001"), task_of(out, "task-002")
    z0 = first["slices"][first["start"]]["z"]
    offered = [s["z"] for s in first["slices"]]
    up = z0 + 2 <= offered[-1]  # two wheel notches towards the end that has two more slices
    z1 = z0 + 2 if up else z0 - 2
    driver = _open(out, downloads)
    try:
        driver.find_element(By.ID, "rater").send_keys("alice", Keys.ENTER)
        _ready(driver, "task-001")
        canvas = driver.find_element(By.ID, "view")
        # a notch is 100 px of wheel; wheel up: the next slice
        for _ in range(2):
            ActionChains(driver).scroll_from_origin(
                ScrollOrigin.from_element(canvas), 0, -100 if up else 100
            ).perform()
        _drawn(driver, "task-001", z1)
        body = driver.find_element(By.TAG_NAME, "body")
        body.send_keys("w")  # default -> soft tissue
        body.send_keys("w")  # -> lung
        assert driver.execute_script("return document.body.dataset.window") == "-600/1500"
        rows, cols = 48, 48
        assert driver.execute_script("return window.intrabenchShown().picture") == [rows, cols]
        _click_at(driver, *_pixel(driver, 10, 30, rows, cols))
        _ready(driver, "task-002")
        click = _clicks(driver, "alice")["task-001"]
        # radiological view: row 10 is y = 47 - 10, column 30 is x = 47 - 30
        assert (click["z"], click["y"], click["x"], click["label"]) == (z1, 37, 17, 1)
        assert click["slices_visited"] == [z0, (z0 + z1) // 2, z1]
        assert click["window"] == {"centre": -600, "width": 1500, "name": "lung"}
        assert click["windows_used"] == 3 and click["input"] == "mouse"
        assert 0 < click["seconds"] < 60
        assert (click["case"], click["target"], click["step"]) == (
            first["case"],
            first["target"],
            first["click_step"],
        )
        # a right click: negative, in the default window again (a new task opens in it)
        _click_at(driver, *_pixel(driver, 20, 21, rows, cols), right=True)
        _ready(driver, "task-003")
        click = _clicks(driver, "alice")["task-002"]
        z2 = second["slices"][second["start"]]["z"]
        assert (click["z"], click["y"], click["x"], click["label"]) == (z2, 27, 26, 0)
        assert click["window"]["name"] == "default" and click["slices_visited"] == [z2]
        driver.find_element(By.ID, "exportJson").click()
        exported = _downloaded(downloads, "*.json")
    finally:
        driver.quit()
    assert exported[0].name == f"clicks-{built.collection}-alice.json"
    data = json.loads(exported[0].read_text())
    assert data["format"] == "intrabench-clicks" and data["collection"] == built.collection
    assert [c["task"] for c in data["clicks"]] == ["task-001", "task-002"]
    to = tmp_path / "people.csv"
    args = ["clicks", "collect", "import", str(exported[0]), "--tasks", str(out), "--to", str(to)]
    assert main(args) == 0
    assert "2 clicks of 1 rater on 2 of 12 tasks" in capsys.readouterr().out
    table = pd.read_csv(to)
    assert table[["task", "z", "y", "x", "label", "window_width"]].values.tolist() == [
        ["task-001", z1, 37, 17, 1, 1500.0],
        ["task-002", z2, 27, 26, 0, second["window"][1] - second["window"][0]],
    ]


@pytest.mark.browser
def test_keyboard_only_and_a_reload_mid_collection_lose_nothing(click_site):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    built, out = click_site
    first = task_of(out, "task-001")
    z0 = first["slices"][first["start"]]["z"]
    offered = [s["z"] for s in first["slices"]]
    driver = _open(out)

    def keys(*pressed):
        ActionChains(driver).send_keys(*pressed).perform()

    try:
        _wait(lambda: driver.execute_script("return document.body.dataset.drawn"))
        keys(Keys.TAB, "bob", Keys.ENTER)  # Tab to the name field, type, Enter
        _ready(driver, "task-001")
        # the cross starts in the middle (24, 24): 3 right, 2 up, then a slice up and a window
        keys(*[Keys.ARROW_RIGHT] * 3, *[Keys.ARROW_UP] * 2)
        up = z0 + 1 <= offered[-1]
        keys(Keys.PAGE_UP if up else Keys.PAGE_DOWN)
        z1 = z0 + 1 if up else z0 - 1
        _drawn(driver, "task-001", z1)
        keys("w")
        keys(Keys.ENTER)
        _ready(driver, "task-002")
        # Shift: 5 voxels down, to (29, 24)
        ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ARROW_DOWN).key_up(
            Keys.SHIFT
        ).perform()
        keys("n")
        _ready(driver, "task-003")
        before = _clicks(driver, "bob")
        driver.refresh()  # mid-collection: nothing is lost, the page is where it was
        _ready(driver, "task-003")
        assert _clicks(driver, "bob") == before
        assert driver.execute_script("return document.getElementById('rater').value") == "bob"
        _wait(lambda: driver.find_element("id", "progress").text == "2 / 12 clicked")
        _wait(lambda: driver.find_element("id", "taskname").text == "task 3 of 12")
        keys("p")
        _ready(driver, "task-004")
        clicks = _clicks(driver, "bob")
    finally:
        driver.quit()
    assert sorted(clicks) == ["task-001", "task-002", "task-003"]
    one, two, three = (clicks[t] for t in sorted(clicks))
    # cross (22, 27) in the view: y = 47 - 22, x = 47 - 27
    assert (one["z"], one["y"], one["x"], one["label"], one["input"]) == (z1, 25, 20, 1, "keyboard")
    assert one["slices_visited"] == [z0, z1] and one["window"]["name"] != "default"
    assert (two["y"], two["x"], two["label"]) == (47 - 29, 47 - 24, 0)
    assert (three["y"], three["x"], three["label"]) == (23, 23, 1)  # the middle after a reload
