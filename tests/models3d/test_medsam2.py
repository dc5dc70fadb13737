"""MedSAM2 (issue #18): the official sam2 video predictor with MedSAM2's 512-px configuration,
run as MedSAM2's 3D inference script runs it; checked on shared random weights of a tiny
network against those steps driven by hand."""

from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk
import torch

pytest.importorskip("sam2.sam2_video_predictor")

from intrabench.io.volume import from_canonical, read_volume  # noqa: E402
from intrabench.models.sam_family.medsam2 import (  # noqa: E402
    MedSam2,
    build_predictor,
    frames_as_video,
    load_medsam2_weights,
    quiet_faithful_predictor,
)
from intrabench.types import Box3D, Prompt  # noqa: E402


@pytest.fixture(scope="module")
def ct(tmp_path_factory):
    """An axial CT stored LPS (SimpleITK's default direction): a 70 HU ball in 30 HU tissue
    in air."""
    z, y, x = np.mgrid[:12, :48, :40]
    volume = np.full((12, 48, 40), -1000.0, np.float32)
    volume[:, 4:44, 4:36] = 30.0
    volume[((z - 6) * 2.0) ** 2 + ((y - 22) * 0.8) ** 2 + ((x - 18) * 0.8) ** 2 < 36] = 70.0
    image = sitk.GetImageFromArray(volume)
    image.SetSpacing((0.8, 0.8, 2.0))
    path = tmp_path_factory.mktemp("medsam2") / "ct.nii.gz"
    sitk.WriteImage(image, str(path))
    return read_volume(path)


@pytest.fixture(scope="module")
def model():
    return MedSam2(weights="random", tiny=True, seed=2, device="cpu")


def _medsam2_script(net, volume_kji, key, box_xyxy, window=(-160.0, 240.0)):
    """MedSAM2's medsam2_infer_3D_CT.py, step by step: window, min-max to uint8, RGB, PIL
    resize, /255, ImageNet normalisation; box on the key slice, propagate forward, reset,
    box again, propagate in reverse."""
    from PIL import Image

    data = np.clip(volume_kji, *window)
    data = np.uint8((data - data.min()) / (data.max() - data.min()) * 255.0)
    size = net.image_size
    resized = np.zeros((len(data), 3, size, size))
    for i, plane in enumerate(data):
        resized[i] = np.array(Image.fromarray(plane).convert("RGB").resize((size, size))).transpose(
            2, 0, 1
        )
    resized = torch.from_numpy(resized / 255.0)
    resized -= torch.tensor((0.485, 0.456, 0.406))[:, None, None]
    resized /= torch.tensor((0.229, 0.224, 0.225))[:, None, None]
    outputs = []
    with torch.inference_mode(), quiet_faithful_predictor():
        with frames_as_video(resized.float(), *data.shape[1:]):
            state = net.init_state(video_path=None)
        for reverse in (False, True):
            net.add_new_points_or_box(inference_state=state, frame_idx=key, obj_id=1, box=box_xyxy)
            for frame, _ids, logits in net.propagate_in_video(state, reverse=reverse):
                outputs.append((int(frame), logits[0, 0].float()))
            net.reset_state(state)
    return outputs


def test_propagation_equals_medsam2s_script_on_shared_random_weights(model, ct):
    model.set_case(ct)
    assert model._native  # an axial file: its own slices are the frames
    prompt = Prompt(box3d=Box3D(3, 14, 10, 9, 30, 26))
    per_frame = model.frame_prompts(prompt)
    ours = model.propagate(per_frame)
    ((key, entry),) = per_frame.items()
    native = from_canonical(ct.array, ct.geometry)
    expected = _medsam2_script(model.net, native, key, entry["box"])
    assert [f for f, _ in ours] == [f for f, _ in expected]
    assert [f for f, _ in ours] == [*range(key, 12), *range(key, -1, -1)]
    for (_, a), (_, b) in zip(ours, expected):
        assert float((a - b).abs().max()) <= 1e-5


