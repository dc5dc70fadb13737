"""Full-size architectures on the ``meta`` device: parameter names and shapes of the published
checkpoints, without weights or memory.

Expected figures: the SAM ViT image encoder is counted from its definition (patch embedding,
absolute position embedding, blocks with decomposed relative positions, neck); SAM's totals are
the published ones (ViT-B 93.7M, ViT-L 312.3M, ViT-H 641.1M); SAM2/SAM2.1 totals are those of
the SAM2 README (Hiera-L 224.4M, B+ 80.8M, S 46M, T 38.9M); SAM-Med2D's keys and shapes are
those listed in ``shared/notes/peers-and-model-loading.md`` section 2.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intrabench import registry
from intrabench.models.sam_family._sam_common import SAM_CONFIGS, build_sam
from intrabench.models.sam_family.sam2 import build_sam2_meta
from intrabench.models.sam_family.sam_med2d import SAM_MED2D_CONFIG, adapter_classes


def _meta(config):
    with torch.device("meta"):
        return build_sam(config)


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def vit_encoder_params(
    dim: int,
    depth: int,
    heads: int,
    global_blocks: set[int],
    image: int = 1024,
    patch: int = 16,
    window: int = 14,
    out: int = 256,
    adapter: bool = False,
) -> int:
    """Parameters of SAM's ImageEncoderViT, counted from its definition."""
    grid, head = image // patch, dim // heads
    total = 3 * patch * patch * dim + dim + grid * grid * dim  # patch embed, pos_embed
    for index in range(depth):
        side = grid if index in global_blocks else window
        total += 2 * dim + 3 * dim * dim + 3 * dim + dim * dim + dim + 2 * dim  # norms, attn
        total += 2 * (2 * side - 1) * head  # rel_pos_h, rel_pos_w
        total += 4 * dim * dim + 4 * dim + 4 * dim * dim + dim  # MLP
        if adapter:  # LayerNorm, channel C->C/4->C, spatial 3x3 conv + 4x4 transposed conv
            total += 2 * dim + 2 * dim * (dim // 4) + 9 * dim * dim + 16 * dim * dim
    return total + dim * out + 2 * out + 9 * out * out + 2 * out  # neck


@pytest.mark.parametrize(
    "variant,published", [("vit_b", 93_735_472), ("vit_l", 312_342_832), ("vit_h", 641_090_608)]
)
def test_sam_full_size_parameters(variant: str, published: int) -> None:
    config = SAM_CONFIGS[variant]
    net = _meta(config)
    encoder = vit_encoder_params(
        config.embed_dim, config.depth, config.num_heads, set(config.global_attn_indexes)
    )
    assert _count(net.image_encoder) == encoder
    assert _count(net) == published
    # the prompt encoder and mask decoder are the same 4.06M parameters (6,220 prompt encoder + 4,058,340 decoder) for all three
    assert _count(net.prompt_encoder) == 6_220 and _count(net.mask_decoder) == 4_058_340
    assert published - encoder == 4_064_560


def test_sam_vit_h_checkpoint_keys() -> None:
    state = _meta(SAM_CONFIGS["vit_h"]).state_dict()
    # 2 patch-embed + pos_embed + 32 blocks x 14 + 6 neck; 17 prompt encoder; 120 mask decoder
    assert len(state) == 3 + 32 * 14 + 6 + 17 + 120 == 594
    expected = {
        "image_encoder.pos_embed": (1, 64, 64, 1280),
        "image_encoder.patch_embed.proj.weight": (1280, 3, 16, 16),
        "image_encoder.blocks.0.attn.rel_pos_h": (27, 80),  # window 14, head dim 80
        "image_encoder.blocks.7.attn.rel_pos_h": (127, 80),  # global on the 64 x 64 grid
        "image_encoder.blocks.31.attn.qkv.weight": (3840, 1280),
        "image_encoder.blocks.31.mlp.lin1.weight": (5120, 1280),
        "image_encoder.neck.0.weight": (256, 1280, 1, 1),
        "image_encoder.neck.2.weight": (256, 256, 3, 3),
        "prompt_encoder.pe_layer.positional_encoding_gaussian_matrix": (2, 128),
        "prompt_encoder.point_embeddings.3.weight": (1, 256),
        "prompt_encoder.mask_downscaling.0.weight": (4, 1, 2, 2),
        "prompt_encoder.no_mask_embed.weight": (1, 256),
        "mask_decoder.mask_tokens.weight": (4, 256),
        "mask_decoder.output_hypernetworks_mlps.3.layers.2.weight": (32, 256),
        "mask_decoder.iou_prediction_head.layers.2.weight": (4, 256),
        "mask_decoder.transformer.layers.1.cross_attn_token_to_image.q_proj.weight": (128, 256),
    }
    for key, shape in expected.items():
        assert tuple(state[key].shape) == shape, key
    assert "pixel_mean" not in state and "image_encoder.blocks.32.norm1.weight" not in state


def test_sam_med2d_full_size_keys_and_shapes() -> None:
    net = _meta(SAM_MED2D_CONFIG)
    state = net.state_dict()
    vit_b = _meta(SAM_CONFIGS["vit_b"]).state_dict()
    adapter_keys = {k for k in state if ".Adapter." in k}
    # SAM ViT-B's 314 keys plus 6 adapter tensors in each of the 12 blocks
    assert len(vit_b) == 314 and len(state) == 314 + 12 * 6 == 386
    assert set(state) - adapter_keys == set(vit_b)
    for block in range(12):
        prefix = f"image_encoder.blocks.{block}.Adapter."
        assert {k for k in adapter_keys if k.startswith(prefix)} == {
            prefix + s
            for s in (
                "norm.weight",
                "norm.bias",
                "channel.0.weight",
                "channel.2.weight",
                "spatial.0.weight",
                "spatial.2.weight",
            )
        }
    expected = {
        "image_encoder.pos_embed": (1, 16, 16, 768),  # 256 input / patch 16
        "image_encoder.blocks.2.attn.rel_pos_h": (31, 64),  # global on 16 x 16
        "image_encoder.blocks.0.attn.rel_pos_w": (27, 64),  # window 14
        "image_encoder.blocks.0.Adapter.channel.0.weight": (192, 768),
        "image_encoder.blocks.0.Adapter.channel.2.weight": (768, 192),
        "image_encoder.blocks.11.Adapter.spatial.0.weight": (768, 768, 3, 3),
        "image_encoder.blocks.11.Adapter.spatial.2.weight": (768, 768, 4, 4),
        "image_encoder.blocks.11.Adapter.norm.weight": (768,),
        "prompt_encoder.mask_downscaling.0.weight": (4, 1, 2, 2),
        "mask_decoder.mask_tokens.weight": (4, 256),
    }
    for key, shape in expected.items():
        assert tuple(state[key].shape) == shape, key
    encoder = vit_encoder_params(768, 12, 12, {2, 5, 8, 11}, image=256, adapter=True)
    assert _count(net.image_encoder) == encoder
    assert _count(net) == encoder + 4_064_560 == 271_241_776
    assert net.prompt_encoder.image_embedding_size == (16, 16)


def test_sam_med2d_adapter_semantics() -> None:
    """Skip connection and LayerNorm: with a zero spatial branch the adapter is norm(x);
    the block adds the adapter of norm2(x) to the usual MLP residual."""
    SliceAdapter, AdapterBlock = adapter_classes()  # noqa: N806 - classes
    torch.manual_seed(0)
    adapter = SliceAdapter(32).eval()
    tokens = torch.randn(2, 8, 6, 32)
    with torch.no_grad():
        adapter.spatial[2].weight.zero_()
        torch.testing.assert_close(adapter(tokens), adapter.norm(tokens))
        adapter.spatial[2].weight.normal_()
        assert adapter(tokens).shape == tokens.shape
        assert not torch.allclose(adapter(tokens), adapter.norm(tokens))
    block = AdapterBlock(dim=32, num_heads=2, window_size=4, input_size=(8, 6), use_rel_pos=True)
    with torch.no_grad():
        after_attention = tokens + _attention_branch(block, tokens)
        normed = block.norm2(after_attention)
        expected = after_attention + block.mlp(normed) + block.Adapter(normed)
        torch.testing.assert_close(block(tokens), expected)


def _attention_branch(block, tokens):
    from segment_anything.modeling.image_encoder import window_partition, window_unpartition

    x = block.norm1(tokens)
    windows, pad = window_partition(x, block.window_size)
    return window_unpartition(block.attn(windows), block.window_size, pad, tokens.shape[1:3])


SAM2_EXPECTED = {
    # variant: (published millions, trunk embed dim, pos_embed background size)
    "sam2.1-hiera-large": (224.4, 144, 7),
    "sam2.1-hiera-tiny": (38.9, 96, 7),
    "sam2.1-hiera-base-plus": (80.8, 112, 14),
    "sam2.1-hiera-small": (46.0, 96, 7),
    "sam2-hiera-large": (224.4, 144, 7),
}


@pytest.mark.parametrize(
    "variant",
    [
        "sam2.1-hiera-large",
        "sam2.1-hiera-tiny",
        *(
            pytest.param(v, marks=pytest.mark.slow)
            for v in ("sam2.1-hiera-base-plus", "sam2.1-hiera-small", "sam2-hiera-large")
        ),
    ],
)
def test_sam2_full_size_parameters_and_keys(variant: str) -> None:
    millions, trunk_dim, background = SAM2_EXPECTED[variant]
    net = build_sam2_meta(variant)
    assert abs(_count(net) / 1e6 - millions) < 0.1
    state = net.state_dict()
    assert all(t.device.type == "meta" for t in state.values())
    expected = {
        "image_encoder.trunk.pos_embed": (1, trunk_dim, background, background),
        "image_encoder.trunk.pos_embed_window": (1, trunk_dim, 8, 8),
        "image_encoder.trunk.patch_embed.proj.weight": (trunk_dim, 3, 7, 7),
        "image_encoder.neck.convs.0.conv.weight": (256, 8 * trunk_dim, 1, 1),
        "sam_mask_decoder.conv_s0.weight": (32, 256, 1, 1),
        "sam_mask_decoder.conv_s1.weight": (64, 256, 1, 1),
        "sam_prompt_encoder.point_embeddings.3.weight": (1, 256),
        "no_mem_embed": (1, 1, 256),
        "maskmem_tpos_enc": (7, 1, 1, 64),
    }
    for key, shape in expected.items():
        assert tuple(state[key].shape) == shape, key
    # SAM2.1 added the spatial no-object embedding
    assert ("no_obj_embed_spatial" in state) == variant.startswith("sam2.1")
    assert net.image_size == 1024


def test_sam_med2d_network_equals_upstreams_with_every_tensor_non_zero():
    """SAM-Med2D's own network code (its repository's modified ``segment_anything``, which no
    package installs) was run by ``scripts/freeze_upstream_outputs.py`` with one seeded state
    dict, every tensor non-zero (relative positions and adapters included), on seeded inputs;
    ours, loaded with the same state dict, must give the frozen outputs (they were bit-identical
    when frozen)."""
    from upstream_fixtures import (
        SAM_MED2D_FROZEN,
        sam_med2d_inputs,
        sam_med2d_outputs,
        seeded_non_zero_state,
    )

    net = registry.models.create("sam-med2d", {"weights": "random", "device": "cpu"}).net.eval()
    state = seeded_non_zero_state(net)
    assert all((v != 0).all() for v in state.values() if v.is_floating_point())
    net.load_state_dict(state, strict=True)
    ours = sam_med2d_outputs(net, sam_med2d_inputs())
    frozen = np.load(SAM_MED2D_FROZEN)
    assert set(frozen.files) == set(ours)
    for key, value in ours.items():
        expected = frozen[key]
        assert np.abs(expected).max() > 1e-3, key  # real numbers, not zeros
        np.testing.assert_allclose(
            value,
            expected,
            rtol=0,
            atol=1e-5 * max(1.0, float(np.abs(expected).max())),
            err_msg=key,
        )
