"""Clicks collected as RClicks did, in 3D: the tasks from a run (balanced, blinded), what a
task shows, the import of people's click files (hostile ones refused, one line per reason),
and a robustness run on the imported clicks."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from intrabench import registry
from intrabench.cli import main
from intrabench.people.clicks.build import build_collection
from intrabench.people.clicks.importing import MAX_FILE_BYTES
from intrabench.people.clicks.render import ERROR_COLOUR, border
from intrabench.plotting import radiological
from intrabench.review.render import windowed

from .click_fixtures import (
    DATASET,
    MODELS,
    click_file,
    click_record,
    manifest_of,
    task_of,
)


def _case(case_id: str):
    params = {k: v for k, v in DATASET.items() if k != "name"}
    return registry.datasets.create(DATASET["name"], params).load(case_id)


def _pixels(url: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))


def test_tasks_are_balanced_over_models_and_targets_and_blinded(click_site, click_run):
    built, out = click_site
    assert built.tasks == 12
    # two models' corrections of one target at one step are one region of the recorded map
    regions = pd.read_csv(built.key).drop_duplicates(["case", "target", "click_step"])
    assert len(regions) == 11
    assert built.spread[:2] == [
        "kind: correction 9, first 3",
        "model (corrections): random-walker-3d 5, region-growing-3d 4",
    ]
    key = pd.read_csv(built.key)
    firsts, corrections = key[key["kind"] == "first"], key[key["kind"] == "correction"]
    assert len(firsts) == 3 and not firsts.duplicated(["case", "target"]).any()
    assert (firsts["click_step"] == 0).all()
    # a correction of result step s is the (s + 1)-th correction of the recorded map
    assert (corrections["click_step"] == corrections["mask_step"] + 1).all()
    for _, rows in corrections.groupby("model"):  # within a model: spread over the targets
        per_target = rows.groupby(["case", "target"]).size()
        assert per_target.max() - per_target.min() <= 1 and per_target.max() == 1
    # blinded: no model, prompter or refiner is named in anything a person is handed
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for name in [*MODELS, "center-points-per-volume", "center-error-click"]:
                assert name not in text, (path, name)
    manifest = manifest_of(out)
    assert [t["task"] for t in manifest["tasks"]] == key["task"].tolist()
    assert manifest["collection"] == built.collection
    # the same run and seed: the same tasks; another seed: another order
    again = build_collection(click_run, out.parent / "again", n=12, seed=0, progress=False)
    assert again.collection == built.collection
    assert pd.read_csv(again.key).equals(key)
    other = build_collection(click_run, out.parent / "other", n=12, seed=1, progress=False)
    assert other.collection != built.collection


def test_a_first_click_task_shows_the_target_outlined_in_the_default_window(click_site):
    built, out = click_site
    entry = next(t for t in manifest_of(out)["tasks"] if t["kind"] == "first")
    task = task_of(out, entry["task"])
    case = _case(entry["case"])
    target = next(t for t in case.targets if t.target_id == entry["target"])
    truth = case.target_mask(target)
    assert task["shape"] == [16, 48, 48] and task["step"] == 1
    zs = [s["z"] for s in task["slices"]]
    assert zs == list(range(zs[0], zs[-1] + 1))  # a contiguous, scrollable run of slices
    extent = np.flatnonzero(truth.any(axis=(1, 2)))
    assert zs[0] <= extent[0] and zs[-1] >= extent[-1]
    start = task["slices"][task["start"]]
    assert start["z"] == int(np.argmax(truth.sum(axis=(1, 2))))  # the target's largest slice
    outline = _pixels(start["outline"])
    magenta = (outline == np.array(ERROR_COLOUR, dtype=np.uint8)).all(axis=-1)
    assert np.array_equal(magenta, radiological(border(truth[start["z"]])))
    grey = _pixels(start["picture"])[..., 2]  # blue: the default window's grey
    low, high = task["window"]
    image = np.asarray(case.image.array)
    assert np.array_equal(grey, windowed(radiological(image[start["z"]]), low, high))
    assert task["target_name"] == f"lesion ({entry['target']})" and task["case"] == entry["case"]


def _good_clicks(out, built):
    """A scripted person's clicks: on every first-click task, the target's middle voxel."""
    manifest = manifest_of(out)
    clicks = []
    for entry in manifest["tasks"]:
        if entry["kind"] != "first":
            continue
        case = _case(entry["case"])
        target = next(t for t in case.targets if t.target_id == entry["target"])
        voxels = np.argwhere(case.target_mask(target))
        clicks.append(click_record(entry, built.collection, voxels[len(voxels) // 2]))
    return manifest, clicks


def test_import_writes_the_recorded_csv_and_refuses_hostile_clicks_one_line_each(
    click_site, tmp_path, capsys
):
    built, out = click_site
    manifest, good = _good_clicks(out, built)
    tasks = manifest["tasks"]
    one, two = tasks[0], tasks[1]
    other_case = next(t for t in tasks if t["case"] != one["case"])
    hostile = [
        click_record(one, built.collection, (2, 3, 4), z=float("nan")),
        click_record(one, built.collection, (2, 48, 4)),  # y off the 48-voxel grid
        click_record(one, built.collection, (-1, 3, 4)),
        click_record(one, built.collection, (2, 3, 4), x="4"),
        click_record(one, built.collection, (2, 3, 4), y=3.5),
        # another case's ids on task one: refused, never attributed to either task
        click_record(one, built.collection, (2, 3, 4), case=other_case["case"]),
        # task two's ids under task one's name
        {**click_record(two, built.collection, (2, 3, 4)), "task": one["task"]},
        click_record({**one, "task": "task-999"}, built.collection, (2, 3, 4)),
        click_record(one, "0000000000", (2, 3, 4)),
        click_record(one, built.collection, (2, 3, 4), label=2),
        click_record(one, built.collection, (2, 3, 4), seconds=float("inf")),
        "not a click",
    ]
    mixed = click_file(tmp_path / "alice.json", built.collection, good + hostile)
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xff{not json")
    nan_json = tmp_path / "nan.json"
    nan_json.write_text('{"format": "intrabench-clicks", "version": 1, "collection": NaN}')
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    foreign = click_file(tmp_path / "foreign.json", "ffffffffff", good)
    digits = tmp_path / "digits.json"  # an integer longer than Python converts
    digits.write_text(f'{{"format": "intrabench-clicks", "clicks": [{{"z": 1{"0" * 5000}}}]}}')
    to = tmp_path / "people.csv"
    files = [mixed, garbage, nan_json, huge, foreign, digits]
    assert (
        main(
            ["clicks", "collect", "import", *map(str, files), "--tasks", str(out), "--to", str(to)]
        )
        == 0
    )
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert f"{garbage}: refused: not text (UTF-8)" in lines
    assert any(
        line.startswith(f"{nan_json}: refused: clicks of collection 'nan'") for line in lines
    )
    assert any(
        line.startswith(f"{digits}: refused: not JSON a click file can be (Exceeds")
        for line in lines
    )
    assert f"{huge}: refused: 16.0 MB, more than the 16 MB a click file may be" in lines
    assert any(
        line.startswith(f"{foreign}: refused: clicks of collection 'ffffffffff'") for line in lines
    )
    refusals = {
        line.split(": ", 1)[1].split(" (e.g.")[0]: line
        for line in lines
        if line.startswith("refused ")
    }
    assert refusals.keys() == {
        "coordinates that are not whole numbers (NaN, text, fractions)",
        "coordinates off the case's grid",
        "another case's or target's ids than its task's",
        "a task this collection does not have",
        "a click of another collection",
        "a label other than 1 (positive) or 0 (negative)",
        "a time to the click that is not finite and >= 0",
        "not a click (a JSON object)",
    }
    assert lines.count(next(x for x in lines if "not whole numbers" in x)) == 1
    assert next(x for x in lines if "not whole numbers" in x).startswith("refused 3 click(s)")
    assert next(x for x in lines if "off the case's grid" in x).startswith("refused 2 click(s)")
    assert next(x for x in lines if "ids than its task's" in x).startswith("refused 2 click(s)")
    assert "alice.json: click 11 (task-999)" in refusals["a task this collection does not have"]
    assert (
        "3 clicks of 1 rater on 3 of 12 tasks; 3 of 11 regions (a target at a step) have clicks"
        in captured.out
    )
    table = pd.read_csv(to, dtype={"case": str, "target": str})
    assert len(table) == len(good) == 3
    for click, (_, row) in zip(good, table.iterrows()):
        assert (row["task"], row["z"], row["y"], row["x"], row["step"], row["label"]) == (
            click["task"],
            click["z"],
            click["y"],
            click["x"],
            0,
            1,
        )
        assert (row["rater"], row["seconds"], row["window_width"]) == ("alice", 2.5, 400.0)
        assert (row["dataset"], row["case"]) == ("demo-phantoms", click["case"])
    # a second import adds a rater and keeps the first one's clicks; a newer click replaces
    bob = [click_record(t, built.collection, (1, 2, 3), rater="bob") for t in tasks[:2]]
    moved = {**good[0], "y": good[0]["y"] + 1, "clicked_at": "2026-12-02T05:00:00.000Z"}
    second = click_file(tmp_path / "bob.json", built.collection, [*bob, moved])
    assert (
        main(["clicks", "collect", "import", str(second), "--tasks", str(out), "--to", str(to)])
        == 0
    )
    assert "(2 kept from an earlier import into" in capsys.readouterr().out
    merged = pd.read_csv(to)
    assert len(merged) == 5 and merged["rater"].value_counts().to_dict() == {"alice": 3, "bob": 2}
    assert merged.loc[
        (merged["rater"] == "alice") & (merged["task"] == good[0]["task"]), "y"
    ].tolist() == [good[0]["y"] + 1]


def test_an_import_where_nothing_fits_is_one_line_and_writes_nothing(click_site, tmp_path, capsys):
    built, out = click_site
    garbage = tmp_path / "garbage.json"
    garbage.write_text("[1, 2, 3]")
    to = tmp_path / "people.csv"
    assert (
        main(["clicks", "collect", "import", str(garbage), "--tasks", str(out), "--to", str(to)])
        == 2
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err and not to.exists()
    assert f"{garbage}: refused: not a click file of the click page" in err
    assert f"error: no click of 1 file(s) fits collection {built.collection}" in err
    other = tmp_path / "other.csv"
    other.write_text("dataset,case,target,z,y,x\nd,c,t,1,2,3\n")  # a hand-made file: kept
    manifest, good = _good_clicks(out, built)
    clicks = click_file(tmp_path / "a.json", built.collection, good)
    assert (
        main(["clicks", "collect", "import", str(clicks), "--tasks", str(out), "--to", str(other)])
        == 2
    )
    assert "holds clicks of another collection or a file of its own" in capsys.readouterr().err
    assert other.read_text() == "dataset,case,target,z,y,x\nd,c,t,1,2,3\n"
    assert (
        main(
            ["clicks", "collect", "import", str(clicks), "--tasks", str(tmp_path), "--to", str(to)]
        )
        == 2
    )
    assert "no tasks/manifest.js there" in capsys.readouterr().err


def test_build_refuses_a_run_without_saved_masks_and_bad_counts(click_run, tmp_path, capsys):
    assert (
        main(["clicks", "collect", "build", str(click_run), str(tmp_path / "s"), "--n", "0"]) == 2
    )
    assert "--n: ask for at least 1 click task" in capsys.readouterr().err
    assert (
        main(
            [
                "clicks",
                "collect",
                "build",
                str(click_run),
                str(tmp_path / "s"),
                "--n",
                "4",
                "--first",
                "5",
            ]
        )
        == 2
    )
    assert "--first: give 0 to --n (4) first-click tasks, not 5" in capsys.readouterr().err
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner

    bare = tmp_path / "bare"  # a run that saved no masks
    spec = {
        "name": "bare",
        "datasets": [{**DATASET, "n_cases": 1}],
        "models": ["region-growing-3d"],
        "prompters": ["center-points-per-volume"],
    }
    Runner(RunConfig.model_validate(spec), bare).run()
    assert main(["clicks", "collect", "build", str(bare), str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert f"error: {bare} saved no predictions to make click tasks from" in err
    assert "Traceback" not in err and not (tmp_path / "s").exists()


def test_robustness_runs_on_the_imported_clicks_of_people(click_site, tmp_path, capsys):
    import yaml

    built, out = click_site
    manifest, good = _good_clicks(out, built)
    to = tmp_path / "people.csv"
    clicks = click_file(tmp_path / "alice.json", built.collection, good)
    assert (
        main(["clicks", "collect", "import", str(clicks), "--tasks", str(out), "--to", str(to)])
        == 0
    )
    clicked = {(c["case"], c["target"]) for c in good}
    spec = {
        "name": "people",
        "datasets": [DATASET],
        "models": ["region-growing-3d"],
        "prompters": [{"name": "points-per-volume", "label": "click"}],
        "refiners": ["center-error-click"],
        "robustness": {
            "clickability": {"name": "recorded", "clicks_file": str(to)},
            "groups": 2,
            "rounds": 2,
            "baseline": False,
        },
    }
    config = tmp_path / "people.yaml"
    config.write_text(yaml.safe_dump(spec))
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) in (0, 1)
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    called = rows[~rows["converged"]]
    first = called[called["step"] == 0]
    people = first[[(c, t) in clicked for c, t in zip(first["case"], first["target"])]]
    assert len(people) == 2 * len(clicked)  # both groups of each clicked target
    assert (people["click_map_fallbacks"] == 0).all() and (people["click_map_regions"] >= 1).all()
    others = called.drop(people.index)
    assert (others["click_map_fallbacks"] == others["click_map_regions"]).all()


def test_the_recorded_map_reads_raters_and_seconds_and_refuses_unusable_rows(tmp_path):
    from intrabench.clicks.base import ClickRegion
    from intrabench.errors import ConfigError

    mask = np.zeros((12, 12, 12), dtype=bool)
    mask[2:10, 2:10, 2:10] = True
    region = ClickRegion(mask, (1, 1, 1), identity=("d", "c", "1"), step=0)

    def peak(text: str, **params) -> tuple:
        path = tmp_path / "clicks.csv"
        path.write_text(text)
        model = registry.clickability.create(
            "recorded", {"clicks_file": str(path), "click_sigma_mm": 1.0, **params}
        )
        return tuple(int(v) for v in np.unravel_index(np.argmax(model.weights(region)), mask.shape))

    header = "dataset,case,target,z,y,x,step,label,rater,seconds\n"
    people = (
        header + "d,c,1,3,3,3,0,1,alice,2.5\nd,c,1,8,8,8,0,1,bob,1.0\nd,c,1,8,8,7,0,1,bob,1.5\n"
    )
    assert peak(people) == (8, 8, 7)  # bob's two clicks outweigh alice's one
    assert peak(people, raters=["alice"]) == (3, 3, 3)
    assert peak("dataset,case,target,z,y,x\nd,c,1,4,5,6\n") == (4, 5, 6)  # an old file
    for text, message in (
        (header + "d,c,1,,3,3,0,1,alice,2.5\n", "line 2: z is 'nan', not a whole number"),
        (header + "d,c,1,3,3.5,3,0,1,alice,2.5\n", "line 2: y is '3.5', not a whole number"),
        (header + "d,c,1,3,3,x,0,1,alice,2.5\n", "line 2: x is 'x', not a whole number"),
        (header + "d,c,1,3,3,3,-1,1,alice,2.5\n", "line 2: step is '-1', not a whole number >= 0"),
        (header + "d,c,1,3,3,3,0,1,alice,inf\n", "line 2: seconds is 'inf', not a number >= 0"),
    ):
        with pytest.raises(ConfigError, match=message):
            peak(text)
    with pytest.raises(ConfigError, match=r"no clicks of rater\(s\) \['carol'\]"):
        peak(people, raters=["carol"])
    with pytest.raises(ConfigError, match="no rater column, so raters cannot choose clicks"):
        peak("dataset,case,target,z,y,x\nd,c,1,4,5,6\n", raters=["alice"])
