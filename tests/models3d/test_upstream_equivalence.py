"""The SAM-Med3D image encoder computes what its checkpoints were trained to compute.

Every parameter is set to random non-zero values, relative-position tables included (they
start at zero, which hid the broadcasting difference from earlier checks), and the same state
dict is loaded strictly into our encoder and into upstream's (``medim``'s ``sam_med3d.py``, the
code SAM-Med3D's checkpoints are published with; a test dependency only).
"""

from __future__ import annotations

import pytest
import torch

from intrabench.models.volumetric import _sammed3d_arch as sam_arch


def _random_state(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in module.state_dict().items():
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64) * 0.05
        base = 1.0 if key.endswith("weight") and value.ndim == 1 else 0.0  # norms near 1
        state[key] = (base + noise).to(value.dtype)
    return state


def _attention_by_definition(q, k, scale, rel_d, rel_h, rel_w):
    """Upstream's decomposed relative-position attention logits, element by element.

    q, k: (N, D, H, W, C) with D == H == W; rel_*: (2D - 1, C) tables. With Rd[i, j] =
    rel_d[i - j + D - 1] and r_X[n, a, b, c, j] = q[n, a, b, c] . R_X[axis index, j], upstream
    adds, to the logit of query (a, b, c) and key (i, j, l): r_d[a, b, c, l] + r_h[a, b, i, l]
    + r_w[a, b, j, l]. The textbook decomposition adds r_d[a, b, c, i] + r_h[a, b, c, j]
    + r_w[a, b, c, l]: upstream's indexing of the 5-D terms puts every term's key index on the
    key's w axis, and the h and w terms' query index on the key's d and h axes.
    """
    n, d, h, w, _ = q.shape
    offsets = torch.arange(d)
    table = (offsets[:, None] - offsets[None, :]) + d - 1
    Rd, Rh, Rw = rel_d[table], rel_h[table], rel_w[table]
    logits = torch.einsum("nabcx,nijlx->nabcijl", q * scale, k)
    r_d = torch.einsum("nabcx,aix->nabci", q, Rd)
    r_h = torch.einsum("nabcx,bjx->nabcj", q, Rh)
    r_w = torch.einsum("nabcx,clx->nabcl", q, Rw)
    out = logits.clone()
    for a in range(d):
        for b in range(h):
            for c in range(w):
                for i in range(d):
                    for j in range(h):
                        for l in range(w):  # noqa: E741 - the key's w index
                            out[:, a, b, c, i, j, l] += (
                                r_d[:, a, b, c, l] + r_h[:, a, b, i, l] + r_w[:, a, b, j, l]
                            )
    return out.reshape(n, d * h * w, d * h * w)


def test_attention_adds_relative_positions_as_upstream_broadcasts_them():
    torch.manual_seed(0)
    attention = sam_arch.Attention3D(dim=8, num_heads=2, grid=3).double()
    with torch.no_grad():
        for table in (attention.rel_pos_d, attention.rel_pos_h, attention.rel_pos_w):
            table.normal_(0, 0.5)
    x = torch.randn(1, 3, 3, 3, 8, dtype=torch.float64)
    captured = {}

    def softmax_spy(self, dim=-1):
        captured["logits"] = self.clone()
        return torch.softmax(self, dim)

    qkv = attention.qkv(x).reshape(1, 27, 3, 2, -1).permute(2, 0, 3, 1, 4)
    q, k, _ = qkv.reshape(3, 2, 27, -1).unbind(0)
    expected = _attention_by_definition(
        q.reshape(2, 3, 3, 3, -1),
        k.reshape(2, 3, 3, 3, -1),
        attention.scale,
        attention.rel_pos_d,
        attention.rel_pos_h,
        attention.rel_pos_w,
    )
    original = torch.Tensor.softmax
    torch.Tensor.softmax = softmax_spy
    try:
        attention(x)
    finally:
        torch.Tensor.softmax = original
    torch.testing.assert_close(captured["logits"], expected, rtol=0, atol=1e-12)


