"""The review: sampling, blinding, what a job draws, ratings import, and the page in Chromium."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.config import RunConfig
from intrabench.engine.runner import Runner
from intrabench.io.results import load_results
from intrabench.review.build import build_review
from intrabench.review.ratings import analyse_ratings, join_ratings, read_ratings
from intrabench.review.render import prompt_marks, radiological, shown_slices
from intrabench.review.sampling import candidate_masks, sample_masks
from intrabench.types import Box2D, Box3D, Lasso, Prompt, Scribble

MODELS = ["region-growing-3d", "random-walker-2d"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("review") / "run"
    config = RunConfig.model_validate({
        "name": "review", "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
        "models": MODELS, "prompters": ["box-3d"], "refiners": ["scribble"],
        "refinement_steps": 1, "save_predictions": "all"})
    Runner(config, path).run()
    return path


@pytest.fixture(scope="module")
def site(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return build_review(run_dir, out, n=6, seed=0), out


def test_every_step_is_saved_and_the_sample_spreads_over_configurations_and_steps(run_dir):
    rows = load_results(run_dir)
    candidates = candidate_masks(rows, run_dir)
    assert len(candidates) == len(rows[~rows["converged"]])  # every step that changed the mask
    sample = sample_masks(candidates, 4, seed=0)
    # 2 models x 2 steps = 4 strata: 4 masks take one from each
    assert sorted(zip(sample["model"], sample["step"])) == sorted(
        (m, s) for m in MODELS for s in (0, 1))
    assert sample["job"].tolist() == ["job-001", "job-002", "job-003", "job-004"]
    again = sample_masks(candidates, 4, seed=0)
    pd.testing.assert_frame_equal(sample, again)  # seeded
    assert not sample_masks(candidates, 4, seed=1)[["case", "target"]].equals(sample[["case", "target"]])


def test_the_site_is_blinded_and_self_contained(site, run_dir):
    built, out = site
    text = "\n".join(p.read_text() for p in out.rglob("*") if p.is_file())
    for secret in MODELS + ["box-3d", "scribble", "phantom_"]:
        assert secret not in text
    assert "http://" not in text and "https://" not in text
    key = pd.read_csv(built.key)
    assert len(key) == built.jobs == 6 and set(key["model"]) <= set(MODELS)
    assert built.key.is_relative_to(run_dir) and not built.key.is_relative_to(out)


def test_prompt_marks_are_drawn_in_the_radiological_view():
    prompt = Prompt(points=[[3, 2, 5], [4, 0, 0]], point_labels=[1, 0],
                    boxes={3: Box2D(1, 2, 4, 6)}, box3d=Box3D(5, 0, 0, 6, 2, 2),
                    scribbles=(Scribble(np.array([[3, 7, 7], [3, 7, 8], [2, 1, 1]]), 0),))
    marks = prompt_marks(prompt, 3, (10, 12))
    # (y, x) -> (9 - y, 11 - x): anterior up, the patient's right on the viewer's left
    assert marks["clicks"] == [[7, 6, 1]]
    assert marks["boxes"] == [[5, 5, 8, 9]]
    assert marks["strokes"] == [{"label": 0, "points": [[2, 4], [2, 3]]}]
    assert prompt_marks(prompt, 5, (10, 12))["boxes"] == [[7, 9, 9, 11]]  # the 3D box's slice
    lasso = Prompt(lassos=(Lasso(4, np.array([[1, 1], [1, 3], [2, 3]]), 1),))
    assert prompt_marks(lasso, 4, (10, 12))["strokes"] == [  # closed: back to its start
        {"label": 1, "points": [[8, 10], [8, 8], [7, 8], [8, 10]]}]
    assert prompt_marks(lasso, 3, (10, 12))["strokes"] == []
    plane = np.arange(6).reshape(2, 3)
    assert radiological(plane).tolist() == [[5, 4, 3], [2, 1, 0]]


def test_the_slider_covers_the_targets_extent_with_the_informative_slice():
    truth = np.zeros((40, 4, 4), dtype=bool)
    truth[5:36] = True
    prediction = np.zeros_like(truth)
    prediction[17, :, :] = True
    slices = shown_slices(prediction, truth, 17)
    assert slices[0] == 5 and slices[-1] == 35 and 17 in slices and len(slices) <= 16


def _ratings_file(path: Path, review: str, rater: str, values: dict[str, int]) -> Path:
    path.write_text(json.dumps({"review": review, "rater": rater, "ratings": [
        {"review": review, "rater": rater, "job": job, "rating": rating,
         "rated_at": "2026-11-23T10:00:00Z"} for job, rating in values.items()]}))
    return path


def test_import_joins_ratings_with_metrics_and_measures_agreement(site, run_dir, tmp_path, capsys):
    built, _out = site
    key = pd.read_csv(built.key)
    jobs = key["job"].tolist()
    first = _ratings_file(tmp_path / "a.json", built.review_id, "alice",
                          dict(zip(jobs, [2, 4, 6, 8, 9, 10])))
    second = _ratings_file(tmp_path / "b.json", built.review_id, "bob",
                           dict(zip(jobs, [3, 4, 6, 7, 9, 10])))
    joined = join_ratings(read_ratings([first, second]), run_dir, load_results(run_dir))
    assert len(joined) == 12 and joined["dice"].notna().all()
    analysis = analyse_ratings(joined, n_boot=200)
    import krippendorff

    expected = krippendorff.alpha(reliability_data=np.array(
        [[2, 4, 6, 8, 9, 10], [3, 4, 6, 7, 9, 10]], dtype=float), level_of_measurement="ordinal")
    # the pivot orders jobs by name; alpha does not depend on the order of units
    assert analysis.alpha == pytest.approx(expected)
    assert 0.8 < analysis.alpha < 1.0
    per_mask = analysis.per_mask.set_index("job")
    assert per_mask.loc[jobs[0], "rating"] == 2.5 and per_mask.loc[jobs[0], "rating_std"] > 0
    by_hand = per_mask.groupby(["model", "prompter", "refiner", "step"])["rating"].mean()
    table = analysis.per_configuration.set_index(["model", "prompter", "refiner", "step"])
    assert table["mean_rating"].to_dict() == pytest.approx(by_hand.to_dict())
    assert analysis.rater_disagreement.iloc[0]["job"] in (jobs[0], jobs[3])
    assert main(["review", "import", str(run_dir), str(first), str(second), "--n-boot", "100"]) == 0
    printed = capsys.readouterr().out
    assert "Krippendorff's alpha (ordinal) = " in printed and "Spearman's rho of rating with Dice" in printed
    assert (run_dir / "reviews" / built.review_id / "per-configuration.csv").exists()
    # a file from another review, or a made-up job: one line, exit 2
    wrong = _ratings_file(tmp_path / "c.json", "0000000000", "carol", {jobs[0]: 5})
    assert main(["review", "import", str(run_dir), str(wrong)]) == 2
    assert "was not built from" in capsys.readouterr().err
    bad = _ratings_file(tmp_path / "d.json", built.review_id, "dan", {"job-999": 5})
    assert main(["review", "import", str(run_dir), str(bad)]) == 2
    assert "job-999" in capsys.readouterr().err


def test_the_report_shows_imported_ratings(site, run_dir, tmp_path):
    built, _out = site
    jobs = pd.read_csv(built.key)["job"].tolist()
    ratings = _ratings_file(tmp_path / "a.json", built.review_id, "alice", dict.fromkeys(jobs, 7))
    assert main(["review", "import", str(run_dir), str(ratings), "--n-boot", "50"]) == 0
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Ratings by people</h2>" in page and built.review_id in page


# -- the page in a real browser ------------------------------------------------------------


def _chromium():
    """A headless Chromium driven by Selenium, or a skip (a failure when CI requires it)."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        if os.environ.get("INTRABENCH_REQUIRE_BROWSER"):
            pytest.fail("Chromium and chromedriver are required (apt-get install chromium "
                        "chromium-driver)")
        pytest.skip("no Chromium here; .ci/run installs it")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1300,900", "--disable-gpu"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


