"""Replaying a person's session: the ``recorded`` prompter and refiner, and the replay of a
session library on models (a scripted session on the demo's real brain case)."""

from __future__ import annotations

import numpy as np
import pytest

from intrabench import registry
from intrabench.errors import DataError, UserError
from intrabench.interfaces import PromptContext, RefineContext
from intrabench.people import versus
from intrabench.people.replay import SessionLibrary, replay_library, replay_plan
from intrabench.people.session_log import interaction_prompt
from tests.people.scripted import script_session


@pytest.fixture(scope="module")
def brain(tmp_path_factory):
    """brain1 of the demo (two lesions), a session by 'ann' on lesion_1 only, made live with
    region-growing-3d: a 3D box, two clicks, the second undone and clicked again."""
    case = registry.datasets.create("demo-real", {}).load("brain1")
    model = registry.models.create("region-growing-3d", {})
    model.set_case(case.image)
    folder = tmp_path_factory.mktemp("sessions")
    script_session(folder, case, case.targets[0], model, "region-growing-3d", "ann")
    return case, model, folder


def test_the_prompter_gives_the_sessions_first_interaction_exactly(brain):
    case, _, folder = brain
    session = SessionLibrary.read([folder]).sessions[0]
    prompter = registry.prompters.create("recorded", {"sessions": str(folder)})
    reference = case.target_mask(case.targets[0])
    context = PromptContext(
        ground_truth=reference,
        spacing=case.image.spacing,
        rng=np.random.default_rng(0),
        identity=("demo-real", "brain1", "lesion_1"),
    )
    prompt = prompter.initial(context)
    assert prompt.to_json() == session.prompts()[0].to_json()
    assert prompt.box3d is not None and prompt.effort == 3
    refiner = registry.refiners.create("recorded", {"sessions": str(folder), "k": 1})
    step = RefineContext(
        ground_truth=reference,
        prediction=session.masks()[0],
        spacing=case.image.spacing,
        rng=np.random.default_rng(0),
        step=1,
        model_dimension=3,
        identity=context.identity,
    )
    first = refiner.refine(step)
    assert first.to_json() == session.prompts()[1].to_json() and first.effort == 1
    step.step = 2
    assert refiner.refine(step) is None  # k = 1: the second correction is not replayed


def test_a_target_without_a_session_is_refused_in_one_line(brain):
    case, _, folder = brain
    prompter = registry.prompters.create("recorded", {"sessions": str(folder)})
    context = PromptContext(
        ground_truth=case.target_mask(case.targets[1]),
        spacing=case.image.spacing,
        rng=np.random.default_rng(0),
        identity=("demo-real", "brain1", "lesion_2"),
    )
    with pytest.raises(UserError, match="no recorded session for demo-real/brain1/lesion_2"):
        prompter.initial(context)


def test_replaying_on_the_live_model_gives_the_persons_dice_and_skips_targets_without_one(brain):
    case, model, folder = brain
    library = SessionLibrary.read([folder])
    result = replay_library(library, {("demo-real", "brain1"): case}, {"rg": model})
    assert result.skipped_targets == 1  # lesion_2 has no session
    rows = result.rows
    assert rows["step"].tolist() == [0, 1, 2]
    assert rows["effort"].tolist() == [3, 4, 5]  # a 3D box, then two clicks (the undone one gone)
    assert set(rows["replayed"]) == {"initial + 2 of 2 corrections"}
    assert rows["kind"].tolist() == ["box3d", "point", "point"]
    reference = {("demo-real", "brain1", "lesion_1"): case.target_mask(case.targets[0])}
    people = versus.people_steps(library, reference)
    assert rows["dice"].tolist() == pytest.approx(people["dice"].tolist(), abs=1e-12)


def test_k_limits_the_corrections_and_the_rows_say_so(brain):
    case, model, folder = brain
    library = SessionLibrary.read([folder])
    rows = replay_library(library, {("demo-real", "brain1"): case}, {"rg": model}, k=1).rows
    assert rows["step"].tolist() == [0, 1]
    assert set(rows["replayed"]) == {"initial + 1 of 2 corrections; k=1"}


def test_what_a_box_only_model_replays():
    box = interaction_prompt({"kind": "box3d", "geometry": {"zyx0": [0, 0, 0], "zyx1": [1, 2, 2]}})
    click = interaction_prompt({"kind": "point", "geometry": {"zyx": [0, 1, 1], "positive": True}})
    boxes = frozenset({"box2d", "box3d"})
    plan = replay_plan([box, click, click], boxes, "litemedsam")
    assert plan.text == (
        "initial + 0 of 2 corrections; stopped at correction 1: litemedsam does not take point"
    )
    assert replay_plan([click], boxes, "litemedsam").text == (
        "nothing; litemedsam does not take point"
    )
    # a scribble reaches a point model as points, as in a run
    scribble = interaction_prompt(
        {"kind": "scribble", "geometry": {"slice": 0, "points": [[0, 0], [0, 2]], "positive": True}}
    )
    assert replay_plan([click, scribble], frozenset({"point"}), "m").corrections == 1


def test_a_session_without_interactions_is_not_used_and_said(brain, tmp_path):
    _, _, folder = brain
    header = next(folder.glob("*.jsonl")).read_text().splitlines()[0]
    (tmp_path / "empty.jsonl").write_text(header + "\n")
    library = SessionLibrary.read([tmp_path])
    assert library.sessions == []
    assert library.problems == [
        f"{tmp_path / 'empty.jsonl'}: no interaction left once undos are applied; not used"
    ]
    (tmp_path / "no-logs").mkdir()
    with pytest.raises(UserError, match="no session logs"):
        SessionLibrary.read([tmp_path / "no-logs"])
    with pytest.raises(UserError, match="no such session log or folder"):
        SessionLibrary.read([tmp_path / "missing"])


def test_replaying_a_session_on_another_cases_grid_is_refused(brain, tmp_path):
    case, model, folder = brain
    library = SessionLibrary.read([folder])
    other = registry.datasets.create("demo-real", {}).load("lung1")
    with pytest.raises(DataError, match=r"grid \[25, 140, 130\] is not case lung1's"):
        replay_library(library, {("demo-real", "brain1"): other}, {"rg": model})


def _copy_with_header(folder, tmp_path, **changes):
    import json

    source = next(folder.glob("*.jsonl"))
    lines = source.read_text().splitlines()
    header = {**json.loads(lines[0]), **changes}
    (tmp_path / "copy.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return SessionLibrary.read([tmp_path / "copy.jsonl"])


def test_a_session_of_a_case_or_dataset_the_run_lacks_is_one_line(brain, tmp_path):
    from intrabench.people.cases import session_cases

    _, _, folder = brain
    library = _copy_with_header(folder, tmp_path, case_id="brain9")
    with pytest.raises(UserError, match="demo-real has no case 'brain9'"):
        session_cases(library)
    library = _copy_with_header(folder, tmp_path, dataset="no-such-data")
    with pytest.raises(UserError, match="dataset 'no-such-data' is not registered"):
        session_cases(library)
