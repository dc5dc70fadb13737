"""nnInteractive (issue #18): the package's own inference session behind the Model interface,
checked against that session driven directly, on a tiny random model folder built here."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

pytest.importorskip("nnInteractive.inference.inference_session")

from intrabench.io.volume import from_canonical, native_index  # noqa: E402
from intrabench.models.volumetric.nninteractive import (  # noqa: E402
    NnInteractive,
    safe_checkpoint_loading,
    write_tiny_model_folder,
)
from intrabench.types import Box2D, Box3D, Lasso, Prompt, Scribble  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_tiny_model_folder(tmp_path_factory.mktemp("nninteractive") / "model", seed=1)


@pytest.fixture(scope="module")
def model(folder):
    return NnInteractive(model_dir=str(folder), device="cpu", seed=0)


def _upstream_session(folder):
    import torch
    from nnInteractive.inference.inference_session import nnInteractiveInferenceSession

    with contextlib.redirect_stdout(None):
        session = nnInteractiveInferenceSession(
            device=torch.device("cpu"),
            use_torch_compile=False,
            verbose=False,
            torch_n_threads=torch.get_num_threads(),
            do_autozoom=True,
            interactions_storage="tensor",
            enable_undo=False,
        )
        with safe_checkpoint_loading():
            session.initialize_from_trained_model_folder(str(folder))
    return session


def _live_session_clicks(folder, case, clicks):
    """The package's README usage (raw image in SimpleITK's array order, set_image, a target
    buffer, add_point_interaction per click, numpy's generator seeded before each as the
    adapter seeds it): the target buffer after each click, in the file's voxel order."""
    session = _upstream_session(folder)
    native = from_canonical(case.image.array, case.image.geometry)
    target = np.zeros(native.shape, np.uint8)
    after = []
    state = np.random.get_state()
    with contextlib.redirect_stdout(None):
        session.set_image(native[None].astype(np.float32))
        session.set_target_buffer(target)
        for point, positive in clicks:
            np.random.seed(0)
            voxel = native_index(np.asarray(point)[None], case.image.geometry)[0]
            session.add_point_interaction(
                tuple(int(v) for v in voxel), include_interaction=positive
            )
            after.append(target.copy())
    np.random.set_state(state)
    return after


def _centre(case):
    mask = case.target_mask(case.targets[0])
    return np.round(np.argwhere(mask).mean(axis=0)).astype(int), mask


def test_a_click_gives_what_the_session_gives_driven_directly(model, folder, oblique_case):
    """The package's README usage (raw image in SimpleITK's array order, set_image, a target
    buffer, add_point_interaction) on the same weights: the same mask, voxel for voxel."""
    click, _ = _centre(oblique_case)
    model.set_case(oblique_case.image)
    ours = model.predict(Prompt(points=click[None], point_labels=np.array([1])))
    (target,) = _live_session_clicks(folder, oblique_case, [(click, True)])
    expected = from_canonical(ours.mask.astype(np.uint8), oblique_case.image.geometry)
    assert target.sum() > 0
    np.testing.assert_array_equal(expected, target)


def test_a_refinement_step_equals_adding_the_click_to_the_live_session(model, folder, oblique_case):
    """Replaying (previous mask + both clicks) gives the mask the live session gives when
    the clinician adds the second click to it, voxel for voxel. The session's refinement
    planning draws from numpy's global generator; the adapter seeds it at every step, so the
    live session is seeded the same way before each click."""
    click, mask = _centre(oblique_case)
    model.set_case(oblique_case.image)
    first = Prompt(points=click[None], point_labels=np.array([1]))
    step0 = model.predict(first)
    far = np.argwhere(
        ~mask & (oblique_case.image.array > np.percentile(oblique_case.image.array, 60))
    )[0]
    both = first.merged_with(Prompt(points=far[None], point_labels=np.array([0])))
    step1 = model.predict(both, previous=step0)
    after_first, target = _live_session_clicks(folder, oblique_case, [(click, True), (far, False)])
    assert np.array_equal(
        after_first, from_canonical(step0.mask.astype(np.uint8), oblique_case.image.geometry)
    )
    ours = from_canonical(step1.mask.astype(np.uint8), oblique_case.image.geometry)
    assert not np.array_equal(step0.mask, step1.mask)  # the second click changed something
    np.testing.assert_array_equal(ours, target)