def _wait(condition, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for the page")


CANVAS_FILLED = """
return ['full', 'fullOverlay', 'maskOnly', 'zoom', 'zoomOverlay'].map((id) => {
  const c = document.getElementById(id), g = c.getContext('2d');
  const d = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
  for (let i = 0; i < d.length; i += 4 * 97) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
  return [id, c.width, c.height, seen.size];
});
"""


@pytest.mark.browser
def test_rate_reload_and_export_in_chromium(site, run_dir, tmp_path):
    built, out = site
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = _chromium()
    try:
        driver.execute_cdp_cmd("Page.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(downloads)})
        driver.get(built.site.resolve().as_uri())
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        _wait(lambda: driver.execute_script("return document.body.dataset.drawn"))
        # the five views are there and drawn (more than a couple of colours each)
        for name, width, height, colours in driver.execute_script(CANVAS_FILLED):
            assert width > 50 and height > 50 and colours >= 2, name
        shot = tmp_path / "job.png"
        driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        manifest = driver.execute_script("return window.intrabenchManifest")
        jobs = manifest["jobs"]
        driver.find_element(By.ID, "rater").send_keys("alice")
        body = driver.find_element(By.TAG_NAME, "body")
        body.click()
        body.send_keys("7")  # keyboard: job 1 -> 7, the page moves to job 2
        _wait(lambda: "mask 2 of" in driver.find_element(By.ID, "jobname").text)
        driver.find_element(By.CSS_SELECTOR, "#ratings button[data-value='4']").click()  # mouse
        _wait(lambda: "mask 3 of" in driver.find_element(By.ID, "jobname").text)
        body.send_keys("0")  # 0 is 10
        _wait(lambda: driver.find_element(By.ID, "progress").text == f"3 / {len(jobs)} rated")
        body.send_keys(Keys.ARROW_UP)  # the slider moves through slices
        driver.refresh()  # ratings are kept in the browser between visits
        _wait(lambda: driver.find_element(By.ID, "progress").text == f"3 / {len(jobs)} rated")
        assert driver.find_element(By.ID, "rater").get_attribute("value") == "alice"
        driver.find_element(By.ID, "exportJson").click()
        exported = _wait(lambda: [p for p in downloads.glob("*.json")])
        data = json.loads(exported[0].read_text())
        assert data["review"] == built.review_id and data["rater"] == "alice"
        assert {r["job"]: r["rating"] for r in data["ratings"]} == {
            jobs[0]: 7, jobs[1]: 4, jobs[2]: 10}
        driver.find_element(By.ID, "exportCsv").click()
        csv = _wait(lambda: [p for p in downloads.glob("*.csv")])
        assert pd.read_csv(csv[0])["rating"].tolist() == [7, 4, 10]
    finally:
        driver.quit()
    # what the browser exported imports as it is
    assert main(["review", "import", str(run_dir), str(exported[0]), "--n-boot", "50"]) == 0
