"""VISTA3D (issue #18): the MONAI bundle's pipeline, checked against the bundle's own steps run
with MONAI on a file, on shared random weights; clicks, refinement, boxes and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk
import torch

from intrabench.io.volume import read_volume
from intrabench.types import Box3D, Prompt

pytest.importorskip("monai.networks.nets.vista3d")

from intrabench.models.volumetric.vista3d import (  # noqa: E402
    CT_WINDOW,
    Vista3D,
    load_vista3d_weights,
    tiny_network,
)


@pytest.fixture(scope="module")
def ct_file(tmp_path_factory):
    """An oblique-free CT-like volume stored LPS with anisotropic spacing: a bright sphere
    (60 HU) in soft tissue (20 HU) inside air (-1000 HU)."""
    z, y, x = np.mgrid[:24, :40, :36]
    volume = np.full((24, 40, 36), -1000.0, np.float32)
    volume[2:22, 4:36, 4:32] = 20.0
    sphere = ((z - 12) * 2.5) ** 2 + ((y - 20) * 0.9) ** 2 + ((x - 18) * 1.1) ** 2 < 8.0**2
    volume[sphere] = 60.0
    image = sitk.GetImageFromArray(volume)
    image.SetSpacing((1.1, 0.9, 2.5))
    image.SetOrigin((-20.0, 15.0, 40.0))
    path = tmp_path_factory.mktemp("vista") / "ct.nii.gz"
    sitk.WriteImage(image, str(path))
    return path


def _model(**params) -> Vista3D:
    return Vista3D(weights="random", tiny=True, seed=3, device="cpu", patch_size=32, **params)


def _bundle_logits(path, net, click_zyx_canonical, volume, label_prompt=None) -> torch.Tensor:
    """The bundle's inference, step by step from configs/inference.json with MONAI: load the
    file, its transforms, the evaluator's point transform, the Vista3dInferer call."""
    from monai.apps.vista3d.inferer import point_based_window_inferer
    from monai.transforms import (
        CastToTyped,
        Compose,
        CropForegroundd,
        EnsureChannelFirstd,
        EnsureTyped,
        LoadImaged,
        Orientationd,
        ScaleIntensityRanged,
        Spacingd,
    )

    from intrabench.io.volume import native_index

    pipeline = Compose(
        [
            LoadImaged(keys="image", image_only=True),
            EnsureChannelFirstd(keys="image"),
            EnsureTyped(keys="image", track_meta=True),
            Spacingd(keys="image", pixdim=[1.5, 1.5, 1.5], mode="bilinear"),
            CropForegroundd(keys="image", allow_smaller=True, margin=10, source_key="image"),
            ScaleIntensityRanged(
                keys="image",
                a_min=-963.8247715525971,
                a_max=1053.678477684517,
                b_min=0,
                b_max=1,
                clip=True,
            ),
            Orientationd(keys="image", axcodes="RAS"),
            CastToTyped(keys="image", dtype=torch.float32),
        ]
    )
    image = pipeline({"image": str(path)})["image"]
    # the user's click in the file's voxel (i, j, k), moved as the bundle's evaluator does
    ijk = native_index(np.asarray([click_zyx_canonical]), volume.geometry)[0, ::-1]
    move = np.linalg.inv(np.asarray(image.affine)) @ np.asarray(image.meta["original_affine"])
    point = (move @ np.append(ijk, 1.0))[:3]
    with torch.no_grad():
        return point_based_window_inferer(
            inputs=image[None],
            roi_size=[32, 32, 32],
            sw_batch_size=1,
            transpose=True,
            with_coord=True,
            predictor=net,
            mode="gaussian",
            sw_device="cpu",
            device="cpu",
            overlap=0.3,
            point_coords=torch.tensor(point[None, None], dtype=torch.float32),
            point_labels=torch.tensor([[1]]),
            # the bundle's evaluator: label_prompt [[c]] is the class vector (when supported)
            # and the prompt class
            class_vector=None
            if label_prompt is None or label_prompt > 132
            else torch.tensor([[label_prompt]]),
            prompt_class=None if label_prompt is None else torch.tensor([[label_prompt]]),
            prev_mask=None,
        )