def test_prompts_become_the_sessions_interactions_in_the_files_voxel_order(model, oblique_case):
    """Clicks, a 2D box, a 3D box (as the 2D box on its middle slice: the published weights
    refuse 3D boxes) and a two-slice scribble (split per slice), on a file whose voxel axes are
    not canonical (rotated 75 degrees about x)."""
    geometry = oblique_case.image.geometry
    model.set_case(oblique_case.image)
    prompt = Prompt(
        points=np.array([[10, 12, 20], [11, 5, 5]]),
        point_labels=np.array([1, 0]),
        boxes={9: Box2D(8, 10, 14, 25)},
        box3d=Box3D(4, 6, 8, 12, 16, 30),
        scribbles=(Scribble(np.array([[5, 9, 9], [5, 9, 10], [6, 10, 10]]), 1),),
    )
    calls, box3d_as = model.interactions(prompt)
    assert [(kind, positive) for kind, _, positive in calls] == [
        ("point", True),
        ("point", False),
        ("bbox", True),
        ("bbox", True),
        ("scribble", True),
        ("scribble", True),
    ]
    expected_points = native_index(np.array([[10, 12, 20], [11, 5, 5]]), geometry)
    assert [list(calls[0][1]), list(calls[1][1])] == expected_points.tolist()
    corners = native_index(np.array([[9, 8, 10], [9, 14, 25]]), geometry)
    assert calls[2][1] == [
        [int(lo), int(hi) + 1] for lo, hi in zip(corners.min(axis=0), corners.max(axis=0))
    ]
    assert sorted(hi - lo for lo, hi in calls[2][1])[0] == 1  # one slice thick
    assert box3d_as == "2D box on slice 8"
    middle = native_index(np.array([[8, 6, 8], [8, 16, 30]]), geometry)
    assert calls[3][1] == [
        [int(lo), int(hi) + 1] for lo, hi in zip(middle.min(axis=0), middle.max(axis=0))
    ]
    first_slice = np.argwhere(calls[4][1])
    assert first_slice.tolist() == sorted(
        native_index(np.array([[5, 9, 9], [5, 9, 10]]), geometry).tolist()
    )
    assert calls[5][1].sum() == 1


def test_a_lasso_gives_what_the_session_gives_driven_directly(model, folder, oblique_case):
    """A lasso around the target on its median slice: the adapter's mask equals the live
    session given the filled contour (in the file's voxel order) with add_lasso_interaction,
    voxel for voxel; the lasso volume holds exactly the filled contour on that one slice."""
    from intrabench.interfaces import PromptContext
    from intrabench.registry import prompters

    mask = oblique_case.target_mask(oblique_case.targets[0])
    prompt = prompters.get("lasso")().initial(
        PromptContext(mask, oblique_case.image.spacing, np.random.default_rng(0))
    )
    (lasso,) = prompt.lassos
    model.set_case(oblique_case.image)
    ((kind, image, positive),) = model.interactions(prompt)[0]
    canonical = np.zeros(mask.shape, bool)
    canonical[lasso.z] = lasso.region(mask.shape[1:])
    assert (kind, positive) == ("lasso", True)
    np.testing.assert_array_equal(
        image, from_canonical(canonical.astype(np.uint8), oblique_case.image.geometry)
    )
    assert canonical[lasso.z][mask[lasso.z]].all()  # the loop encloses the cross-section
    ours = model.predict(prompt)

    session = _upstream_session(folder)
    native = from_canonical(oblique_case.image.array, oblique_case.image.geometry)
    target = np.zeros(native.shape, np.uint8)
    state = np.random.get_state()
    with contextlib.redirect_stdout(None):
        session.set_image(native[None].astype(np.float32))
        session.set_target_buffer(target)
        np.random.seed(0)
        session.add_lasso_interaction(image, include_interaction=True)
    np.random.set_state(state)
    assert target.sum() > 0
    np.testing.assert_array_equal(
        from_canonical(ours.mask.astype(np.uint8), oblique_case.image.geometry), target
    )


