"""A CVPR 2025 challenge submission as a model: a ``predict.sh`` around a real model gives the
in-process model's rows; the npz it is given holds the challenge's keys as the challenge wrote
them; a submission that fails, writes nothing or the wrong shape fails its units in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.io.geometry import ImageGeometry
from intrabench.io.results import load_results
from intrabench.io.volume import Volume
from intrabench.models.volumetric.cvpr25_submission import (
    Cvpr25Submission,
    SubmissionError,
    challenge_inputs,
)
from intrabench.types import Box3D, Prediction, Prompt, Scribble

from .test_served_models import PHANTOMS, ROOT, comparable

PREDICT = str(Path(__file__).resolve().parent / "predict.sh")
PROMPTERS = ["box-3d", "center-points-per-volume"]


@pytest.fixture()
def submission_env(monkeypatch):
    monkeypatch.setenv("PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def run(tmp: Path, name: str, models: list) -> tuple[pd.DataFrame, Runner]:
    config = RunConfig.model_validate(
        {"name": "cvpr25", "datasets": [PHANTOMS], "models": models, "prompters": PROMPTERS}
    )
    config.validate_components()
    runner = Runner(config, tmp / name)
    runner.run()
    return load_results(tmp / name), runner


@pytest.mark.parametrize("wrapped", ["region-growing-3d", "random-walker-2d"])
def test_a_predict_sh_around_a_real_model_gives_its_in_process_rows(
    tmp_path, monkeypatch, submission_env, wrapped
):
    monkeypatch.setenv("WRAPPED_MODEL", wrapped)
    local, _ = run(tmp_path, "local", [wrapped])
    served, runner = run(
        tmp_path, "served", [{"name": "cvpr25-submission", "command": ["bash", PREDICT]}]
    )
    assert runner.failures == [] and len(served) == len(local) == 2 * 7
    # the same masks, so the same metrics; only the model's name and its effort columns'
    # provenance differ
    columns = ["case", "target", "prompter", "dice", "iou", "nsd", "effort"]
    left = comparable(local)[columns].reset_index(drop=True)
    right = comparable(served)[columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(right, left)
    assert comparable(local)["dice"].mean() > 0.3


def _volume() -> Volume:
    image = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    grid = ImageGeometry(
        size=(6, 5, 4),
        spacing=(0.8, 0.7, 2.5),
        origin=(0, 0, 0),
        direction=(1, 0, 0, 0, 1, 0, 0, 0, 1),
    )
    return Volume(array=image, spacing=(2.5, 0.7, 0.8), geometry=grid)


def test_the_npz_holds_the_challenges_keys_in_its_forms():
    image = _volume()
    prompt = Prompt(
        points=[[1, 2, 3], [2, 1, 1]],
        point_labels=[1, 0],
        box3d=Box3D(0, 1, 2, 3, 4, 5),
        scribbles=(Scribble(np.array([[3, 3, 3], [3, 3, 4]]), 1),),
        order=(("point", 1), ("box3d", 0), ("scribble", 0), ("point", 0)),
    )
    previous = np.zeros(image.shape, dtype=bool)
    previous[1, 2, 2:4] = True
    arrays = challenge_inputs(image, prompt, Prediction(mask=previous))
    assert np.array_equal(arrays["imgs"], image.array) and arrays["imgs"].dtype == np.int16
    assert arrays["spacing"].tolist() == [2.5, 0.7, 0.8]
    assert arrays["boxes"][0] == {
        "z_min": 0,
        "z_max": 3,
        "z_mid": 1,
        "z_mid_x_min": 2,
        "z_mid_y_min": 1,
        "z_mid_x_max": 5,
        "z_mid_y_max": 4,
    }
    assert arrays["clicks"][0] == {"fg": [[1, 2, 3], [3, 3, 3], [3, 3, 4]], "bg": [[2, 1, 1]]}
    # the user's order: the negative click, the box, the scribble's two voxels, the first click
    assert list(arrays["clicks_order"][0]) == ["bg", "fg", "fg", "fg"]
    assert arrays["prev_pred"].dtype == np.uint8 and arrays["prev_pred"].sum() == 2
    first = challenge_inputs(image, Prompt(points=[[0, 0, 0]], point_labels=[1]), None)
    assert "boxes" not in first and first["prev_pred"].sum() == 0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("nothing", "wrote no case.npz into the outputs folder"),
        ("shape", "'segs' is uint8 of shape (32, 95, 96); the image is (32, 96, 96)"),
        ("exit", "exited with code 4: no GPU found"),
    ],
)
def test_a_submission_that_fails_fails_its_units_in_one_line(
    tmp_path, monkeypatch, submission_env, fault, message
):
    monkeypatch.setenv("WRAPPED_MODEL", "region-growing-3d")
    monkeypatch.setenv("FAULT", fault)
    rows, runner = run(
        tmp_path,
        "faulty",
        [{"name": "cvpr25-submission", "command": ["bash", PREDICT], "measure_startup": False}],
    )
    assert len(rows) == 0 and len(runner.failures) == 4  # 2 cases x 2 prompters
    causes = [
        failure.cause.replace("(40, 127, 128)", "(32, 95, 96)").replace(
            "(40, 128, 128)", "(32, 96, 96)"
        )
        for failure in runner.failures
    ]  # the two phantoms
    assert all(message in cause for cause in causes), causes


def test_a_slow_or_missing_command_is_one_line():
    model = Cvpr25Submission(command=["sleep", "5"], timeout_s=0.3, measure_startup=False)
    model.set_case(_volume())
    with pytest.raises(SubmissionError, match="did not finish within 0.3 s"):
        model.predict(Prompt(points=[[0, 0, 0]], point_labels=[1]))
    missing = Cvpr25Submission(command="/nonexistent/predict.sh", measure_startup=False)
    missing.set_case(_volume())
    with pytest.raises(SubmissionError, match="command not found"):
        missing.predict(Prompt(points=[[0, 0, 0]], point_labels=[1]))
    for bad in (
        {"command": []},
        {"command": "x", "timeout_s": 0},
        {"command": "x", "case_name": "../up"},
    ):
        with pytest.raises(ValueError):
            Cvpr25Submission(**bad)


def test_the_start_up_is_measured_once_and_taken_out_of_the_model_time(submission_env):
    model = Cvpr25Submission(
        command=[
            "bash",
            "-c",
            "sleep 0.4; shopt -s nullglob; for f in $INPUTS/*.npz; do "
            f'{sys.executable} -c "import numpy as np, sys; '
            "d = np.load(sys.argv[1], allow_pickle=True); "
            "np.savez(sys.argv[2], segs=(d['imgs'] > 60).astype('u1'))\" "
            "$f $OUTPUTS/$(basename $f); done",
        ]
    )
    model.prepare()
    assert 0.4 <= model.startup_seconds < 5
    model.set_case(_volume())
    model.reset_timer()
    prediction = model.predict(Prompt(points=[[0, 0, 0]], point_labels=[1]))
    assert prediction.mask.sum() == int((_volume().array > 60).sum())
    assert 0 <= model.model_seconds() < 5  # the step's wall time less the start-up