def test_image_encoder_equals_medims_with_non_zero_relative_positions():
    medim_sam = pytest.importorskip("medim.models.sam_med3d")
    cfg = sam_arch.TINY
    upstream = medim_sam.ImageEncoderViT3D(
        img_size=cfg.image_size,
        patch_size=cfg.patch_size,
        embed_dim=cfg.embed_dim,
        depth=cfg.depth,
        num_heads=cfg.num_heads,
        mlp_ratio=4,
        out_chans=cfg.prompt_dim,
        qkv_bias=True,
        norm_layer=lambda dim: torch.nn.LayerNorm(dim, eps=1e-6),
        use_rel_pos=True,
        global_attn_indexes=cfg.global_attn_indexes,
        window_size=cfg.window_size,
    ).eval()
    ours = sam_arch.ImageEncoderViT3D(cfg).eval()
    state = _random_state(upstream, seed=1)
    assert all(v.abs().min() > 0 for k, v in state.items() if "rel_pos" in k)
    upstream.load_state_dict(state, strict=True)
    ours.load_state_dict(state, strict=True)
    image = torch.randn(
        1,
        1,
        cfg.image_size,
        cfg.image_size,
        cfg.image_size,
        generator=torch.Generator().manual_seed(2),
    )
    with torch.no_grad():
        expected, got = upstream(image), ours(image)
    assert expected.abs().max() > 0.1  # a real output, not zeros
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


def test_segvol_prompt_encoder_and_decoder_equal_upstreams_with_every_tensor_non_zero():
    """SegVol's own ``segment_anything_volumetric`` modules (its repository; no package) were
    run by ``scripts/freeze_upstream_outputs.py`` with one seeded state dict, every tensor
    non-zero, on a seeded embedding with clicks and a box; ours must give the frozen outputs
    (bit-identical when frozen). The image encoder is MONAI's ``ViT`` in both."""
    import numpy as np
    from upstream_fixtures import (
        SEGVOL_FROZEN,
        seeded_non_zero_state,
        segvol_inputs,
        segvol_outputs,
    )

    from intrabench.models.volumetric._segvol_arch import (
        FULL,
        SegVolMaskDecoder,
        SegVolPromptEncoder,
    )

    prompt_encoder, mask_decoder = SegVolPromptEncoder(FULL).eval(), SegVolMaskDecoder(FULL).eval()
    for module in (prompt_encoder, mask_decoder):
        module.load_state_dict(seeded_non_zero_state(module), strict=True)
    ours = segvol_outputs(prompt_encoder, mask_decoder, segvol_inputs(), upstream=False)
    frozen = np.load(SEGVOL_FROZEN)
    for key, value in ours.items():
        expected = frozen[key]
        assert np.abs(expected).max() > 1e-3, key
        np.testing.assert_allclose(
            value,
            expected,
            rtol=0,
            atol=1e-5 * max(1.0, float(np.abs(expected).max())),
            err_msg=key,
        )


def test_full_sam_med3d_equals_medims_with_every_tensor_non_zero():
    """The whole full-size network (encoder, prompt encoder, decoder with clicks and a mask
    input) against ``medim``'s ``build_sam3D_vit_b_ori``, one seeded state dict for both."""
    medim_sam = pytest.importorskip("medim.models.sam_med3d")
    from upstream_fixtures import seeded_non_zero_state

    upstream = medim_sam.build_sam3D_vit_b_ori(pretrained=False).eval()
    ours = sam_arch.SamMed3DNet(sam_arch.FULL).eval()
    state = seeded_non_zero_state(ours)
    assert set(state) == set(upstream.state_dict())
    upstream.load_state_dict(state, strict=True)
    ours.load_state_dict(state, strict=True)
    generator = torch.Generator().manual_seed(3)
    image = torch.randn(1, 1, 128, 128, 128, generator=generator)
    coords = torch.tensor([[[64.0, 60.0, 70.0], [30.0, 90.0, 50.0]]])
    labels = torch.tensor([[1, 0]])
    mask_input = torch.randn(1, 1, 32, 32, 32, generator=generator)
    with torch.no_grad():
        embedding = ours.image_encoder(image)
        torch.testing.assert_close(embedding, upstream.image_encoder(image), rtol=0, atol=1e-5)
        sparse, dense = upstream.prompt_encoder(
            points=(coords, labels), boxes=None, masks=mask_input
        )
        expected, _ = upstream.mask_decoder(
            image_embeddings=embedding,
            image_pe=upstream.prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings=sparse,
            dense_prompt_embeddings=dense,
            multimask_output=False,
        )
        got = ours.decode(embedding, coords, labels, mask_input)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5 * float(expected.abs().max()))
