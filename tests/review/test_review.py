"""The review: sampling, blinding, what a job draws, ratings import (the page in Chromium:
test_page.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results
from intrabench.review.build import build_review
from intrabench.review.ratings import analyse_ratings, join_ratings, read_ratings
from intrabench.review.render import (
    grey_pixels,
    grey_scale,
    job_data,
    prompt_marks,
    prompt_slices,
    radiological,
    shown_slices,
    start_slice,
    zoom_window,
)
from intrabench.review.sampling import (
    candidate_masks,
    describe_sample,
    even_shares,
    sample_masks,
)
from intrabench.types import Box2D, Box3D, Lasso, Prompt, Scribble

from .conftest import MODELS, PROMPTERS, read_job


def test_every_step_is_saved_and_the_sample_spreads_over_configurations_and_steps(run_dir):
    rows = load_results(run_dir)
    candidates = candidate_masks(rows, run_dir)
    assert len(candidates) == len(rows[~rows["converged"]])  # every step that changed the mask
    sample = sample_masks(candidates, 12, seed=0)
    # 3 models x 2 prompters x 2 steps: 12 masks take one of each
    assert sorted(zip(sample["model"], sample["prompter"], sample["step"])) == sorted(
        (m, p, s) for m in MODELS for p in PROMPTERS for s in (0, 1)
    )
    assert sample["job"].tolist() == [f"job-{i:03d}" for i in range(1, 13)]
    again = sample_masks(candidates, 12, seed=0)
    pd.testing.assert_frame_equal(sample, again)  # seeded
    assert not sample_masks(candidates, 12, seed=1)[["case", "target"]].equals(
        sample[["case", "target"]]
    )


def test_a_perfect_mask_is_a_candidate_when_only_final_masks_are_saved(tmp_path):
    """#65 item 11: with save_predictions: true an episode that reached a perfect mask saves it
    as its final file, but its final row is a converged repeat: the perfect masks were never
    sampled (the best masks never rated). The file is the mask of the step that made it."""
    from intrabench.io.run_paths import prediction_file_name, prediction_folder

    base = {"run": "r", "dataset": "d", "model": "m", "prompter": "p", "refiner": "f", "seed": 0}
    rows = pd.DataFrame(
        [
            {**base, "case": "c1", "target": "t", "step": 0, "converged": False, "dice": 0.8},
            {**base, "case": "c1", "target": "t", "step": 1, "converged": False, "dice": 1.0},
            {**base, "case": "c1", "target": "t", "step": 2, "converged": True, "dice": 1.0},
            {**base, "case": "c1", "target": "t", "step": 3, "converged": True, "dice": 1.0},
            {**base, "case": "c2", "target": "t", "step": 0, "converged": False, "dice": 0.5},
            {**base, "case": "c2", "target": "t", "step": 1, "converged": False, "dice": 0.6},
            {**base, "case": "c2", "target": "t", "step": 2, "converged": False, "dice": 0.7},
            {**base, "case": "c2", "target": "t", "step": 3, "converged": False, "dice": 0.9},
        ]
    )
    folder = prediction_folder(tmp_path, "d", "m", "p", "f", 0)
    folder.mkdir(parents=True)
    for case in ("c1", "c2"):
        (folder / prediction_file_name(case, "t")).write_bytes(b"saved")
    candidates = candidate_masks(rows, tmp_path)
    assert [
        (c, s, d) for c, s, d in zip(candidates["case"], candidates["step"], candidates["dice"])
    ] == [("c1", 1, 1.0), ("c2", 3, 0.9)]
    assert candidates["mask_file"].tolist() == [
        str(folder / prediction_file_name(case, "t")) for case in ("c1", "c2")
    ]


def _grid(models: int, prompters: int, steps: int, per_cell: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": f"m{m}",
                "prompter": f"p{p}",
                "refiner": "none",
                "step": s,
                "dataset": "d",
                "case": c,
            }
            for m in range(models)
            for p in range(prompters)
            for s in range(steps)
            for c in range(per_cell)
        ]
    )


def test_the_sample_spreads_over_models_first_not_in_alphabetical_order():
    # the case: 3 models, many strata, --n 12 -> 4 masks of each model (it was 12 of
    # the first); within a model its 4 spread over 5 prompters and 6 steps
    sample = sample_masks(_grid(3, 5, 6, 10), 12, seed=0)
    assert sample["model"].value_counts().to_dict() == {"m0": 4, "m1": 4, "m2": 4}
    for _model, masks in sample.groupby("model"):
        assert masks["prompter"].nunique() == 4 and masks["step"].nunique() == 4
    # over the whole sample no prompter or step is taken twice before all were taken once
    assert sample["prompter"].value_counts().max() - sample["prompter"].value_counts().min() <= 1
    assert sorted(sample["step"].value_counts()) == [2] * 6
    # what does not divide goes to the values used least so far: 3 masks, 3 different steps
    three = sample_masks(_grid(3, 1, 2, 5), 3, seed=4)
    assert sorted(three["model"]) == ["m0", "m1", "m2"]
    assert sorted(three["step"].value_counts()) == [1, 2]
    # a model with too few masks gives its share to the others
    uneven = pd.concat([_grid(1, 1, 1, 1), _grid(3, 1, 1, 10).query("model != 'm0'")])
    assert uneven["model"].value_counts().to_dict() == {"m1": 10, "m2": 10, "m0": 1}
    taken = sample_masks(uneven.reset_index(drop=True), 9, seed=0)["model"].value_counts()
    assert taken.to_dict() == {"m1": 4, "m2": 4, "m0": 1}
    assert len(sample_masks(uneven.reset_index(drop=True), 100, seed=0)) == 21  # all there is
    assert describe_sample(sample)[0] == "model: m0 4, m1 4, m2 4"


def test_even_shares_fills_equal_shares_up_to_each_capacity():
    # water filling: 12 over capacities 1, 10, 10 -> 1, then 5.5 each: the remainder to
    # the key first in preference order
    assert even_shares({"a": 1, "b": 10, "c": 10}, 12, {"a": 0, "b": 1, "c": 0}) == {
        "a": 1,
        "b": 5,
        "c": 6,
    }
    assert even_shares({"a": 2, "b": 2}, 10, {"a": 0, "b": 0}) == {"a": 2, "b": 2}
    assert even_shares({"a": 5, "b": 5, "c": 5}, 2, {"a": 2, "b": 0, "c": 1}) == {
        "a": 0,
        "b": 1,
        "c": 1,
    }


def test_the_site_is_blinded_and_self_contained(site, run_dir):
    built, out = site
    text = "\n".join(p.read_text() for p in out.rglob("*") if p.is_file())
    for secret in MODELS + PROMPTERS + ["scribble", "phantom_"]:
        assert secret not in text
    assert "http://" not in text and "https://" not in text
    key = pd.read_csv(built.key)
    assert len(key) == built.jobs == 12 and set(key["model"]) <= set(MODELS)
    # what was sampled is said, and kept beside the key
    assert built.spread[0] == "model: " + ", ".join(f"{m} 4" for m in sorted(MODELS))
    assert (built.key.parent / "sample.txt").read_text().splitlines()[1:] == built.spread
    assert built.key.is_relative_to(run_dir) and not built.key.is_relative_to(out)


def test_a_run_without_refinement_builds_a_review(tmp_path):
    # one step per episode (a model without refinement, as LiteMedSAM in the demo): the prompt
    # history of a mask is one row (it was read as a Series and failed)
    config = RunConfig.model_validate(
        {
            "name": "single",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": ["region-growing-3d"],
            "prompters": ["box-3d"],
            "save_predictions": True,
        }
    )
    Runner(config, tmp_path / "run").run()
    built = build_review(tmp_path / "run", tmp_path / "site", n=3, seed=0)
    assert built.jobs == 3
    job = read_job(tmp_path / "site", "job-001")
    assert any(view["marks"]["boxes"] for view in job["slices"])  # the 3D box is drawn


def test_prompt_marks_are_drawn_in_the_radiological_view():
    prompt = Prompt(
        points=[[3, 2, 5], [4, 0, 0]],
        point_labels=[1, 0],
        boxes={3: Box2D(1, 2, 4, 6)},
        box3d=Box3D(5, 0, 0, 6, 2, 2),
        scribbles=(Scribble(np.array([[3, 7, 7], [3, 7, 8], [2, 1, 1]]), 0),),
    )
    marks = prompt_marks(prompt, 3, (10, 12))
    # (y, x) -> (9 - y, 11 - x): anterior up, the patient's right on the viewer's left
    assert marks["clicks"] == [[7, 6, 1]]
    assert marks["boxes"] == [[5, 5, 8, 9]]
    assert marks["strokes"] == [{"label": 0, "points": [[2, 4], [2, 3]]}]
    assert prompt_marks(prompt, 5, (10, 12))["boxes"] == [[7, 9, 9, 11]]  # the 3D box's slice
    lasso = Prompt(lassos=(Lasso(4, np.array([[1, 1], [1, 3], [2, 3]]), 1),))
    assert prompt_marks(lasso, 4, (10, 12))["strokes"] == [  # closed: back to its start
        {"label": 1, "points": [[8, 10], [8, 8], [7, 8], [8, 10]]}
    ]
    assert prompt_marks(lasso, 3, (10, 12))["strokes"] == []
    plane = np.arange(6).reshape(2, 3)
    assert radiological(plane).tolist() == [[5, 4, 3], [2, 1, 0]]


def test_a_scribble_across_slices_leaves_a_dot_on_each_and_runs_are_not_joined():
    # drawn through the slices (z changes at every voxel, as the scribble refiner's are)
    across = Prompt(scribbles=(Scribble(np.array([[10, 4, 2], [11, 5, 2], [12, 5, 3]]), 1),))
    assert prompt_marks(across, 11, (10, 12))["strokes"] == [{"label": 1, "points": [[4, 9]]}]
    # a stroke that leaves the slice and comes back is two strokes, not one line across
    back = Prompt(scribbles=(Scribble(np.array([[3, 1, 1], [3, 1, 2], [4, 1, 3], [3, 1, 4]]), 0),))
    assert prompt_marks(back, 3, (10, 12))["strokes"] == [
        {"label": 0, "points": [[8, 10], [8, 9]]},
        {"label": 0, "points": [[8, 7]]},
    ]


def test_the_slices_shown_hold_the_prompt_and_the_job_opens_on_the_latest_interaction():
    truth = np.zeros((60, 4, 4), dtype=bool)
    truth[10:50] = True
    prediction = truth.copy()
    click = Prompt(points=[[23, 1, 1]], point_labels=[1])  # 23 is not among the even spacing
    scribble = Prompt(scribbles=(Scribble(np.array([[31, 1, 1], [31, 1, 2], [32, 2, 2]]), 1),))
    both = click.merged_with(scribble)
    assert prompt_slices(both) == {23: 1, 31: 2, 32: 1}
    slices = shown_slices(prediction, truth, 12, prompt_slices(both))
    assert 23 not in shown_slices(prediction, truth, 12)
    assert {23, 31, 32, 12} <= set(slices) and slices[0] == 10 and slices[-1] == 49
    # the job opens where the step's own interaction is: most of the scribble lies on 31
    assert start_slice(slices, 12, scribble) == 31
    assert start_slice(slices, 12, click) == 23
    assert start_slice(slices, 12, Prompt(box3d=Box3D(10, 0, 0, 49, 3, 3))) == 12  # 3D box
    assert start_slice(slices, 12, None) == 12
    # a negative click where neither mask nor target is (#49 item 4): the informative slice
    outside = Prompt(points=[[55, 1, 1]], point_labels=[0])
    wide = shown_slices(prediction, truth, 12, prompt_slices(outside))
    assert 55 in wide
    assert start_slice(wide, 12, outside, range(10, 50)) == 12
    assert start_slice(slices, 12, click, range(10, 50)) == 23
    many = Prompt(points=[[z, 1, 1] for z in range(0, 60, 2)], point_labels=[1] * 30)
    assert len(shown_slices(prediction, truth, 12, prompt_slices(many))) <= 2 * 15 + 1


def test_the_slider_covers_the_targets_extent_with_the_informative_slice():
    truth = np.zeros((40, 4, 4), dtype=bool)
    truth[5:36] = True
    prediction = np.zeros_like(truth)
    prediction[17, :, :] = True
    slices = shown_slices(prediction, truth, 17)
    assert slices[0] == 5 and slices[-1] == 35 and 17 in slices and len(slices) <= 16


def test_every_slice_of_a_thin_mask_is_shown_and_each_slice_zooms_on_its_own_mask():
    """#65 item 11: a mask on 4 slices of a 40-slice target had none among the 15 evenly
    spaced ones (a rater could not see it), and one zoom box covered every slice (a small
    part on one slice showed as a few pixels)."""
    truth = np.zeros((60, 40, 40), dtype=bool)
    truth[10:50, 5:35, 5:35] = True
    prediction = np.zeros_like(truth)
    even = set(shown_slices(np.zeros_like(truth), truth, 30))
    thin = [z for z in range(11, 49) if z not in even][:4]
    assert len(thin) == 4
    prediction[thin, 18:22, 18:22] = True
    best = 30
    slices = shown_slices(prediction, truth, best)
    assert set(thin) <= set(slices) and even <= set(slices)
    many = np.zeros_like(truth)
    many[10:50:2, 18:22, 18:22] = True  # 20 mask slices: 15 of them, evenly spaced
    assert len(set(shown_slices(many, truth, best)) & set(range(10, 50, 2))) >= 15
    # the zoom of a slice is the box of its own mask and target
    small = np.zeros((3, 40, 40), dtype=bool)
    small[0, 2:38, 2:38] = True  # a large target on slice 0
    small[1, 20:22, 20:22] = True  # a small one on slice 1
    assert zoom_window(small, small, [0, 1, 2]) == zoom_window(small, small, [0])
    row0, col0, row1, col1 = zoom_window(small, small, [1])
    assert (row1 - row0, col1 - col0) == (24, 24) and row0 <= 40 - 22 < row1
    data = job_data("job-001", np.zeros((3, 40, 40)), (1.0, 1.0, 1.0), True, small, small, Prompt())
    boxes = {view["z"]: view["zoomBox"] for view in data["slices"]}
    assert boxes[1] == [row0, col0, row1, col1] and boxes[0] == list(zoom_window(small, small, [0]))
    assert data["zoomBox"] == list(zoom_window(small, small, [0, 1]))


def _ratings_file(path: Path, review: str, rater: str, values: dict[str, int]) -> Path:
    path.write_text(
        json.dumps(
            {
                "review": review,
                "rater": rater,
                "ratings": [
                    {
                        "review": review,
                        "rater": rater,
                        "job": job,
                        "rating": rating,
                        "rated_at": "2026-11-23T10:00:00Z",
                    }
                    for job, rating in values.items()
                ],
            }
        )
    )
    return path


def test_import_joins_ratings_with_metrics_and_measures_agreement(site, run_dir, tmp_path, capsys):
    built, _out = site
    key = pd.read_csv(built.key)
    jobs = key["job"].tolist()
    first = _ratings_file(
        tmp_path / "a.json", built.review_id, "alice", dict(zip(jobs, [2, 4, 6, 8, 9, 10]))
    )
    second = _ratings_file(
        tmp_path / "b.json", built.review_id, "bob", dict(zip(jobs, [3, 4, 6, 7, 9, 10]))
    )
    joined = join_ratings(read_ratings([first, second]), run_dir, load_results(run_dir))
    assert len(joined) == 12 and joined["dice"].notna().all()
    analysis = analyse_ratings(joined, n_boot=200)
    import krippendorff

    expected = krippendorff.alpha(
        reliability_data=np.array([[2, 4, 6, 8, 9, 10], [3, 4, 6, 7, 9, 10]], dtype=float),
        level_of_measurement="ordinal",
    )
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
    assert (
        "Krippendorff's alpha (ordinal) = " in printed
        and "Spearman's rho of rating with Dice" in printed
    )
    assert (run_dir / "reviews" / built.review_id / "per-configuration.csv").exists()
    # a file from another review, or a made-up job: one line, exit 2
    wrong = _ratings_file(tmp_path / "c.json", "0000000000", "carol", {jobs[0]: 5})
    assert main(["review", "import", str(run_dir), str(wrong)]) == 2
    assert "was not built from" in capsys.readouterr().err
    bad = _ratings_file(tmp_path / "d.json", built.review_id, "dan", {"job-999": 5})
    assert main(["review", "import", str(run_dir), str(bad)]) == 2
    assert "job-999" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rating": 7.5}, "whole numbers 1-10; found 7.5"),
        ({"rating": True}, "whole numbers 1-10; found True"),
        ({"rater": ""}, "needs a rater's name"),
        ({"review": "../../demo-review-other/reviews/x"}, "is not one that review build writes"),
        ({"review": None}, "is not one that review build writes"),
    ],
)
def test_import_refuses_ratings_nobody_meant(site, run_dir, tmp_path, capsys, change, message):
    """#50 item 6 and #49 item 3: 7.5 became 7, true 1, an empty rater was a rater, a review
    id with ../ wrote into another run, a null review was a traceback."""
    built, _out = site
    job = pd.read_csv(built.key)["job"].iloc[0]
    record = {"review": built.review_id, "rater": "eve", "job": job, "rating": 7, **change}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"ratings": [record]}))
    assert main(["review", "import", str(run_dir), str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["review", "import", str(run_dir), str(deep)]) == 2
    assert "not a ratings file" in capsys.readouterr().err


def test_imports_add_up_and_the_summary_is_json(site, run_dir, tmp_path, capsys):
    """Two raters imported one after the other are two raters (#49 item 3); an integer job id
    is read as its text; summary.json holds null, never a bare NaN."""
    built, _out = site
    jobs = pd.read_csv(built.key)["job"].tolist()
    first = _ratings_file(tmp_path / "f.json", built.review_id, "fay", dict.fromkeys(jobs, 5))
    second = _ratings_file(tmp_path / "g.json", built.review_id, "gus", dict.fromkeys(jobs, 6))
    assert main(["review", "import", str(run_dir), str(first), "--replace", "--n-boot", "20"]) == 0
    summary = json.loads((run_dir / "reviews" / built.review_id / "summary.json").read_text())
    assert summary["raters"] == 1 and summary["krippendorff_alpha_ordinal"] is None
    assert main(["review", "import", str(run_dir), str(second), "--n-boot", "20"]) == 0
    assert f"kept {len(jobs)} earlier rating(s) of 1 rater(s) (fay)" in capsys.readouterr().err
    summary = json.loads((run_dir / "reviews" / built.review_id / "summary.json").read_text())
    assert summary["raters"] == 2 and summary["ratings"] == 2 * len(jobs)
    # one correlation per metric the review reads (the registered ones with its feature)
    assert [key for key in summary if key.startswith("spearman")] == [
        "spearman_rating_dice",
        "spearman_rating_nsd",
    ]


def _timed_file(path: Path, review: str, rater: str, values: dict[str, tuple[int, str]]) -> Path:
    """A page export whose ratings carry their own ``rated_at``: job -> (rating, rated_at)."""
    path.write_text(
        json.dumps(
            {
                "review": review,
                "rater": rater,
                "ratings": [
                    {"review": review, "rater": rater, "job": job, "rating": rating, "rated_at": at}
                    for job, (rating, at) in values.items()
                ],
            }
        )
    )
    return path


def _imported(run_dir: Path, review: str) -> dict[tuple[str, str], int]:
    frame = pd.read_csv(run_dir / "reviews" / review / "ratings.csv")
    return {(r, j): int(v) for r, j, v in zip(frame["rater"], frame["job"], frame["rating"])}


def test_the_newest_rating_of_a_mask_wins_whatever_the_order_of_the_files(
    site, run_dir, tmp_path, capsys
):
    """#65 item 4: the last file on the command line won; the browser's 'ratings (1).json'
    sorts before 'ratings.json', so an older export replaced a newer one without a word."""
    built, _out = site
    jobs = pd.read_csv(built.key)["job"].tolist()
    newer = _timed_file(
        tmp_path / "ratings (1).json",
        built.review_id,
        "ida",
        {jobs[0]: (8, "2026-11-24T09:30:00.120Z"), jobs[1]: (2, "2026-11-23T08:00:00.000Z")},
    )
    older = _timed_file(
        tmp_path / "ratings.json",
        built.review_id,
        "ida",
        {jobs[0]: (3, "2026-11-23T10:00:00.000Z"), jobs[1]: (9, "2026-11-24T11:00:00+01:00")},
    )  # 10:00 UTC: newer
    for order in ([newer, older], [older, newer]):
        assert (
            main(
                ["review", "import", str(run_dir), *map(str, order), "--replace", "--n-boot", "20"]
            )
            == 0
        )
        assert _imported(run_dir, built.review_id) == {("ida", jobs[0]): 8, ("ida", jobs[1]): 9}
        err = capsys.readouterr().err
        assert (
            "ida rated 2 mask(s) more than once: the newest rating (rated_at) of each is kept"
            in err
        )
    # an old export imported after a newer one does not replace it either
    assert main(["review", "import", str(run_dir), str(newer), "--replace", "--n-boot", "20"]) == 0
    assert main(["review", "import", str(run_dir), str(older), "--n-boot", "20"]) == 0
    assert _imported(run_dir, built.review_id) == {("ida", jobs[0]): 8, ("ida", jobs[1]): 9}
    record = pd.read_csv(run_dir / "reviews" / built.review_id / "imported-ratings.csv")
    assert sorted(record["rated_at"]) == ["2026-11-24T09:30:00.120Z", "2026-11-24T10:00:00.000Z"]


def test_a_record_of_earlier_imports_without_times_is_older_than_a_new_file(
    site, run_dir, tmp_path, capsys
):
    """imported-ratings.csv written before rated_at was kept has no times: its ratings are
    older than any rating with a time, and stay where the new file does not rate the mask."""
    built, _out = site
    jobs = pd.read_csv(built.key)["job"].tolist()
    record = run_dir / "reviews" / built.review_id / "imported-ratings.csv"
    record.write_text(
        f"review,rater,job,rating,file\n{built.review_id},lea,{jobs[0]},2,a.json\n"
        f"{built.review_id},lea,{jobs[1]},6,a.json\n"
    )
    new = _timed_file(
        tmp_path / "n.json", built.review_id, "lea", {jobs[0]: (7, "2020-01-01T00:00:00.000Z")}
    )
    assert main(["review", "import", str(run_dir), str(new), "--n-boot", "20"]) == 0
    assert _imported(run_dir, built.review_id) == {("lea", jobs[0]): 7, ("lea", jobs[1]): 6}
    assert "kept 1 earlier rating(s) of 1 rater(s) (lea)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("at", "message"),
    [
        ("yesterday", "rated_at 'yesterday' is not a time"),
        ("", "rated_at '' is not a time"),
        (None, "rated_at None is not a time"),
        # the newest rating wins: a time ahead of the clock would win over every later one
        ("2099-01-01T00:00:00.000Z", "rated_at '2099-01-01T00:00:00.000Z' is in the future"),
    ],
)
def test_a_rating_time_that_is_not_one_is_refused(site, run_dir, tmp_path, capsys, at, message):
    built, _out = site
    job = pd.read_csv(built.key)["job"].iloc[0]
    path = _timed_file(tmp_path / "t.json", built.review_id, "ivo", {job: (5, at)})
    assert main(["review", "import", str(run_dir), str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "t.json" in err and "Traceback" not in err


def test_two_ratings_of_a_mask_at_the_same_time_are_refused(site, run_dir, tmp_path, capsys):
    built, _out = site
    job = pd.read_csv(built.key)["job"].iloc[0]
    at = "2026-11-23T10:00:00.000Z"
    one = _timed_file(tmp_path / "one.json", built.review_id, "jo", {job: (4, at)})
    two = _timed_file(tmp_path / "two.json", built.review_id, "jo", {job: (7, at)})
    assert main(["review", "import", str(run_dir), str(one), str(two)]) == 2
    err = capsys.readouterr().err
    assert (
        f"jo rated {job} 4 (one.json) and 7 (two.json) at the same time ({at[:19]}"
    ) in err and "Traceback" not in err
    # the same rating twice (one export sent twice) is one rating
    assert (
        main(["review", "import", str(run_dir), str(one), str(one), "--replace", "--n-boot", "20"])
        == 0
    )
    assert _imported(run_dir, built.review_id) == {("jo", job): 4}


def test_two_reviews_of_one_run_imported_together_are_refused(site, run_dir, tmp_path, capsys):
    """#65 item 4: both reviews name their masks job-001...; a rater's ratings of one review
    were dropped as duplicates of the other's, and the import said nothing (exit 0)."""
    built, _out = site
    other = build_review(run_dir, tmp_path / "other-site", n=12, seed=1)
    assert other.review_id != built.review_id
    jobs = pd.read_csv(built.key)["job"].tolist()
    assert pd.read_csv(other.key)["job"].tolist() == jobs  # the same job names
    first = _ratings_file(tmp_path / "a.json", built.review_id, "kim", dict.fromkeys(jobs, 3))
    second = _ratings_file(tmp_path / "b.json", other.review_id, "kim", dict.fromkeys(jobs, 9))
    folder = run_dir / "reviews" / other.review_id
    assert main(["review", "import", str(run_dir), str(first), str(second)]) == 2
    err = capsys.readouterr().err
    named = "; ".join(sorted([f"{built.review_id}: a.json", f"{other.review_id}: b.json"]))
    assert f"the ratings come from 2 reviews ({named}); import one review at a time" in err
    assert not (folder / "ratings.csv").exists()  # nothing written
    # one at a time, each is imported whole
    assert main(["review", "import", str(run_dir), str(second), "--n-boot", "20"]) == 0
    assert set(_imported(run_dir, other.review_id).values()) == {9}
    assert len(_imported(run_dir, other.review_id)) == len(jobs)


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff garbage \x89PNG",
        b"review,rater,job,rating,file\nx,eve,job-1,nan,a.json\n",
        b"review,rater,job,rating,file\nx,eve,job-1,-3,a.json\n",
        b"review,rater,job,rating,file\nx,eve,job-1,1e308,a.json\n",
        b"review,rater,job,rating,file\n../../other,eve,job-1,5,a.json\n",
        b"rater\n" + b"[" * 10_000 + b"\n",
    ],
)
def test_a_damaged_record_of_earlier_imports_is_one_line(site, run_dir, tmp_path, capsys, content):
    """imported-ratings.csv is read back at the next import: read with a rater's file's checks,
    garbage in it is one line (exit 2), never a traceback nor a silent loss."""
    built, _out = site
    record = run_dir / "reviews" / built.review_id / "imported-ratings.csv"
    jobs = pd.read_csv(built.key)["job"].tolist()
    ratings = _ratings_file(tmp_path / "h.json", built.review_id, "hal", dict.fromkeys(jobs, 4))
    saved = record.read_bytes() if record.exists() else None
    record.write_bytes(content)
    try:
        assert main(["review", "import", str(run_dir), str(ratings), "--n-boot", "20"]) == 2
        err = capsys.readouterr().err
        assert "imported-ratings.csv" in err and "Traceback" not in err
        assert (
            main(["review", "import", str(run_dir), str(ratings), "--replace", "--n-boot", "20"])
            == 0
        )  # --replace starts over
    finally:
        if saved is not None:
            record.write_bytes(saved)