def test_weights_without_lasso_refuse_it_in_one_line(folder, tmp_path, oblique_case):
    import json
    import shutil

    copy = tmp_path / "no-lasso"
    shutil.copytree(folder, copy)
    # the modern capability file: the legacy one's defaults, lassos switched off
    legacy = json.loads((copy / "inference_session_class.json").read_text())
    (copy / "inference_info.json").write_text(
        json.dumps({**legacy, "supported_interactions": {"lasso": False}})
    )
    model = NnInteractive(model_dir=str(copy), device="cpu", seed=0)
    model.set_case(oblique_case.image)
    lasso = Lasso(5, np.array([[4, 4], [4, 12], [12, 12], [12, 4]]), 1)
    with pytest.raises(ValueError, match="do not take lasso prompts"):
        model.predict(Prompt(lassos=(lasso,)))


def test_the_same_step_gives_the_same_mask(model, oblique_case):
    click, _ = _centre(oblique_case)
    model.set_case(oblique_case.image)
    prompt = Prompt(
        boxes={int(click[0]): Box2D(click[1] - 4, click[2] - 4, click[1] + 4, click[2] + 4)}
    )
    first, second = model.predict(prompt), model.predict(prompt)
    np.testing.assert_array_equal(first.mask, second.mask)


def test_checkpoints_load_weights_only(folder, tmp_path):
    """A checkpoint that needs anything beyond tensors, containers, primitives and numpy
    scalars is refused (the package itself would unpickle it with weights_only=False)."""
    import argparse
    import shutil

    import torch

    from intrabench.io.checkpoints import CheckpointError

    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    checkpoint = bad / "fold_0" / "checkpoint_final.pth"
    content = torch.load(checkpoint, weights_only=False)
    content["init_args"]["args"] = argparse.Namespace(evil=True)
    torch.save(content, checkpoint)
    with pytest.raises(CheckpointError, match="checkpoint_final.pth"):
        NnInteractive.check_checkpoint(checkpoint, "nninteractive")
    NnInteractive.check_checkpoint(folder / "fold_0" / "checkpoint_final.pth", "nninteractive")


def test_models_verify_and_list_see_the_model_folder(folder, tmp_path, capsys, monkeypatch):
    import dataclasses
    import shutil

    from intrabench.cli import main
    from intrabench.io.checkpoints import CHECKPOINTS, sha256_file

    directory = tmp_path / "checkpoints"
    shutil.copytree(folder, directory / "nnInteractive_v1.0")
    weights = directory / "nnInteractive_v1.0/fold_0/checkpoint_final.pth"
    # the card pins the published file; this test's folder holds another, pinned here instead
    monkeypatch.setitem(
        CHECKPOINTS,
        "nninteractive",
        dataclasses.replace(
            CHECKPOINTS["nninteractive"], size=weights.stat().st_size, sha256=sha256_file(weights)
        ),
    )
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    assert main(["models", "verify", "nninteractive", "--checkpoint-dir", str(directory)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("nninteractive"))
    assert "missing" not in line and "UNUSABLE" not in line
    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(directory))
    assert NnInteractive.availability() == "ready"
    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(tmp_path / "empty"))
    assert NnInteractive.availability() == "checkpoint missing: nnInteractive_v1.0/"
    assert main(["models", "list"]) == 0
    assert "CC BY-NC-SA 4.0" in capsys.readouterr().out


def test_a_run_with_boxes_and_refinement(folder, tmp_path):
    import pandas as pd

    from tests.run_helpers import run_config

    run = run_config(
        tmp_path,
        "name: nni\ndatasets: [{name: demo-phantoms, n_cases: 1}]\n"
        f"models: [{{name: nninteractive, model_dir: '{folder}', device: cpu}}]\n"
        "prompters: [box-3d, {name: points-per-volume, n_points: 1}, lasso]\n"
        "refiners: [center-error-click]\nrefinement_steps: 1\n",
    )
    rows = pd.read_csv(run / "results.csv")
    assert set(rows["step"]) == {0, 1} and rows["dice"].between(0, 1).all()
    assert set(rows["in_training_data"]) == {"no"}  # phantoms are made here
    lasso = rows[rows["prompter"].str.startswith("lasso") & (rows["step"] == 0)]
    assert len(lasso) and (lasso["interactions_lasso"] == 1).all()
    assert (lasso["prompt_n_lassos"] == 1).all() and (lasso["effort"] == 3).all()


