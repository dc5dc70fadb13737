"""Full-size architectures on the meta device vs the published checkpoints' key sets, and
checkpoint round trips (tiny models saved the way the public files are) through the loaders."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from intrabench.io.checkpoints import CheckpointError
from intrabench.models.volumetric import _sammed3d_arch as sam_arch
from intrabench.models.volumetric import _segvol_arch as segvol_arch
from intrabench.models.volumetric.sam_med3d import SamMed3D, SamMed3DTurbo
from intrabench.models.volumetric.segvol import SegVol
from intrabench.types import Box3D, Prompt


def _meta_state(build):
    with torch.device("meta"):
        return build().state_dict()


def test_sam_med3d_full_size_matches_published_checkpoint_layout():
    state = _meta_state(lambda: sam_arch.SamMed3DNet(sam_arch.FULL))
    assert len(state) == 324
    assert sum(t.numel() for t in state.values()) == 100_509_616  # 100.5 M
    expected = {
        "image_encoder.pos_embed": (1, 8, 8, 8, 768),
        "image_encoder.patch_embed.proj.weight": (768, 1, 16, 16, 16),
        "image_encoder.blocks.0.attn.rel_pos_d": (27, 64),  # window 14
        "image_encoder.blocks.2.attn.rel_pos_w": (15, 64),  # global, 8^3 grid
        "image_encoder.blocks.11.attn.rel_pos_h": (15, 64),
        "image_encoder.blocks.11.mlp.lin1.weight": (3072, 768),
        "image_encoder.neck.0.weight": (384, 768, 1, 1, 1),
        "image_encoder.neck.2.weight": (384, 384, 3, 3, 3),
        "image_encoder.neck.3.bias": (384,),
        "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix": (3, 128),
        "prompt_encoder.point_embeddings.1.weight": (1, 384),
        "prompt_encoder.mask_downscaling.0.weight": (4, 1, 2, 2, 2),
        "prompt_encoder.mask_downscaling.6.weight": (384, 16, 1, 1, 1),
        "mask_decoder.transformer.layers.1.cross_attn_image_to_token.q_proj.weight": (192, 384),
        "mask_decoder.transformer.layers.0.mlp.lin1.weight": (2048, 384),
        "mask_decoder.mask_tokens.weight": (4, 384),
        "mask_decoder.output_upscaling.0.weight": (384, 96, 2, 2, 2),
        "mask_decoder.output_upscaling.3.weight": (96, 48, 2, 2, 2),
        "mask_decoder.output_hypernetworks_mlps.3.layers.2.weight": (48, 384),
        "mask_decoder.iou_prediction_head.layers.2.weight": (4, 256),
    }
    assert {k: tuple(state[k].shape) for k in expected} == expected
    assert "prompt_encoder.point_embeddings.2.weight" not in state  # no box corners
    assert not any("pixel_mean" in k for k in state)  # non-persistent upstream


def test_segvol_full_size_matches_published_checkpoint_layout():
    state = _meta_state(lambda: segvol_arch.SegVolNet(segvol_arch.FULL))
    expected = {
        "image_encoder.patch_embedding.position_embeddings": (1, 2048, 768),
        "image_encoder.patch_embedding.patch_embeddings.1.weight": (768, 1024),
        "image_encoder.blocks.11.attn.qkv.weight": (2304, 768),
        "image_encoder.blocks.0.mlp.linear1.weight": (3072, 768),
        "image_encoder.norm.weight": (768,),
        "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix": (3, 384),
        "prompt_encoder.point_embeddings.3.weight": (1, 768),
        "prompt_encoder.mask_downscaling.0.weight": (4, 1, 2, 2),
        "prompt_encoder.mask_downscaling.6.weight": (768, 16, 1, 1),
        "mask_decoder.output_upscaling.0.weight": (768, 192, 2, 2, 2),
        "mask_decoder.output_upscaling.1.weight": (192, 16, 32, 32),
        "mask_decoder.output_upscaling.3.weight": (192, 96, 2, 2, 2),
        "mask_decoder.txt_align_upscaled_embedding.weight": (96, 768),
        "mask_decoder.transformer.layers.0.mlp.lin1.weight": (2048, 768),
        "mask_decoder.transformer.final_attn_token_to_image.q_proj.weight": (384, 768),
    }
    assert {k: tuple(state[k].shape) for k in expected} == expected
    assert len(state) == 276
    assert not any("norm_cross_attn" in k for k in state)  # absent in MONAI 0.9
    assert not any(k.startswith("image_encoder.blocks.0.attn.qkv.bias") for k in state)
    assert not set(state) & set(segvol_arch.text_encoder_keys())
    encoder = [k for k in state if k.startswith("image_encoder.")]
    assert len(encoder) == 3 + 12 * 11 + 2


def _predict_brain(model, brain, prompt):
    model.set_case(brain.image)
    return model.predict(prompt)


def _brain_prompt(brain) -> Prompt:
    points = np.argwhere(brain.target_mask(brain.targets[0]))
    return Prompt(points=points[[0, len(points) // 2]], point_labels=[1, 1])


def test_sam_med3d_training_dict_round_trips_strictly(tmp_path, brain):
    source = SamMed3DTurbo(weights="random", tiny=True, device="cpu", seed=7)
    path = tmp_path / "sam_med3d_turbo.pth"
    torch.save(
        {
            "model_state_dict": source.net.state_dict(),
            "optimizer_state_dict": {},
            "args": argparse.Namespace(model_type="vit_b_ori", lr=8e-4),
            "epoch": 3,
            "best_dice": 0.5,
        },
        path,
    )
    loaded = SamMed3DTurbo(checkpoint_dir=str(tmp_path), tiny=True, device="cpu", seed=99)
    for key, value in source.net.state_dict().items():
        assert torch.equal(value, loaded.net.state_dict()[key]), key
    prompt = _brain_prompt(brain)
    assert np.array_equal(
        _predict_brain(source, brain, prompt).mask, _predict_brain(loaded, brain, prompt).mask
    )
    other = SamMed3DTurbo(weights="random", tiny=True, device="cpu", seed=99)
    assert not torch.equal(
        other.net.state_dict()["mask_decoder.iou_token.weight"],
        loaded.net.state_dict()["mask_decoder.iou_token.weight"],
    )


def test_sam_med3d_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="sam_med3d.pth"):
        SamMed3D(checkpoint_dir=str(tmp_path), tiny=True, device="cpu")
    state = SamMed3D(weights="random", tiny=True, device="cpu").net.state_dict()
    state.pop("mask_decoder.iou_token.weight")
    state["image_encoder.extra"] = torch.zeros(1)
    torch.save({"model_state_dict": state, "args": argparse.Namespace()}, tmp_path / "x.pth")
    with pytest.raises(
        CheckpointError,
        match=r"missing 1: mask_decoder.iou_token.weight.*"
        r"unexpected 1: image_encoder.extra",
    ):
        SamMed3D(checkpoint=str(tmp_path / "x.pth"), tiny=True, device="cpu")


def test_sam_med3d_other_pickles_are_refused(tmp_path):
    state = SamMed3D(weights="random", tiny=True, device="cpu").net.state_dict()
    torch.save({"model_state_dict": state, "args": np.random.default_rng(0)}, tmp_path / "x.pth")
    with pytest.raises(CheckpointError, match="cannot load checkpoint"):
        SamMed3D(checkpoint=str(tmp_path / "x.pth"), tiny=True, device="cpu")


def test_segvol_module_prefixed_checkpoint_round_trips_strictly(tmp_path, brain):
    source = SegVol(weights="random", tiny=True, device="cpu", seed=5)
    state = {f"module.{k}": v for k, v in source.net.state_dict().items()}
    for key in segvol_arch.text_encoder_keys()[:20]:  # CLIP keys: ignored
        state[f"module.{key}"] = torch.zeros(2)
    torch.save({"model": state, "epoch": 1000}, tmp_path / "SegVol_v1.pth")
    loaded = SegVol(checkpoint_dir=str(tmp_path), tiny=True, device="cpu", seed=123)
    prompt = Prompt(box3d=Box3D(5, 40, 40, 15, 90, 90))
    assert np.array_equal(
        _predict_brain(source, brain, prompt).mask, _predict_brain(loaded, brain, prompt).mask
    )

    state["module.mask_decoder.something_new"] = torch.zeros(1)
    torch.save({"model": state, "epoch": 1000}, tmp_path / "bad.pth")
    with pytest.raises(CheckpointError, match="unexpected 1: mask_decoder.something_new"):
        SegVol(checkpoint=str(tmp_path / "bad.pth"), tiny=True, device="cpu")


def test_missing_checkpoints_are_reported_not_replaced_by_random_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(tmp_path))
    assert SegVol.availability() == "checkpoint missing: SegVol_v1.pth"
    assert SamMed3D.availability() == "checkpoint missing: sam_med3d.pth"
    with pytest.raises(CheckpointError, match="SegVol_v1.pth"):
        SegVol(device="cpu")
    (tmp_path / "sam_med3d_turbo.pth").write_bytes(b"")  # empty: never a checkpoint
    assert SamMed3DTurbo.availability().startswith("checkpoint wrong: sam_med3d_turbo.pth is empty")
    (tmp_path / "sam_med3d_turbo.pth").write_bytes(b"x")  # no hash pinned: never "ready"
    assert SamMed3DTurbo.availability().startswith("unverified: no SHA-256 pinned")


@pytest.mark.parametrize(("module", "net"), [(sam_arch, "SamMed3DNet"), (segvol_arch, "SegVolNet")])
def test_tiny_configurations_are_the_same_architecture(module, net):
    full = _meta_state(lambda: getattr(module, net)(module.FULL))
    tiny = _meta_state(lambda: getattr(module, net)(module.TINY))
    assert set(tiny) <= set(full)
    extra_blocks = {k.split(".")[2] for k in set(full) - set(tiny)}
    assert extra_blocks == {str(i) for i in range(2, 12)}  # only deeper blocks
    assert all(k.startswith("image_encoder.blocks.") for k in set(full) - set(tiny))