def test_the_report_shows_imported_ratings(site, run_dir, tmp_path):
    built, _out = site
    jobs = pd.read_csv(built.key)["job"].tolist()
    ratings = _ratings_file(tmp_path / "a.json", built.review_id, "alice", dict.fromkeys(jobs, 7))
    assert main(["review", "import", str(run_dir), str(ratings), "--n-boot", "50"]) == 0
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Ratings by people</h2>" in page and built.review_id in page


def test_pictures_carry_the_grey_values_and_todays_default_grey():
    # integer CT: 16-bit values exact (scale 1); blue: the default window's grey as before
    rng = np.random.default_rng(0)
    image = rng.integers(-1024, 2000, size=(3, 20, 20)).astype(np.int16)
    base, scale = grey_scale(image, 400.0)
    assert (base, scale) == (float(image.min()), 1.0)
    pixels = grey_pixels(image[1], -160.0, 240.0, base, scale)
    values = base + scale * (pixels[..., 0].astype(np.float64) * 256 + pixels[..., 1])
    assert np.array_equal(values, image[1])
    old = (np.clip((image[1].astype(np.float64) + 160) / 400, 0, 1) * 255).round()
    assert np.array_equal(pixels[..., 2], old.astype(np.uint8))
    # a float MR image: steps of a 1024th of the default window's width (12 bits here)
    mr = rng.normal(300.0, 80.0, size=(3, 20, 20))
    base, scale = grey_scale(mr, 256.0)
    assert base == mr.min() and scale == 0.25
    pixels = grey_pixels(mr[0], 100.0, 356.0, base, scale)
    values = base + scale * (pixels[..., 0].astype(np.float64) * 256 + pixels[..., 1])
    assert np.abs(values - mr[0]).max() <= 0.125 + 1e-9
    # a range too wide for that step: 65536 levels over it
    assert grey_scale(np.array([0.5, 1e6]), 10.0)[1] == pytest.approx((1e6 - 0.5) / 65535)


