"""The four 2D adapters end to end with tiny random-weight networks on the real demo volumes.

Random weights make the masks meaningless, so the tests check what the adapter itself is
responsible for: the same numbers as the original packages' predictors on the same network,
the intensity pipeline (per volume vs per slice), the thresholds and upsampling chains, the
feedback of logits, write-back into the volume, and how often the encoder runs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.interfaces import incompatibility
from intrabench.types import Box2D, Prompt, SlicePrompt

from .conftest import MODEL_NAMES, box_and_center_prompt, tiny_model


def _uint8_volume_window(volume: np.ndarray, z: int) -> np.ndarray:
    """Appendix A.1/A.2 by hand: volume 0.5/99.5 percentile clip, 0..255, rounded."""
    low, high = np.percentile(volume, [0.5, 99.5])
    scaled = (np.clip(volume[z], low, high) - low) / (high - low) * 255.0
    return np.rint(scaled).astype(np.uint8)


def _slice_prompt(z: int, points=(), labels=(), box: Box2D | None = None) -> SlicePrompt:
    return SlicePrompt(
        z=z,
        points=np.asarray(points, dtype=np.int64).reshape(-1, 2),
        labels=np.asarray(labels, dtype=np.int8),
        box=box,
    )


def _disagreement(a: np.ndarray, b: np.ndarray) -> float:
    return float((a != b).mean())


# --------------------------------------------------------------------------------------
# Same numbers as the original predictors
# --------------------------------------------------------------------------------------


def _every_tensor_non_zero(net: torch.nn.Module, seed: int = 0) -> None:
    """Set every parameter and buffer to random non-zero values (norm weights near 1): tables
    that start at zero, like relative positions, would hide a difference in how they are
    used (they hid SAM-Med3D's)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in [*net.named_parameters(), *net.named_buffers()]:
            if not tensor.is_floating_point():
                continue
            noise = torch.randn(tensor.shape, generator=generator) * 0.05
            base = 1.0 if name.endswith("weight") and tensor.ndim == 1 else 0.0
            tensor.copy_((base + noise).to(tensor.dtype))
            assert (tensor != 0).all(), name


def test_sam_matches_segment_anything_predictor(lung) -> None:
    from segment_anything import SamPredictor

    model = tiny_model("sam")
    _every_tensor_non_zero(model.net)
    model.set_case(lung.image)
    z, (height, width) = 6, lung.image.shape[1:]
    rgb = np.repeat(_uint8_volume_window(lung.image.array, z)[..., None], 3, axis=-1)
    predictor = SamPredictor(model.net)
    # the resize: SamPredictor.set_image's PIL path on uint8, to within one grey level
    official = predictor.transform.apply_image(rgb)
    ours_input = model.resized_input([z])
    assert tuple(ours_input.shape[2:]) == official.shape[:2] == (238, 256)
    difference = np.abs(ours_input[0].permute(1, 2, 0).numpy() - official.astype(np.float32))
    assert difference.max() <= 1.0 and (difference > 0).mean() < 0.3
    # the rest of the pipeline on that same input: the predictor's own numbers
    predictor.set_torch_image(ours_input, (height, width))

    # one click: multimask output, best predicted IoU
    click = _slice_prompt(z, [[70, 60]], [1])
    ours = model.predict_slice(click)
    masks, ious, low = predictor.predict(
        point_coords=np.array([[60.0, 70.0]]), point_labels=np.array([1]), multimask_output=True
    )
    best = int(np.argmax(ious))
    assert ours.feedback.shape == low[best].shape == (64, 64)
    np.testing.assert_allclose(ours.feedback, low[best], atol=1e-4)
    assert _disagreement(ours.mask, masks[best]) < 1e-3
    assert ours.mask.shape == (height, width) and ours.mask.dtype == bool

    # click + box + the previous logits: single-mask output, mask input = our feedback
    refine = _slice_prompt(z, [[70, 60], [40, 100]], [1, 0], Box2D(50, 40, 90, 80))
    ours2 = model.predict_slice(refine, feedback=ours.feedback)
    masks2, _, low2 = predictor.predict(
        point_coords=np.array([[60.0, 70.0], [100.0, 40.0]]),
        point_labels=np.array([1, 0]),
        box=np.array([40.0, 50.0, 80.0, 90.0]),
        mask_input=low[best][None],
        multimask_output=False,
    )
    np.testing.assert_allclose(ours2.feedback, low2[0], atol=1e-4)
    assert _disagreement(ours2.mask, masks2[0]) < 1e-3
    assert not np.allclose(ours2.feedback, ours.feedback)


def test_sam2_matches_sam2_image_predictor(lung) -> None:
    from sam2.sam2_image_predictor import SAM2ImagePredictor

    model = tiny_model("sam2")
    _every_tensor_non_zero(model.net)
    model.set_case(lung.image)
    z = 6
    rgb = np.repeat(_uint8_volume_window(lung.image.array, z)[..., None], 3, axis=-1)
    predictor = SAM2ImagePredictor(model.net)
    size = model.net.image_size  # tiny: 256 -> feature maps 64, 32, 16
    predictor._bb_feat_sizes = [
        (size // 4, size // 4),
        (size // 8, size // 8),
        (size // 16, size // 16),
    ]
    predictor.set_image(rgb)

    click = _slice_prompt(z, [[70, 60]], [1])
    ours = model.predict_slice(click)
    masks, ious, low = predictor.predict(
        point_coords=np.array([[60.0, 70.0]]), point_labels=np.array([1]), multimask_output=True
    )
    best = int(np.argmax(ious))
    assert ours.feedback.shape == low[best].shape == (size // 4, size // 4)
    np.testing.assert_allclose(ours.feedback, low[best], atol=1e-4)
    assert _disagreement(ours.mask, masks[best].astype(bool)) < 1e-3

    box_click = _slice_prompt(z, [[70, 60]], [1], Box2D(50, 40, 90, 80))
    ours2 = model.predict_slice(box_click, feedback=ours.feedback)
    masks2, _, low2 = predictor.predict(
        point_coords=np.array([[60.0, 70.0]]),
        point_labels=np.array([1]),
        box=np.array([40.0, 50.0, 80.0, 90.0]),
        mask_input=low[best][None],
        multimask_output=False,
    )
    np.testing.assert_allclose(ours2.feedback, low2[0], atol=1e-4)
    assert _disagreement(ours2.mask, masks2[0].astype(bool)) < 1e-3


# --------------------------------------------------------------------------------------
# Thresholds and upsampling chains, recomputed from the fed-back logits
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_threshold_and_upsampling_follow_the_original(name: str, lung) -> None:
    model = tiny_model(name)
    model.set_case(lung.image)
    height, width = lung.image.shape[1:]
    output = model.predict_slice(_slice_prompt(6, [[70, 60]], [1], Box2D(50, 40, 90, 80)))
    logits = torch.from_numpy(output.feedback)[None, None]
    if name == "sam":  # 1024-frame upsample, crop the padding, upsample; logits > 0
        expected = model.net.postprocess_masks(logits, model._input_shape(), (height, width)) > 0
    elif name == "sam2":  # straight to the slice size; logits > 0
        expected = F.interpolate(logits, (height, width), mode="bilinear") > 0
    elif name == "medsam":  # sigmoid first, then upsample; > 0.5; on the file's stored slice
        view = model.view.shape((height, width))
        stored = F.interpolate(torch.sigmoid(logits), view, mode="bilinear") > 0.5
        expected = torch.from_numpy(
            np.ascontiguousarray(model.view.to_canonical(stored[0, 0].numpy()))
        )[None, None]
    else:  # sam-med2d: to the input size, then the slice size; sigmoid > 0.5
        size = model.net.image_encoder.img_size
        twice = F.interpolate(
            F.interpolate(logits, (size, size), mode="bilinear"), (height, width), mode="bilinear"
        )
        expected = torch.sigmoid(twice) > 0.5
    assert np.array_equal(output.mask, expected[0, 0].numpy())
    low_size = {"sam": 64, "sam2": 64, "medsam": 64, "sam-med2d": 32}[name]
    assert output.feedback.shape == (low_size, low_size)
    assert output.feedback.dtype == np.float32
    # logits, not probabilities: random weights give values outside [0, 1]
    assert output.feedback.min() < 0.0 or output.feedback.max() > 1.0


# --------------------------------------------------------------------------------------
# Intensity handling: per volume (SAM, SAM2) vs per slice (MedSAM, SAM-Med2D)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,per_slice", [("sam", False), ("sam2", False), ("medsam", True), ("sam-med2d", True)]
)
def test_percentile_window_scope(name: str, per_slice: bool, lung) -> None:
    model = tiny_model(name)
    model.set_case(lung.image)
    before = model.preprocess([6, 7]).clone()
    changed = lung.image.array.copy()
    changed[6] = changed[6] * 0.25 + 40.0  # one slice rescaled: its own window moves with it
    model.set_case(replace(lung.image, array=changed))
    after = model.preprocess([6, 7])
    assert before.shape == after.shape
    assert before.shape[1] == 3
    if per_slice:  # the rescaled slice gives (nearly: 8-bit rounding) the same input
        assert (before[0] - after[0]).abs().mean() < 0.05 * before[0].std()
    else:  # the volume window did not move with it
        assert (before[0] - after[0]).abs().mean() > 0.2 * before[0].std()
    # slice 7 is untouched; a per-volume window hardly moves either (0.25% of the voxels)
    assert (before[1] - after[1]).abs().mean() < 0.05 * before[1].std()


def test_medsam_input_is_min_max_scaled_and_box_only(lung) -> None:
    model = tiny_model("medsam")
    model.set_case(lung.image)
    batch = model.preprocess([5, 6])
    size = model.net.image_encoder.img_size
    assert batch.shape == (2, 3, size, size)
    assert torch.equal(batch[:, 0], batch[:, 1]) and torch.equal(batch[:, 0], batch[:, 2])
    flat = batch.flatten(1)
    assert torch.allclose(flat.min(1).values, torch.zeros(2))
    assert torch.allclose(flat.max(1).values, torch.ones(2))
    box = Box2D(50, 40, 90, 80)
    alone = model.predict_slice(_slice_prompt(6, box=box))
    with_points = model.predict_slice(_slice_prompt(6, [[70, 60], [10, 10]], [1, 0], box))
    assert np.array_equal(alone.mask, with_points.mask)
    assert np.array_equal(alone.feedback, with_points.feedback)
    assert not model.predict_slice(_slice_prompt(6, [[70, 60]], [1])).mask.any()


def test_medsam_input_follows_medsams_own_resize(lung) -> None:
    """MedSAM's scripts: skimage cubic resize (clipped to the input range), astype(uint8),
    min-max with the denominator clipped at 1e-8, written out here on the real lung slice as
    its file stores it (LPS: the canonical RAS slice turned by 180 degrees)."""
    from skimage import transform

    model = tiny_model("medsam")
    model.set_case(lung.image)
    z, size = 6, model.net.image_encoder.img_size
    image = lung.image.array[z]
    low, high = np.percentile(image, [0.5, 99.5])
    eight_bit = np.rint((np.clip(image, low, high) - low) / (high - low) * 255.0).astype(np.uint8)
    eight_bit = eight_bit[::-1, ::-1]
    img_3c = np.repeat(eight_bit[:, :, None], 3, axis=-1)
    resized = transform.resize(
        img_3c, (size, size), order=3, preserve_range=True, anti_aliasing=True
    ).astype(np.uint8)
    expected = (resized - resized.min()) / np.clip(resized.max() - resized.min(), 1e-8, None)
    got = model.preprocess([z])[0].numpy()
    np.testing.assert_allclose(got, expected.transpose(2, 0, 1), rtol=0, atol=1e-6)


def test_sam_med2d_input_is_standardised_then_nearest_squashed(lung) -> None:
    model = tiny_model("sam-med2d")
    model.set_case(lung.image)
    z, (height, width) = 6, lung.image.shape[1:]
    full = model.preprocess([z])[0].numpy()
    batch = full[0]
    size = model.net.image_encoder.img_size
    image = lung.image.array[z]
    low, high = np.percentile(image, [0.5, 99.5])
    eight_bit = np.rint((np.clip(image, low, high) - low) / (high - low) * 255.0)
    standardised = (eight_bit - 123.675) / 58.395
    rows = np.floor(np.arange(size) * height / size).astype(int)
    cols = np.floor(np.arange(size) * width / size).astype(int)
    np.testing.assert_allclose(batch, standardised[np.ix_(rows, cols)], atol=1e-4)
    blue = (eight_bit - 103.53) / 57.375  # RGB replicated, each channel with its own mean/std
    np.testing.assert_allclose(full[2], blue[np.ix_(rows, cols)], atol=1e-4)


# --------------------------------------------------------------------------------------
# Whole episodes on the real volumes; the embedding cache
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_episode_writes_back_prompted_slices(name: str, demo_cases) -> None:
    case = demo_cases["brain1"]
    target = case.targets[1]  # six slices
    model = tiny_model(name, batch_size=4)
    model.set_case(case.image)
    prompter = registry.prompters.create("box-per-slice")
    refiner_name = "center-error-click"
    refinable = incompatibility(type(model), None, registry.refiners.get(refiner_name)) is None
    refiner = registry.refiners.create(refiner_name) if refinable else None
    results = run_episode(
        case,
        target,
        model,
        prompter,
        "box-per-slice",
        refiner,
        refiner_name,
        steps=2 if refinable else 0,
    )
    assert len(results) == (3 if refinable else 1)
    first = results[0]
    prompted = first.prompt.slices()
    truth_slices = np.flatnonzero(case.target_mask(target).any(axis=(1, 2))).tolist()
    assert prompted == truth_slices
    mask = first.prediction.mask
    assert mask.shape == case.image.shape and mask.dtype == bool
    untouched = np.setdiff1d(np.arange(mask.shape[0]), prompted)
    assert not mask[untouched].any()
    assert mask[prompted].any()
    assert sorted(first.prediction.feedback) == prompted
    assert 0.0 <= first.metrics["dice"] <= 1.0
    # slices 12..17 in fixed blocks of four: blocks 8..11 is not touched, 12..15 and 16..19
    assert prompted == [12, 13, 14, 15, 16, 17]
    assert model.stats.encoder_batches == 2
    assert model.stats.slices_encoded == 8
    if refinable:
        for step in results[1:]:
            assert step.prediction.mask.shape == case.image.shape
        blocks = {z // 4 for step in results for z in step.prompt.slices()}
        assert model.stats.encoder_batches == len(blocks)


@pytest.mark.parametrize("name", ["sam", pytest.param("sam2", marks=pytest.mark.slow)])
def test_embeddings_are_encoded_once_per_case(name: str, demo_cases) -> None:
    """3 prompters x 2 refinement steps on every target of a case: one encode per slice."""
    case = demo_cases["brain1"]
    model = tiny_model(name)
    model.set_case(case.image)
    refiner = registry.refiners.create("center-error-click")
    prompted: set[int] = set()
    decoder_calls = 0
    for target in case.targets:
        for prompter_name in ("box-per-slice", "center-point-per-slice", "points-per-slice"):
            prompter = registry.prompters.create(prompter_name)
            results = run_episode(
                case, target, model, prompter, prompter_name, refiner, "center-error-click", steps=2
            )
            for result in results:
                prompted |= set(result.prompt.slices())
            decoder_calls = model.stats.decoder_calls
    assert model.stats.slices_encoded == len(prompted) == 7  # brain1: slices 11..17
    assert decoder_calls > 3 * len(prompted)
    # a new case drops the cache; the same slices are encoded again
    model.set_case(replace(case.image, array=case.image.array.copy()))
    model.predict(box_and_center_prompt(case, case.targets[0]))
    assert model.stats.slices_encoded == 7 + 2


def test_cache_memory_bound_forces_re_encoding(lung) -> None:
    model = tiny_model("sam", cache_slices=1)
    model.set_case(lung.image)
    prompt = box_and_center_prompt(lung, lung.targets[0])  # slices 5, 6, 7
    model.predict(prompt)
    first = model.stats.slices_encoded
    assert len(model.cache) == 1
    model._memo.clear()  # only the embedding cache stands between us and the encoder now
    model.predict(prompt)
    assert model.stats.slices_encoded > first >= 3

    # a byte bound of 1.5 entries: batches shrink to one slice, each decoded before eviction
    entry = model.cache.bytes
    bounded = tiny_model("sam", cache_mb=1.5 * entry / 2**20, batch_size=4)
    bounded.set_case(lung.image)
    bounded.predict(prompt)
    assert len(bounded.cache) == 1 and bounded.cache.bytes <= 1.5 * entry
    assert bounded.stats.slices_encoded == 3 and bounded.cache.evictions == 2
    # unbounded: slices 5, 6, 7 are in the block 4..7, one batch of four
    free = tiny_model("sam", batch_size=4)
    free.set_case(lung.image)
    free.predict(prompt)
    assert free.stats.encoder_batches == 1 and free.stats.slices_encoded == 4
    assert sorted(free.cache._items) == [4, 5, 6, 7]


def test_mask_feedback_changes_refined_slices_only(lung) -> None:
    model = tiny_model("sam-med2d")
    model.set_case(lung.image)
    prompt = box_and_center_prompt(lung, lung.targets[0])
    first = model.predict(prompt)
    click = Prompt(points=[(6, 20, 20)], point_labels=[0])
    second = model.predict(prompt.merged_with(click), previous=first, update_slices=[6])
    assert np.array_equal(second.mask[[5, 7]], first.mask[[5, 7]])
    assert not np.array_equal(second.feedback[6], first.feedback[6])
    assert second.feedback[5] is first.feedback[5]


def test_sam_med2d_feeds_back_probabilities_as_it_was_trained(lung, monkeypatch) -> None:
    """SAM-Med2D's train.py/test.py (utils.generate_point) give the prompt encoder
    ``sigmoid(low_res_logits)`` as the mask input; SAM, SAM2 give logits."""
    from intrabench.models.sam_family import sam_med2d

    model = tiny_model("sam-med2d")
    model.set_case(lung.image)
    seen = []
    original = sam_med2d.sam_decode

    def spy(net, embedding, coords, labels, box, mask_input, multimask):
        seen.append(None if mask_input is None else mask_input.clone())
        return original(net, embedding, coords, labels, box, mask_input, multimask)

    monkeypatch.setattr(sam_med2d, "sam_decode", spy)
    prompt = box_and_center_prompt(lung, lung.targets[0])
    first = model.predict(Prompt(points=[(6, 60, 70)], point_labels=[1], box3d=prompt.box3d))
    seen.clear()
    model.predict(Prompt(points=[(6, 20, 20)], point_labels=[0]), previous=first, update_slices=[6])
    [mask_input] = seen
    logits = torch.as_tensor(first.feedback[6])
    torch.testing.assert_close(mask_input[0, 0], torch.sigmoid(logits))
    assert logits.min() < 0  # a real difference: logits are not probabilities


# --------------------------------------------------------------------------------------
# Every registered 2D prompter and refiner against every compatible 2D adapter
# --------------------------------------------------------------------------------------


def _compatible_prompters(model_cls) -> list[str]:
    return [  # the recorded prompter replays a person's session: tests/people
        name
        for name, cls in registry.prompters.items()
        if incompatibility(model_cls, cls) is None and not getattr(cls, "replays_people", False)
    ]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_registered_prompter_and_refiner(name: str, lung) -> None:
    model = tiny_model(name)
    model_cls = type(model)
    model.set_case(lung.image)
    target = lung.targets[0]
    prompters = _compatible_prompters(model_cls)
    assert prompters, f"no registered prompter fits {name}"
    truth = lung.target_mask(target)
    for prompter_name in prompters:
        prompter = registry.prompters.create(prompter_name)
        (result,) = run_episode(lung, target, model, prompter, prompter_name)
        assert result.prediction.mask.shape == truth.shape, prompter_name
        assert result.effort > 0, prompter_name
        assert 0.0 <= result.metrics["dice"] <= 1.0, prompter_name
    refiners = [  # the recorded refiner replays a person's session: tests/people
        r
        for r, cls in registry.refiners.items()
        if incompatibility(model_cls, None, cls) is None
        and not getattr(cls, "replays_people", False)
    ]
    if "mask" not in model_cls.accepts:
        assert not refiners
        return
    assert refiners
    prompter_name = prompters[0]
    for refiner_name in refiners:
        prompter = registry.prompters.create(prompter_name)
        refiner = registry.refiners.create(refiner_name)
        results = run_episode(
            lung, target, model, prompter, prompter_name, refiner, refiner_name, steps=2
        )
        assert len(results) == 3, refiner_name
        for step in results:
            assert step.prediction.mask.shape == truth.shape, refiner_name


@pytest.mark.slow
def test_full_size_sam_med2d_runs_on_cpu(lung) -> None:
    """The full-size SAM-Med2D (ViT-B, 256 input, 16 x 16 tokens) is cheap enough for a CPU:
    its adapters run on the real grid (window 14 padded to 28, stride-2 conv to 8 x 8)."""
    model = registry.models.create("sam-med2d", {"weights": "random", "device": "cpu"})
    model.set_case(lung.image)
    output = model.predict_slice(_slice_prompt(6, [[70, 60]], [1], Box2D(50, 40, 90, 80)))
    assert output.mask.shape == lung.image.shape[1:]
    assert output.feedback.shape == (64, 64)
    assert model.embedding(6).shape == (256, 16, 16)


@pytest.mark.parametrize("name", ["medsam", "litemedsam"])
def test_models_that_read_the_stored_slice_ignore_the_header_mirror(name: str, lung) -> None:
    """The same stored array under a header mirrored in x: IntraBench's canonical slice and
    box are mirrored, the stored view the model sees is not, so its mask is the mirror of
    the original's, exactly. MedSAM and LiteMedSAM read their training images as stored."""
    from intrabench.io.volume import ImageGeometry, Volume

    model = (
        tiny_model(name)
        if name == "medsam"
        else registry.models.create(
            "litemedsam", {"weights": "random", "tiny": True, "device": "cpu"}
        )
    )
    geometry = lung.image.geometry
    mirrored_geometry = ImageGeometry(
        geometry.size, geometry.spacing, geometry.origin, (-1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0)
    )
    mirrored = Volume(
        np.ascontiguousarray(lung.image.array[:, :, ::-1]),
        lung.image.spacing,
        mirrored_geometry,
        modality="CT",
    )
    width = lung.image.shape[2]
    box = Box2D(50, 40, 90, 80)
    mirrored_box = Box2D(50, width - 1 - 80, 90, width - 1 - 40)
    model.set_case(lung.image)
    original = model.predict_slice(_slice_prompt(6, box=box)).mask
    model.set_case(mirrored)
    again = model.predict_slice(_slice_prompt(6, box=mirrored_box)).mask
    assert original.any()
    np.testing.assert_array_equal(again, original[:, ::-1])