def test_key_slice_box_and_clicks_land_on_the_files_slices(model, ct):
    """LPS storage: canonical y and x run against the file's j and i."""
    model.set_case(ct)
    height, width = 48, 40
    per_frame = model.frame_prompts(
        Prompt(
            box3d=Box3D(2, 10, 5, 8, 20, 15),
            points=np.array([[4, 12, 7]]),
            point_labels=np.array([0]),
        )
    )
    assert sorted(per_frame) == [4, 5]  # the box's middle slice; the click's slice
    # canonical (y, x) -> file (row j, column i) = (H-1-y, W-1-x)
    assert per_frame[5]["box"] == [width - 1 - 15, height - 1 - 20, width - 1 - 5, height - 1 - 10]
    assert per_frame[4]["points"] == [[width - 1 - 7, height - 1 - 12]]
    assert per_frame[4]["labels"] == [0]


def test_non_axial_files_use_canonical_slices(model, oblique_case):
    model.set_case(oblique_case.image)
    assert not model._native
    per_frame = model.frame_prompts(
        Prompt(points=np.array([[3, 4, 5]]), point_labels=np.array([1]))
    )
    assert per_frame == {3: {"points": [[5.0, 4.0]], "labels": [1]}}


def test_small_holes_are_filled_without_the_cuda_extension():
    """fill_hole_area=8: a 4-pixel hole in a mask's logits becomes 0.1, a 16-pixel one stays."""
    from sam2.utils.misc import fill_holes_in_mask_scores

    scores = torch.full((1, 1, 20, 20), 5.0)
    scores[0, 0, 2:4, 2:4] = -3.0  # 4 pixels
    scores[0, 0, 10:14, 10:14] = -3.0  # 16 pixels
    with quiet_faithful_predictor():
        filled = fill_holes_in_mask_scores(scores, 8)
    assert torch.all(filled[0, 0, 2:4, 2:4] == 0.1)
    assert torch.all(filled[0, 0, 10:14, 10:14] == -3.0)


def test_the_full_network_has_sam2_1_hiera_tiny_parameters():
    """MedSAM2 fine-tunes SAM2.1 Hiera-tiny: at 512 px the parameters keep their names and
    shapes, so MedSAM2_latest.pt must fit the official tiny layout exactly (both built on the
    meta device: no weights allocated)."""
    import sam2.build_sam  # noqa: F401
    from hydra import compose
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from intrabench.models.sam_family.sam2 import build_hiera_on_meta

    ours = build_hiera_on_meta(lambda: build_predictor(tiny=False))
    assert ours.image_size == 512
    assert all(p.device.type == "meta" for p in ours.parameters())
    config = compose(config_name="configs/sam2.1/sam2.1_hiera_t.yaml")
    OmegaConf.resolve(config)
    official = build_hiera_on_meta(lambda: instantiate(config.model, _recursive_=True))
    shapes = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in official.state_dict().items()}
    # SAM2.1 Hiera-tiny's published size: 38.9 M parameters
    assert sum(p.numel() for p in ours.parameters()) == pytest.approx(38.9e6, rel=0.01)


def test_checkpoints_load_strictly(tmp_path):
    from tests.models3d.conftest import assert_strict_round_trip

    assert_strict_round_trip(
        lambda: build_predictor(tiny=True),
        load_medsam2_weights,
        tmp_path / "MedSAM2_latest.pt",
        wrapped=True,
    )


def test_a_run_with_a_key_slice_box_and_click_refinement(tmp_path):
    import pandas as pd

    from tests.run_helpers import run_config

    run = run_config(
        tmp_path,
        "name: m2\ndatasets: [{name: demo-phantoms, n_cases: 1}]\n"
        "models: [{name: medsam2, weights: random, tiny: true, device: cpu}]\n"
        "prompters: [box-3d]\nrefiners: [center-error-click]\nrefinement_steps: 1\n",
    )
    rows = pd.read_csv(run / "results.csv")
    assert set(rows["step"]) == {0, 1} and rows["dice"].between(0, 1).all()


def test_verify_checks_a_checkpoint_against_the_full_network_on_the_meta_device(tmp_path):
    from intrabench.io.checkpoints import CheckpointError
    from intrabench.models.sam_family.medsam2 import MedSam2

    path = tmp_path / "MedSAM2_latest.pt"
    torch.save({"model": {"image_encoder.trunk.pos_embed": torch.zeros(1, 96, 14, 14)}}, path)
    with pytest.raises(
        CheckpointError,
        match=r"missing \d+: .*shape mismatch 1: "
        r".*image_encoder.trunk.pos_embed",
    ):
        MedSam2.check_checkpoint(path, "medsam2")