# --------------------------------------------------------------------------------------
# The user's order: the session decays older interactions, so the replay keeps the order
# --------------------------------------------------------------------------------------


def _live_session_in_order(folder, case, calls):
    """The live session given ``calls`` ((kind, native argument, positive)) one by one, as a
    clinician adds them, each running the prediction (numpy's generator seeded before each,
    as the adapter seeds it): the target buffer after the last."""
    session = _upstream_session(folder)
    native = from_canonical(case.image.array, case.image.geometry)
    target = np.zeros(native.shape, np.uint8)
    add = {
        "point": session.add_point_interaction,
        "bbox": session.add_bbox_interaction,
        "lasso": session.add_lasso_interaction,
        "scribble": session.add_scribble_interaction,
    }
    state = np.random.get_state()
    with contextlib.redirect_stdout(None):
        session.set_image(native[None].astype(np.float32))
        session.set_target_buffer(target)
        for kind, argument, positive in calls:
            np.random.seed(0)
            add[kind](argument, include_interaction=positive)
    np.random.set_state(state)
    return target


def _steps(model, case, prompts):
    """The adapter over the steps (each step's prompt added to the earlier ones); its final
    mask in the file's voxel order, and the native call of each element alone."""
    model.set_case(case.image)
    accumulated, previous, singles = None, None, []
    for prompt in prompts:
        singles += model.interactions(prompt)[0]
        accumulated = prompt if accumulated is None else accumulated.merged_with(prompt)
        previous = model.predict(accumulated, previous=previous)
    return from_canonical(previous.mask.astype(np.uint8), case.image.geometry), singles, accumulated


def _box_and_click(case):
    click, mask = _centre(case)
    zs, ys, xs = np.nonzero(mask)
    z = int(click[0])
    on = np.nonzero(mask[z])
    box = Box2D(int(on[0].min()), int(on[1].min()), int(on[0].max()), int(on[1].max()))
    outside = np.argwhere(~mask & (case.image.array > np.percentile(case.image.array, 60)))[0]
    cube = Box3D(
        int(zs.min()), int(ys.min()), int(xs.min()), int(zs.max()), int(ys.max()), int(xs.max())
    )
    return z, box, cube, click, outside


@pytest.mark.parametrize(
    "sequence", ["box then click", "point, lasso, negative point", "3D box then correction click"]
)
def test_replay_keeps_the_user_order_against_the_live_session(
    model, folder, oblique_case, sequence
):
    from intrabench.types import Lasso

    z, box, cube, click, outside = _box_and_click(oblique_case)
    if sequence == "box then click":
        prompts = [Prompt(boxes={z: box}), Prompt(points=outside[None], point_labels=[0])]
    elif sequence == "point, lasso, negative point":
        contour = np.array(
            [
                [box.y_min, box.x_min],
                [box.y_min, box.x_max],
                [box.y_max, box.x_max],
                [box.y_max, box.x_min],
            ]
        )
        prompts = [
            Prompt(points=click[None], point_labels=[1]),
            Prompt(lassos=(Lasso(z, contour, 1),)),
            Prompt(points=outside[None], point_labels=[0]),
        ]
        if not model.session.supported_interactions.get("lasso", False):
            pytest.skip("these weights take no lasso")
    else:
        prompts = [Prompt(box3d=cube), Prompt(points=outside[None], point_labels=[0])]
    ours, singles, accumulated = _steps(model, oblique_case, prompts)
    # the merged prompt lists its elements in the user's order, whatever their kinds
    assert [kind for kind, _ in accumulated.elements()] == [
        kind for prompt in prompts for kind, _ in prompt.elements()
    ]
    expected = _live_session_in_order(folder, oblique_case, singles)
    assert int((ours != expected).sum()) == 0
    # grouping the kinds (points first), as the adapter did before, is another result
    grouped = sorted(singles, key=lambda call: call[0] != "point")
    if [c[0] for c in grouped] != [c[0] for c in singles]:
        regrouped = _live_session_in_order(folder, oblique_case, grouped)
        assert int((regrouped != expected).sum()) > 0