def test_logits_equal_the_bundle_pipeline_on_shared_random_weights(ct_file):
    volume = read_volume(ct_file)
    model = _model()
    model.set_case(volume)
    click = (11, 20, 17)
    prediction = model.predict(Prompt(points=np.array([click]), point_labels=np.array([1])))
    expected = _bundle_logits(ct_file, model.net, click, volume)
    ours = prediction.feedback["logits"]
    assert ours.shape == expected.shape
    # outside the point's window the inferer leaves NaN (as upstream): same places, and equal
    # values inside
    covered = torch.isfinite(expected)
    assert torch.equal(torch.isfinite(ours), covered) and covered.sum() > 10_000
    assert float(torch.abs(ours - expected.float())[covered].max()) <= 1e-5
    assert prediction.mask.shape == volume.shape and prediction.mask.dtype == bool


@pytest.mark.parametrize(
    ("target_class", "expected_class"), [("ball", 5), ("rim", 133), ("other", None)]
)
def test_class_prompts_follow_the_targets_class(ct_file, target_class, expected_class):
    """The engine tells the model each call's target class; class_map turns it into the
    bundle's label_prompt (5: a supported class; 133: zero-shot; unmapped: clicks only)."""
    from intrabench.engine.episode import ModelCall, call_model

    volume = read_volume(ct_file)
    model = _model(class_map={"ball": 5, "rim": 133})
    model.set_case(volume)
    click = (11, 20, 17)
    prompt = Prompt(points=np.array([click]), point_labels=np.array([1]))
    answer = call_model(model, ModelCall(step=0, prompt=prompt, target_class=target_class))
    assert model.class_prompt() == expected_class
    expected = _bundle_logits(ct_file, model.net, click, volume, expected_class)
    ours = answer.value.feedback["logits"]
    covered = torch.isfinite(expected)
    assert torch.equal(torch.isfinite(ours), covered)
    assert float(torch.abs(ours - expected.float())[covered].max()) <= 1e-5
    if expected_class is not None:  # the class changes the answer
        plain = _bundle_logits(ct_file, model.net, click, volume, None)
        assert float(torch.abs(plain - expected)[covered].max()) > 1e-3


def test_processed_image_is_the_ct_window_on_a_1_5_mm_grid(ct_file):
    volume = read_volume(ct_file)
    model = _model()
    model.set_case(volume)
    image = model._data["image"]
    assert np.allclose(np.abs(np.diag(np.asarray(image.affine))[:3]), 1.5)
    soft = (20.0 - CT_WINDOW[0]) / (CT_WINDOW[1] - CT_WINDOW[0])
    values = image.numpy()
    assert values.min() >= 0.0 and values.max() <= 1.0
    assert np.isclose(np.median(values[values > 0.45]), soft, atol=0.02)


def test_logits_go_back_to_the_canonical_grid_where_the_click_is(ct_file):
    """A ball of positive logits around the click in the processed space comes back as a
    canonical mask holding the click, of the ball's volume in mm^3."""
    volume = read_volume(ct_file)
    model = _model()
    model.set_case(volume)
    click = np.array([[12, 20, 18]])
    point = model.processed_points(click)[0]
    shape = model._data["image"].shape[1:]
    grid = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1)
    ball = np.linalg.norm((grid - point) * 1.5, axis=-1) < 6.0  # 6 mm radius
    logits = torch.from_numpy(np.where(ball, 10.0, -10.0)[None, None].astype(np.float32))
    mask = model.to_canonical_mask(
        logits, torch.tensor(point[None, None], dtype=torch.float32), torch.tensor([[1]])
    )
    assert mask[12, 20, 18]
    millilitres = mask.sum() * np.prod(volume.spacing) / 1000.0
    assert millilitres == pytest.approx(4 / 3 * np.pi * 6.0**3 / 1000.0, rel=0.15)
    # the mask's centre is the click's (within a voxel of the coarse grid, in mm)
    centre = np.argwhere(mask).mean(axis=0)
    assert np.all(np.abs((centre - click[0]) * np.asarray(volume.spacing)) < 1.6)


