"""SegVol adapter behaviour with a tiny random-weight model on real and oblique volumes.

The tiny configuration works on a (32, 160, 160) window (the full model: (32, 256, 256)), so
one window covers each demo volume; the multi-window path is tested on a tiled volume.
"""

from __future__ import annotations

import numpy as np
import pytest

from intrabench.engine.episode import run_episode
from intrabench.io.volume import Volume, from_canonical
from intrabench.models.volumetric.segvol import SegVol, foreground_normalise
from intrabench.types import Box3D, Case, Prediction, Prompt, interactions

from .conftest import FixedPrompter, tiny_model


def _points(case: Case, count: int = 2) -> np.ndarray:
    voxels = np.argwhere(case.target_mask(case.targets[0]))
    return voxels[np.linspace(0, len(voxels) - 1, count).astype(int)]


def _box(case: Case) -> Box3D:
    voxels = np.argwhere(case.target_mask(case.targets[0]))
    return Box3D(*(int(v) for v in voxels.min(0)), *(int(v) for v in voxels.max(0)))


def _count_encoder_calls(model: SegVol) -> list[tuple[int, ...]]:
    calls: list[tuple[int, ...]] = []
    model.net.image_encoder.register_forward_hook(
        lambda module, inputs, output: calls.append(tuple(inputs[0].shape[2:]))
    )
    return calls


def test_foreground_normalisation_on_known_values():
    array = np.zeros((4, 10, 10), np.float32)
    array[1:3, 2:8, 2:8] = np.linspace(100, 200, 72).reshape(2, 6, 6)
    out = foreground_normalise(array)
    assert out.min() == 0.0 and out.max() == pytest.approx(1.0)
    assert np.all(out[array == 0] == 0.0)
    # clip to the foreground's 0.05/99.95 percentiles, z-score, min-max: affine after the clip
    low, high = np.percentile(array[array > array.mean()], [0.05, 99.95])
    assert 100 < low < 100.1 and 199.9 < high < 200
    assert np.allclose(out, (np.clip(array, low, high) - low) / (high - low), atol=1e-6)


@pytest.mark.parametrize(
    "case_name", ["brain1", pytest.param("breast1", marks=pytest.mark.slow), "lung1"]
)
def test_points_and_boxes_on_anisotropic_real_volumes(demo_cases, case_name):
    case = demo_cases[case_name]
    model = tiny_model("segvol")
    model.set_case(case.image)
    for prompt in (
        Prompt(points=_points(case, 3), point_labels=[1, 1, 0]),
        Prompt(box3d=_box(case)),
    ):
        prediction = model.predict(prompt)
        assert prediction.mask.shape == case.image.shape and prediction.mask.dtype == bool
        roi = prediction.feedback["roi"]
        assert all(
            s.stop - s.start >= min(w, n) for s, w, n in zip(roi, model.window, model._volume.shape)
        )


def test_oblique_volume(oblique_case):
    model = tiny_model("segvol")
    model.set_case(oblique_case.image)
    assert oblique_case.image.shape == (20, 40, 48)
    prediction = model.predict(Prompt(box3d=_box(oblique_case)))
    assert prediction.mask.shape == (20, 40, 48)
    # the crop is in the file's voxel order, (k, j, i)
    native = from_canonical(prediction.mask, oblique_case.image.geometry)
    assert native[model._crop].shape == model._volume.shape


def test_deterministic_across_calls_and_instances(breast):
    prompt = Prompt(points=_points(breast, 4), point_labels=[1, 1, 0, 1])
    first, second = tiny_model("segvol"), tiny_model("segvol")
    first.set_case(breast.image)
    second.set_case(breast.image)
    a = first.predict(prompt).mask
    assert np.array_equal(a, first.predict(prompt).mask)
    assert np.array_equal(a, second.predict(prompt).mask)


def test_every_point_is_used_with_its_own_label(breast):
    model = tiny_model("segvol")
    model.set_case(breast.image)
    first, second = _points(breast, 2)
    both = model.predict(Prompt(points=[first, second], point_labels=[1, 1])).mask
    negative = model.predict(Prompt(points=[first, second], point_labels=[1, 0])).mask
    alone = model.predict(Prompt(points=[first], point_labels=[1])).mask
    assert not np.array_equal(both, negative)
    assert not np.array_equal(both, alone)


