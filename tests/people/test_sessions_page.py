"""The live-session page in a real browser (Chromium driven by Selenium) at 1280x800: clicks,
scrolling, undo, accept, a reload mid-session, keyboard only; what the log holds after it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from intrabench.people.session_log import read_session
from intrabench.people.sessions.live import LiveSession, session_header
from intrabench.people.sessions.server import SessionServer
from intrabench.people.sessions.setup import build_model, load_target

CASE, TARGET = "lung1", "lesion_1"


def chromium():
    """A headless Chromium at 1280x800, or a skip (a failure when CI requires it)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        if os.environ.get("INTRABENCH_REQUIRE_BROWSER"):
            pytest.fail("Chromium and chromedriver are required (apt-get install chromium)")
        pytest.skip("no Chromium here; .ci/run installs it")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,800")
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


def wait(condition, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for the page")


def serve(out: Path, model_name: str, session_id: str) -> SessionServer:
    case, target = load_target("demo-real", {}, CASE, TARGET)
    model = build_model(model_name, {})
    header = session_header(session_id, "bot", "demo-real", case, target, model_name, {}, {})
    session = LiveSession.open(out, case, target, model, session_id=session_id, header=header)
    server = SessionServer(session)
    server.start()
    return server


def body(driver, key: str):
    return driver.execute_script(f"return document.body.dataset.{key}")


def click_voxel(driver, y: int, x: int, ctrl: bool = False) -> None:
    """A mouse click on the centre of voxel (y, x) of the shown slice."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    canvas = driver.find_element(By.ID, "canvas")
    scale, width, height = driver.execute_script(
        "const c = document.getElementById('canvas'); return [scale, c.width, c.height]"
    )
    dx, dy = (x + 0.5) * scale - width / 2, (y + 0.5) * scale - height / 2
    actions = ActionChains(driver).move_to_element_with_offset(canvas, int(dx), int(dy))
    if ctrl:
        actions.key_down(Keys.CONTROL).click().key_up(Keys.CONTROL).perform()
    else:
        actions.click().perform()


def overlay_pixels(driver) -> int:
    """Pixels of the canvas in the mask's outline colour (255, 210, 0)."""
    return driver.execute_script(
        "const c = document.getElementById('canvas'), d = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data; let n = 0;"
        "for (let i = 0; i < d.length; i += 4) if (d[i] === 255 && d[i+1] === 210 && d[i+2] === 0) n++;"
        "return n;"
    )


@pytest.fixture()
def centre():
    case, target = load_target("demo-real", {}, CASE, TARGET)
    box = case.target_box(target)
    return [(s.start + s.stop - 1) // 2 for s in box]


@pytest.mark.browser
def test_clicks_scroll_undo_reload_accept_in_chromium(tmp_path, centre):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server = serve(tmp_path, "region-growing-3d", "mouse")
    driver = chromium()
    try:
        driver.get(server.url)
        wait(lambda: body(driver, "ready"))
        # the page fits the 1280x800 window, the slice through the target's centre is shown
        right, bottom = driver.execute_script(
            "const r = document.getElementById('canvas').getBoundingClientRect();"
            "return [r.right, r.bottom]"
        )
        assert right <= 1280 and bottom <= 800
        z, y, x = centre
        assert body(driver, "slice") == str(z)
        canvas = driver.find_element(By.ID, "canvas")
        canvas.send_keys(Keys.ARROW_UP)  # scrolling: up one slice, then back down
        wait(lambda: body(driver, "slice") == str(z + 1))
        canvas.send_keys(Keys.ARROW_DOWN)
        wait(lambda: body(driver, "slice") == str(z))
        from selenium.webdriver.common.action_chains import ActionChains, ScrollOrigin

        ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, 100).perform()
        wait(lambda: body(driver, "slice") == str(z - 1))  # the wheel: down one slice, back up
        ActionChains(driver).scroll_from_origin(
            ScrollOrigin.from_element(canvas), 0, -100
        ).perform()
        wait(lambda: body(driver, "slice") == str(z))
        click_voxel(driver, y, x)
        wait(lambda: body(driver, "shown") == "1")
        assert overlay_pixels(driver) > 20  # the mask's outline is on screen
        click_voxel(driver, 2, 2, ctrl=True)  # a negative point far from the lesion
        wait(lambda: body(driver, "shown") == "2")
        driver.find_element(By.ID, "undo").click()
        wait(lambda: body(driver, "step") == "1")
        timings = driver.execute_script("return window.intrabenchTimings")
        driver.refresh()  # a reload mid-session: nothing lost
        wait(lambda: body(driver, "ready"))
        assert body(driver, "step") == "1" and body(driver, "slice") == str(z)
        assert overlay_pixels(driver) > 20
        driver.find_element(By.ID, "accept").click()
        wait(lambda: body(driver, "accepted") == "1")
    finally:
        driver.quit()
        server.shutdown()
    session = read_session(server.session.writer.path)
    assert session.problems == [] and session.cut_lines == 0
    kinds = [e["event"] for e in session.events]
    acts = [kind for kind in kinds if kind != "view"]
    assert acts == ["interaction", "interaction", "undo", "accept"]
    views = [e["slice"] for e in session.events if e["event"] == "view"]
    # the wheel and the arrows, then the reload shows the same slice again
    assert views[:5] == [z, z + 1, z, z - 1, z] and views[-1] == z
    (point,) = session.effective_interactions()
    assert point["geometry"] == {"zyx": [z, y, x], "positive": True}
    negative = [e for e in session.events if e["event"] == "interaction"][1]
    assert negative["geometry"] == {"zyx": [z, 2, 2], "positive": False}
    assert session.accepted and point["shown_at"] <= point["t"]
    assert np.array_equal(session.final_mask(), server.session.mask)
    assert session.final_mask()[z, y, x]
    assert [t["kind"] for t in timings] == ["point", "point"] and timings[0]["seconds"] > 0


@pytest.mark.browser
def test_keyboard_only_session_in_chromium(tmp_path, centre):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    server = serve(tmp_path, "region-growing-3d", "keys")
    driver = chromium()
    z, y, x = centre
    _, Y, X = server.session.shape
    try:
        driver.get(server.url)
        wait(lambda: body(driver, "ready"))

        def keys(*pressed, shift=False):
            chain = ActionChains(driver)
            if shift:
                chain.key_down(Keys.SHIFT)
            for key in pressed:
                chain.send_keys(key)
            if shift:
                chain.key_up(Keys.SHIFT)
            chain.perform()

        keys(Keys.PAGE_UP)
        wait(lambda: body(driver, "slice") == str(z + 1))
        keys(Keys.PAGE_DOWN)
        wait(lambda: body(driver, "slice") == str(z))
        # the cursor starts at the slice's centre (Y // 2, X // 2); Shift+arrows move it
        moves = [Keys.ARROW_DOWN] * (y - Y // 2) + [Keys.ARROW_UP] * (Y // 2 - y)
        moves += [Keys.ARROW_RIGHT] * (x - X // 2) + [Keys.ARROW_LEFT] * (X // 2 - x)
        keys(*moves, shift=True)
        keys(Keys.ENTER)
        wait(lambda: body(driver, "shown") == "1")
        keys("x", Keys.ENTER)  # negative, at the same voxel
        wait(lambda: body(driver, "shown") == "2")
        keys("u")
        wait(lambda: body(driver, "step") == "1")
        keys("w")  # the next window preset (CT soft tissue), logged with the view
        wait(lambda: body(driver, "window") == "40/400")
        keys("a")
        wait(lambda: body(driver, "accepted") == "1")
    finally:
        driver.quit()
        server.shutdown()
    session = read_session(server.session.writer.path)
    events = [e["event"] for e in session.events]
    assert events.count("interaction") == 2 and events[-1] == "accept"
    first, second = [e for e in session.events if e["event"] == "interaction"]
    assert first["geometry"] == {"zyx": [z, y, x], "positive": True}
    assert second["geometry"] == {"zyx": [z, y, x], "positive": False}
    assert [e["window"] for e in session.events if e["event"] == "view"][-1] == [40.0, 400.0]
    assert [e["kind"] for e in session.effective_interactions()] == ["point"]


@pytest.mark.browser
@pytest.mark.slow
def test_mobilesam_click_in_chromium(tmp_path, centre):
    server = serve(tmp_path, "mobilesam", "mobilesam")
    driver = chromium()
    z, y, x = centre
    try:
        driver.get(server.url)
        wait(lambda: body(driver, "ready"))
        wait(lambda: z in server.session.state()["encoded"], 120)  # encoded ahead
        click_voxel(driver, y, x)
        wait(lambda: body(driver, "shown") == "1", 120)
        assert overlay_pixels(driver) > 20
        (timing,) = driver.execute_script("return window.intrabenchTimings")
    finally:
        driver.quit()
        server.shutdown()
    (event,) = read_session(server.session.writer.path).effective_interactions()
    assert event["geometry"] == {"zyx": [z, y, x], "positive": True}
    assert event["mask"]["bbox"] != [0] * 6 and timing["seconds"] >= timing["model_s"]


def drag(driver, points: list[tuple[int, int]]) -> None:
    """A left-button drag through voxels (y, x) of the shown slice."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "canvas")
    scale, width, height = driver.execute_script(
        "const c = document.getElementById('canvas'); return [scale, c.width, c.height]"
    )
    offsets = [((x + 0.5) * scale - width / 2, (y + 0.5) * scale - height / 2) for y, x in points]
    chain = ActionChains(driver).move_to_element_with_offset(canvas, *map(int, offsets[0]))
    chain.click_and_hold()
    for (x0, y0), (x1, y1) in zip(offsets, offsets[1:]):
        chain.move_by_offset(int(x1) - int(x0), int(y1) - int(y0))
    chain.release().perform()


@pytest.mark.browser
def test_boxes_and_scribble_in_chromium(tmp_path, centre):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    server = serve(tmp_path, "random-walker-2d", "boxes")
    driver = chromium()
    z, y, x = centre
    try:
        driver.get(server.url)
        wait(lambda: body(driver, "ready"))
        ActionChains(driver).send_keys("2").perform()  # the box tool
        drag(driver, [(y - 4, x - 5), (y + 3, x + 6)])
        wait(lambda: body(driver, "shown") == "1")
        ActionChains(driver).send_keys("3").perform()  # a 3D box: drawn here, ended a slice up
        drag(driver, [(y - 6, x - 6), (y + 6, x + 6)])
        ActionChains(driver).send_keys(Keys.ARROW_UP).perform()
        wait(lambda: body(driver, "slice") == str(z + 1))
        ActionChains(driver).send_keys("e").perform()
        wait(lambda: body(driver, "shown") == "2")
        ActionChains(driver).send_keys("4", "x").perform()  # a negative scribble
        drag(driver, [(2, 2), (2, 6), (5, 6)])
        wait(lambda: body(driver, "shown") == "3")
    finally:
        driver.quit()
        server.shutdown()
    session = read_session(server.session.writer.path)
    box2d, box3d, scribble = session.effective_interactions()
    assert box2d["kind"] == "box2d"
    assert box2d["geometry"] == {"slice": z, "y0": y - 4, "x0": x - 5, "y1": y + 3, "x1": x + 6}
    assert box3d["geometry"] == {"zyx0": [z, y - 6, x - 6], "zyx1": [z + 1, y + 6, x + 6]}
    assert scribble["kind"] == "scribble" and scribble["geometry"]["positive"] is False
    points = scribble["geometry"]["points"]
    assert points[0] == [2, 2] and points[-1] == [5, 6] and [2, 6] in points
    assert session.masks()[0][z].sum() > 0 and session.masks()[1][z + 1].sum() > 0
