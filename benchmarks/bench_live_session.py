"""Click to mask on screen in a live session: a scripted person (Selenium, headless Chromium at
1280x800) segments the demo's real targets with MobileSAM (a click) and LiteMedSAM (a box).

For each target it shows the slices through the target (up to ``--slices`` around its centre),
waits until the page's server has encoded the shown slice ahead (as a person looks at the slice
before clicking), then clicks (MobileSAM: a positive point on a target voxel of the slice) or
drags a box (LiteMedSAM: the target's extent on the slice plus 2 voxels), and reads from the page
the seconds from the mouse event to the mask drawn on screen (two animation frames after it).
It prints the median and p90 of those seconds per model, the goal (1.0 s), the seconds the
shown slice took to encode in the background, and the machine.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_live_session.py [--slices 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.people.test_sessions_page import chromium, wait  # noqa: E402  (the tests' browser)

GOAL_S = 1.0


def target_slices(reference: np.ndarray, count: int) -> list[int]:
    zs = np.flatnonzero(reference.any(axis=(1, 2)))
    centre = int(zs[len(zs) // 2])
    return sorted(zs, key=lambda z: (abs(int(z) - centre), int(z)))[:count]


def canvas_offset(driver, y: float, x: float) -> tuple[int, int]:
    scale, width, height = driver.execute_script(
        "const c = document.getElementById('canvas'); return [scale, c.width, c.height]"
    )
    return int((x + 0.5) * scale - width / 2), int((y + 0.5) * scale - height / 2)


def go_to_slice(driver, z: int) -> None:
    """The person scrolls with the arrow keys until slice ``z`` is shown."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    while (shown := int(driver.execute_script("return document.body.dataset.slice"))) != z:
        ActionChains(driver).send_keys(Keys.ARROW_UP if shown < z else Keys.ARROW_DOWN).perform()
        wait(lambda s=shown: int(driver.execute_script("return document.body.dataset.slice")) != s)


def act(driver, kind: str, plane: np.ndarray) -> None:
    """A click on the target voxel of ``plane`` (y, x) nearest its centroid, or a box dragged
    around the target's extent on it (2 voxels larger)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "canvas")
    where = np.argwhere(plane)
    if kind == "point":
        y, x = where[np.argmin(((where - where.mean(axis=0)) ** 2).sum(axis=1))]
        dx, dy = canvas_offset(driver, y, x)
        ActionChains(driver).move_to_element_with_offset(canvas, dx, dy).click().perform()
        return
    (y0, x0), (y1, x1) = where.min(axis=0) - 2, where.max(axis=0) + 2
    y0, x0 = max(int(y0), 0), max(int(x0), 0)
    y1, x1 = min(int(y1), plane.shape[0] - 1), min(int(x1), plane.shape[1] - 1)
    start, end = canvas_offset(driver, y0, x0), canvas_offset(driver, y1, x1)
    chain = ActionChains(driver).move_to_element_with_offset(canvas, *start).click_and_hold()
    chain.move_by_offset(end[0] - start[0], end[1] - start[1]).release().perform()


def latest_timing(driver, before: int) -> dict | None:
    """The page's newest click-to-mask timing once there are more than ``before``."""
    timings = driver.execute_script("return window.intrabenchTimings")
    return timings[-1] if len(timings) > before else None


def measure_target(
    driver, server, reference: np.ndarray, kind: str, slices: int, label: str
) -> tuple[list[float], list[float]]:
    """Seconds to the mask on screen and to the shown slice encoded, per slice of a target."""
    encoded = server.session.encoder.encoded
    driver.get(server.url)
    wait(lambda: driver.execute_script("return document.body.dataset.ready"), 60)
    on_screen, encodes = [], []
    for z in target_slices(reference, slices):
        go_to_slice(driver, int(z))
        shown = time.perf_counter()
        wait(lambda z=z: int(z) in encoded, 300)
        encodes.append(time.perf_counter() - shown)
        before = len(driver.execute_script("return window.intrabenchTimings"))
        act(driver, kind, reference[int(z)])
        timing = wait(lambda before=before: latest_timing(driver, before), 300)
        on_screen.append(float(timing["seconds"]))
        print(
            f"  {label} slice {z}: {on_screen[-1]:.3f} s on screen (model "
            f"{timing['model_s']:.3f} s; encoded ahead in {encodes[-1]:.2f} s)",
            flush=True,
        )
    return on_screen, encodes


def run_model(name: str, kind: str, slices: int, out: Path) -> tuple[list[float], list[float]]:
    from intrabench import registry
    from intrabench.people.sessions.live import LiveSession, session_header
    from intrabench.people.sessions.server import SessionServer
    from intrabench.people.sessions.setup import build_model

    dataset = registry.datasets.create("demo-real", {})
    started = time.perf_counter()
    model = build_model(name, {})
    print(f"{name}: built and ready in {time.perf_counter() - started:.1f} s", flush=True)
    on_screen, encodes = [], []
    for case_id in dataset.case_ids():
        case = dataset.load(case_id)
        for target in case.targets:
            reference = np.asarray(case.label) == target.label_value
            sid = f"{name}-{case_id}-{target.target_id}"
            header = session_header(sid, "bench", "demo-real", case, target, name, {}, {})
            session = LiveSession.open(out, case, target, model, session_id=sid, header=header)
            server = SessionServer(session)
            server.start()
            driver = chromium()
            try:
                label = f"{case_id} {target.target_id}"
                seconds, encoded = measure_target(driver, server, reference, kind, slices, label)
                on_screen += seconds
                encodes += encoded
            finally:
                driver.quit()
                server.shutdown()
                server.server_close()
                session.writer.close()
    return on_screen, encodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=3, help="slices per target (default 3)")
    parser.add_argument("--models", default="mobilesam,litemedsam")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    print(
        f"machine: {os.cpu_count()} cores visible, torch threads {torch.get_num_threads()}, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    kinds = {"mobilesam": "point", "litemedsam": "box2d"}
    lines = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            seconds, encodes = run_model(name, kinds[name], args.slices, Path(folder))
            median, p90 = np.median(seconds), np.percentile(seconds, 90)
            lines.append(
                f"{name} ({kinds[name]}): click to mask on screen median {median:.3f} s, "
                f"p90 {p90:.3f} s over {len(seconds)} interactions (goal {GOAL_S:.1f} s: "
                f"{'met' if p90 <= GOAL_S else 'not met'}); the shown slice encoded ahead in "
                f"median {np.median(encodes):.2f} s"
            )
    print("\n".join(lines))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