def test_zoom_out_encoding_is_computed_once_per_case(brain, breast):
    model = tiny_model("segvol")
    calls = _count_encoder_calls(model)
    model.set_case(brain.image)
    box_prompt = Prompt(box3d=_box(brain))
    model.predict(box_prompt)
    zoom_out_calls = calls.count(model.window)  # every call is window-sized; count all
    assert zoom_out_calls == len(calls) == model.encoder_calls >= 2  # zoom-out + window(s)
    before = len(calls)
    model.predict(box_prompt)  # same prompt: all cached
    assert len(calls) == before
    model.predict(Prompt(points=_points(brain, 2), point_labels=[1, 1]))
    model.set_case(breast.image)
    model.predict(Prompt(box3d=_box(breast)))
    assert ("zoom-out",) in model._cache._items and len(model._cache) <= 1 + 1  # new case


def test_prediction_ignores_ground_truth_and_previous_mask(brain):
    prompt = Prompt(
        points=_points(brain, 2), point_labels=[1, 1], interactions=interactions("click", 2)
    )
    moved = Case(
        brain.dataset,
        brain.case_id,
        brain.image,
        np.roll(brain.label, shift=(2, -20, 15), axis=(0, 1, 2)),
        brain.targets,
    )
    model = tiny_model("segvol")
    model.set_case(brain.image)
    [plain] = run_episode(brain, brain.targets[0], model, FixedPrompter(prompt), "fixed")
    [shifted] = run_episode(moved, moved.targets[0], model, FixedPrompter(prompt), "fixed")
    assert plain.prediction.feedback["roi"] == shifted.prediction.feedback["roi"]
    assert np.array_equal(plain.prediction.mask, shifted.prediction.mask)
    assert plain.metrics != shifted.metrics
    junk = Prediction(np.ones(brain.image.shape, bool), {"low_res_logits": None})
    assert np.array_equal(plain.prediction.mask, model.predict(prompt, previous=junk).mask)
    assert "mask" not in SegVol.accepts and {"point", "box3d", "scribble"} <= SegVol.accepts


def test_multiple_windows_cover_a_large_roi(breast):
    tiled = np.tile(breast.image.array, (1, 2, 1))  # (21, 240, 45): 2 windows
    image = Volume(tiled, breast.image.spacing, breast.image.geometry)
    model = tiny_model("segvol")
    calls = _count_encoder_calls(model)
    model.set_case(image)
    whole = Box3D(0, 0, 0, *(n - 1 for n in tiled.shape))
    points = np.array([[10, 30, 30], [10, 200, 20]])
    for prompt in (Prompt(box3d=whole), Prompt(points=points, point_labels=[1, 1])):
        before = len(calls)
        prediction = model.predict(prompt)
        assert prediction.mask.shape == tiled.shape
        roi = prediction.feedback["roi"]
        assert [s.stop - s.start for s in roi] == list(model._volume.shape)
        assert len(calls) - before <= 2 + (before == 0)  # zoom-out once per case
    assert calls[0] == model.window and len(calls) >= 3


def test_the_network_sees_the_files_voxel_order(demo_cases):
    """Upstream's Orientationd has no affine to act on, so SegVol was trained and is run on
    the file's (k, j, i) voxel order, not on RAS: the zoom-out input is the file-order volume,
    and prompts given in canonical coordinates land on the same voxels there."""
    import torch

    from intrabench.io.volume import native_index
    from intrabench.models.volumetric._3d_common import resize

    case = demo_cases["brain1"]
    native = from_canonical(case.image.array, case.image.geometry)
    assert native.shape != case.image.array.shape or not np.array_equal(native, case.image.array)
    model = tiny_model("segvol")
    model.set_case(case.image)
    seen = {}
    encode = model._encode

    def spy(key, data):
        seen.setdefault(key, data.clone())
        return encode(key, data)

    model._encode = spy
    points = _points(case, 2)
    local, _, _ = model._local_prompt(Prompt(points=points, point_labels=[1, 1]))
    offset = np.array([s.start for s in model._crop])
    assert np.array_equal(local + offset, native_index(points, case.image.geometry))
    model.predict(Prompt(points=points, point_labels=[1, 1]))
    normalised = foreground_normalise(native)
    nonzero = np.argwhere(normalised > 0)
    crop = normalised[tuple(slice(lo, hi + 1) for lo, hi in zip(nonzero.min(0), nonzero.max(0)))]
    expected = resize(crop, model.window, mode="nearest-exact")
    assert torch.equal(seen[("zoom-out",)][0, 0], torch.from_numpy(expected))