def test_user_order_survives_merges_and_json():
    """Box on slice 3, click, scribble, then a new box on slice 3 (it replaces the first, which
    leaves its place) and a lasso: the order is the user's; the JSON round trip keeps it."""
    from intrabench.types import Lasso

    first = Prompt(boxes={3: Box2D(1, 1, 4, 4)})
    second = Prompt(
        points=[[3, 2, 2]],
        point_labels=[1],
        scribbles=(Scribble(np.array([[3, 1, 1], [3, 1, 2]]), 0),),
    )
    third = Prompt(
        boxes={3: Box2D(0, 0, 5, 5)}, lassos=(Lasso(2, np.array([[0, 0], [0, 3], [3, 3]]), 1),)
    )
    merged = first.merged_with(second).merged_with(third)
    assert merged.element_order() == (("point", 0), ("scribble", 0), ("box2d", 3), ("lasso", 0))
    assert merged.boxes[3] == Box2D(0, 0, 5, 5)
    again = Prompt.from_json(merged.to_json())
    assert again.element_order() == merged.element_order()
    assert Prompt.from_json(first.to_json()).order == ()  # the default order is not written
    with pytest.raises(ValueError, match="does not list each element once"):
        Prompt(points=[[0, 0, 0]], point_labels=[1], order=(("point", 0), ("point", 0)))


@pytest.fixture(scope="module")
def nninteractive_server(folder):
    """nnInteractive's own server (``nninteractive-server``) on the tiny folder, on the CPU,
    at a free loopback port; its URL."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nnInteractive.inference.server.main",
            "--model-dir",
            str(folder),
            "--fold",
            "0",
            "--device",
            "cpu",
            "--no-torch-compile",
            "--port",
            str(port),
            "--interactions-storage",
            "tensor",
            "--no-undo",
            "--torch-n-threads",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    try:
        for line in server.stderr:
            if "Uvicorn running" in line:
                break
            assert time.monotonic() < deadline, "nnInteractive's server did not start"
        else:
            pytest.fail("nnInteractive's server exited before serving")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()


def test_the_model_through_nninteractives_own_client_and_server_equals_it_in_process(
    model, nninteractive_server, oblique_case
):
    """``server: URL``: the session is nnInteractive's remote client on its own server, with
    the same weights: a click, a 3D box and a refinement give the in-process masks."""
    remote = NnInteractive(server=nninteractive_server, seed=0)
    assert NnInteractive.forward_frees_cpu({"server": nninteractive_server})
    click, mask = _centre(oblique_case)
    far = np.argwhere(
        ~mask & (oblique_case.image.array > np.percentile(oblique_case.image.array, 60))
    )[0]
    first = Prompt(points=click[None], point_labels=np.array([1]))
    box = Prompt(box3d=Box3D(*np.argwhere(mask).min(axis=0), *np.argwhere(mask).max(axis=0)))
    for adapter in (model, remote):
        adapter.set_case(oblique_case.image)
    local_steps = [model.predict(first), model.predict(box)]
    remote_steps = [remote.predict(first), remote.predict(box)]
    both = first.merged_with(Prompt(points=far[None], point_labels=np.array([0])))
    local_steps.append(model.predict(both, previous=local_steps[0]))
    remote_steps.append(remote.predict(both, previous=remote_steps[0]))
    for local, served in zip(local_steps, remote_steps):
        assert local.mask.sum() > 0
        np.testing.assert_array_equal(served.mask, local.mask)


def test_a_server_url_that_answers_nothing_is_one_line():
    from intrabench.io.checkpoints import CheckpointError

    with pytest.raises(CheckpointError, match="no nnInteractive server at http://127.0.0.1:1"):
        NnInteractive(server="http://127.0.0.1:1", server_timeout_s=2)