def test_refinement_reuses_the_previous_logits_and_only_new_windows(ct_file):
    volume = read_volume(ct_file)
    model = _model()
    model.set_case(volume)
    first = Prompt(points=np.array([[11, 20, 17]]), point_labels=np.array([1]))
    step0 = model.predict(first)
    both = first.merged_with(Prompt(points=np.array([[11, 6, 6]]), point_labels=np.array([0])))
    step1 = model.predict(both, previous=step0)
    assert step1.feedback["points_used"] == 2
    before, after = step0.feedback["logits"][0, 0], step1.feedback["logits"][0, 0]
    changed = np.argwhere(
        ~(torch.isclose(before, after) | (before.isnan() & after.isnan())).numpy()
    )
    assert len(changed) > 0
    # only the new (negative) point's 32^3 window was recomputed, the rest is step 0's: along
    # an axis longer than the window, the changes span one window holding the point
    new_point = model.processed_points(np.array([[11, 6, 6]]))[0]
    long_axes = [a for a, n in enumerate(before.shape) if n > 32]
    assert long_axes
    for axis in long_axes:
        low, high = changed[:, axis].min(), changed[:, axis].max()
        assert high - low + 1 <= 32 and low <= new_point[axis] <= high


def test_boxes_are_skipped_unless_asked_for_as_a_centre_click():
    from intrabench import registry
    from intrabench.interfaces import incompatibility

    box_prompter = registry.prompters.get("box-3d")
    reason = incompatibility(Vista3D, box_prompter)
    assert "does not accept box3d" in reason and "box_as_centre_click" in reason
    assert incompatibility(Vista3D, box_prompter, params={"box_as_centre_click": True}) is None
    assert incompatibility(Vista3D, registry.prompters.get("points-per-volume")) is None
    model = _model(box_as_centre_click=True)
    points, labels = model.clicks(Prompt(box3d=Box3D(2, 10, 4, 8, 21, 9)))
    assert points.tolist() == [[5, 15, 6]] and labels.tolist() == [1]


def test_a_run_plans_vista3d_with_the_reason_for_boxes(tmp_path):
    from intrabench import registry
    from intrabench.config import parse_config
    from intrabench.engine.plan import make_plan

    config = parse_config(
        {
            "name": "v",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [
                {"name": "vista3d", "weights": "random", "tiny": True, "patch_size": 32},
                {
                    "name": "vista3d",
                    "weights": "random",
                    "tiny": True,
                    "patch_size": 32,
                    "box_as_centre_click": True,
                    "label": "vista3d-box",
                },
            ],
            "prompters": ["box-3d", {"name": "points-per-volume", "n_points": 1}],
        }
    )
    datasets = {
        spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
    }
    plan = make_plan(config, datasets)
    planned = {(unit.model.key, unit.prompter.key) for unit in plan.units}
    assert planned == {
        ("vista3d-box", "box-3d"),
        ("vista3d-box", "points-per-volume(n_points=1)"),
        (config.models[0].key, "points-per-volume(n_points=1)"),
    }
    assert [s["reason"] for s in plan.skipped] == [
        "model 'vista3d' does not accept box3d prompts produced by 'box-3d' (set "
        "box_as_centre_click: true to give a 3D box as one click at its centre)"
    ]
    # a lasso's refusal does not get the box hint
    from intrabench.interfaces import incompatibility

    assert incompatibility(registry.models.get("vista3d"), registry.prompters.get("lasso")) == (
        "model 'vista3d' does not accept lasso prompts produced by 'lasso'"
    )


def test_checkpoints_load_strictly(tmp_path):
    from tests.models3d.conftest import assert_strict_round_trip

    assert_strict_round_trip(
        tiny_network, load_vista3d_weights, tmp_path / "model.pt", wrapped=False
    )


def test_the_full_network_is_the_bundles_vista3d132():
    from monai.networks.nets.vista3d import vista3d132

    from intrabench.models.volumetric.vista3d import full_network

    with torch.device("meta"):
        ours, bundle = full_network(), vista3d132(in_channels=1)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in bundle.state_dict().items()
    }
    assert sum(p.numel() for p in ours.parameters()) == 217_964_982


def test_the_special_classes_are_the_bundle_pipelines():
    """Clicks of these classes get the labels 3/2 in the bundle's inference pipeline
    (VistaPreTransformd's special_index); the network's own list serves sampled points only."""
    import inspect

    from monai.apps.vista3d.transforms import VistaPreTransformd

    from intrabench.models.volumetric.vista3d import SPECIAL_CLASSES

    default = inspect.signature(VistaPreTransformd.__init__).parameters["special_index"].default
    assert tuple(SPECIAL_CLASSES) == tuple(default) == (25, 26, 27, 28, 29, 117)