def test_a_job_names_its_default_window_and_presets():
    small = np.zeros((3, 40, 40), dtype=bool)
    small[1, 10:20, 10:20] = True
    ct = job_data(
        "job-001", np.full((3, 40, 40), -1000.0), (1.0, 1.0, 1.0), True, small, small, Prompt()
    )
    assert ct["window"] == [-1350.0, 150.0]  # a target darker than -300 HU: lung, as before
    assert [(p["name"], p["centre"], p["width"]) for p in ct["presets"]] == [
        ("soft tissue", 40.0, 400.0),
        ("lung", -600.0, 1500.0),
        ("bone", 400.0, 1800.0),
    ]
    mr_image = np.arange(3 * 40 * 40, dtype=np.float64).reshape(3, 40, 40)
    mr = job_data("job-002", mr_image, (1.0, 1.0, 1.0), False, small, small, Prompt())
    shown = mr_image[[s["z"] for s in mr["slices"]]]
    low, high = np.percentile(shown, [0.5, 99.5])
    assert mr["window"] == [low, high]
    names = [p["name"] for p in mr["presets"]]
    assert names == ["percentiles 0.5-99.5", "percentiles 2-98"]
    low2, high2 = np.percentile(shown, [2, 98])
    assert mr["presets"][1]["centre"] == pytest.approx((low2 + high2) / 2)
    assert mr["presets"][1]["width"] == pytest.approx(high2 - low2)
    assert mr["grey"] == {"base": float(shown.min()), "scale": 1.0}


def test_a_rating_time_a_few_hours_ahead_is_another_clock_and_kept(tmp_path):
    from intrabench.review.ratings import _rating_times

    ahead = (pd.Timestamp.now(tz="UTC") + pd.Timedelta(hours=3)).tz_localize(None)
    text = ahead.isoformat(timespec="milliseconds") + "Z"
    frame = pd.DataFrame({"rated_at": [text]})
    assert _rating_times(tmp_path / "r.json", frame) == [text]
