"""SAM-Med3D (``vit_b_ori``) architecture, our own code, key-compatible with the public
``sam_med3d.pth`` / ``sam_med3d_turbo.pth`` ``model_state_dict``.

Full size (:data:`FULL`): ViT image encoder, embed 768, depth 12, 12 heads, windowed attention
(window 14, which pads the 8^3 token grid to 14^3) with global attention in blocks 2, 5, 8, 11,
decomposed relative positions, patch 16, input 128^3, neck to 384 channels; prompt encoder on
the 8^3 embedding (2 point embeddings, mask input 32^3); mask decoder at 384 with 4 mask tokens.
324 state-dict tensors, ~100.5 M parameters.

Array convention: input ``(B, 1, S, S, S)``; point coordinates ``(B, N, 3)`` voxel indices in
the same axis order as the input tensor's spatial axes; low-resolution logits
``(B, 1, S/4, S/4, S/4)``. (The adapter feeds the crop in (x, y, z) order: see sam_med3d.py.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from intrabench.models.volumetric._3d_sam_blocks import (
    MLP,
    LayerNormChannels,
    MLPBlock,
    RandomFourierPE,
    TwoWayTransformer,
    decode_masks,
    embed_sparse,
    mask_downscaling,
)


@dataclass(frozen=True)
class SamMed3DConfig:
    """Architecture hyper-parameters (the full model unless stated)."""

    image_size: int = 128
    patch_size: int = 16
    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    global_attn_indexes: tuple[int, ...] = (2, 5, 8, 11)
    window_size: int = 14
    prompt_dim: int = 384
    mask_in_chans: int = 16
    decoder_heads: int = 8
    decoder_mlp_dim: int = 2048
    iou_head_hidden_dim: int = 256
    num_multimask_outputs: int = 3
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def embedding_size(self) -> int:
        return self.image_size // self.patch_size

    @property
    def low_res_size(self) -> int:
        return self.embedding_size * 4


FULL = SamMed3DConfig()
#: tests and timing only: same module structure, random weights, tiny widths, 64^3 input
TINY = SamMed3DConfig(
    image_size=64,
    patch_size=16,
    embed_dim=32,
    depth=2,
    num_heads=2,
    global_attn_indexes=(1,),
    window_size=3,
    prompt_dim=24,
    mask_in_chans=8,
    decoder_heads=2,
    decoder_mlp_dim=32,
    iou_head_hidden_dim=16,
)


def _relative_table(table: torch.Tensor, size: int) -> torch.Tensor:
    """(size, size, C) relative-position embeddings looked up (interpolated if needed)."""
    length = 2 * size - 1
    if table.shape[0] != length:
        table = F.interpolate(table.T[None], size=length, mode="linear")[0].T
    offsets = torch.arange(size, device=table.device)
    return table[(offsets[:, None] - offsets[None, :]) + size - 1]


class Attention3D(nn.Module):
    """Self-attention over a (B, D, H, W, C) token grid with decomposed relative positions."""

    def __init__(self, dim: int, num_heads: int, grid: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.rel_pos_d = nn.Parameter(torch.zeros(2 * grid - 1, head_dim))
        self.rel_pos_h = nn.Parameter(torch.zeros(2 * grid - 1, head_dim))
        self.rel_pos_w = nn.Parameter(torch.zeros(2 * grid - 1, head_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, d, h, w, _ = x.shape
        n = d * h * w
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.reshape(3, b * self.num_heads, n, -1).unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        rd = _relative_table(self.rel_pos_d, d)
        rh = _relative_table(self.rel_pos_h, h)
        rw = _relative_table(self.rel_pos_w, w)
        grid_q = q.reshape(-1, d, h, w, q.shape[-1])
        bias_d = torch.einsum("bdhwc,dkc->bdhwk", grid_q, rd)
        bias_h = torch.einsum("bdhwc,hkc->bdhwk", grid_q, rh)
        bias_w = torch.einsum("bdhwc,wkc->bdhwk", grid_q, rw)
        # The published checkpoints were trained with upstream's broadcasting (SAM-Med3D's
        # image_encoder3D.py, medim's sam_med3d.py), which is not the textbook decomposition:
        # indexing the 5-D (b, d, h, w, k) terms as below puts every term's key index k on the
        # key's w axis, and the h and w terms' query w index on the key's d and h axes. That
        # is the function those weights compute (it needs d == h == w, true in cubic windows
        # and grids); the textbook form changes the encoder by 1.7e-2 with non-zero tables.
        # tests/models3d/test_upstream_equivalence.py writes the sum out element by element.
        attn = (
            attn.view(-1, d, h, w, d, h, w)
            + bias_d[:, :, :, :, None, None]
            + bias_h[:, :, :, None, :, None]
            + bias_w[:, :, :, None, None, :]
        ).view(-1, n, n)
        out = attn.softmax(dim=-1) @ v
        out = out.view(b, self.num_heads, d, h, w, -1).permute(0, 2, 3, 4, 1, 5)
        return self.proj(out.reshape(b, d, h, w, -1))


def _to_windows(x: torch.Tensor, size: int) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """(B, D, H, W, C) -> (B * windows, size, size, size, C), zero-padding up to multiples."""
    b, d, h, w, c = x.shape
    pads = [(size - n % size) % size for n in (d, h, w)]
    if any(pads):
        x = F.pad(x, (0, 0, 0, pads[2], 0, pads[1], 0, pads[0]))
    dp, hp, wp = d + pads[0], h + pads[1], w + pads[2]
    x = x.view(b, dp // size, size, hp // size, size, wp // size, size, c)
    windows = x.permute(0, 1, 3, 5, 2, 4, 6, 7).reshape(-1, size, size, size, c)
    return windows, (dp, hp, wp)


def _from_windows(
    windows: torch.Tensor, size: int, padded: tuple[int, int, int], original: tuple[int, int, int]
) -> torch.Tensor:
    dp, hp, wp = padded
    b = windows.shape[0] // ((dp // size) * (hp // size) * (wp // size))
    x = windows.view(b, dp // size, hp // size, wp // size, size, size, size, -1)
    x = x.permute(0, 1, 4, 2, 5, 3, 6, 7).reshape(b, dp, hp, wp, -1)
    d, h, w = original
    return x[:, :d, :h, :w].contiguous()


class Block3D(nn.Module):
    """Pre-norm transformer block; windowed attention when ``window_size`` > 0."""

    def __init__(self, dim: int, num_heads: int, window_size: int, grid: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention3D(dim, num_heads, window_size if window_size else grid)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLPBlock(dim, dim * 4)
        self.window_size = window_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.norm1(x)
        if self.window_size:
            spatial = tuple(x.shape[1:4])
            windows, padded = _to_windows(x, self.window_size)
            x = _from_windows(self.attn(windows), self.window_size, padded, spatial)
        else:
            x = self.attn(x)
        x = shortcut + x
        return x + self.mlp(self.norm2(x))


class PatchEmbed3D(nn.Module):
    def __init__(self, patch: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv3d(1, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).permute(0, 2, 3, 4, 1)


class ImageEncoderViT3D(nn.Module):
    """(B, 1, S, S, S) image -> (B, prompt_dim, S/16, S/16, S/16) embedding."""

    def __init__(self, cfg: SamMed3DConfig) -> None:
        super().__init__()
        grid = cfg.embedding_size
        self.img_size = cfg.image_size
        self.patch_embed = PatchEmbed3D(cfg.patch_size, cfg.embed_dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, grid, grid, grid, cfg.embed_dim))
        self.blocks = nn.ModuleList(
            Block3D(
                cfg.embed_dim,
                cfg.num_heads,
                0 if i in cfg.global_attn_indexes else cfg.window_size,
                grid,
            )
            for i in range(cfg.depth)
        )
        self.neck = nn.Sequential(
            nn.Conv3d(cfg.embed_dim, cfg.prompt_dim, kernel_size=1, bias=False),
            LayerNormChannels(cfg.prompt_dim),
            nn.Conv3d(cfg.prompt_dim, cfg.prompt_dim, kernel_size=3, padding=1, bias=False),
            LayerNormChannels(cfg.prompt_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.neck(x.permute(0, 4, 1, 2, 3))


class PromptEncoder3D(nn.Module):
    """Points (pos/neg) and a low-res mask -> sparse tokens and a dense embedding."""

    def __init__(self, cfg: SamMed3DConfig) -> None:
        super().__init__()
        dim = cfg.prompt_dim
        self.embed_dim = dim
        self.grid = (cfg.embedding_size,) * 3
        self.input_image_size = (cfg.image_size,) * 3
        self.pe_layer = RandomFourierPE(dim // 3, harmonics="sin_cos_sin")
        self.point_embeddings = nn.ModuleList(nn.Embedding(1, dim) for _ in range(2))
        self.not_a_point_embed = nn.Embedding(1, dim)
        self.mask_downscaling = mask_downscaling(cfg.mask_in_chans, dim, spatial_dims=3)
        self.no_mask_embed = nn.Embedding(1, dim)

    def get_dense_pe(self) -> torch.Tensor:
        return self.pe_layer.dense(self.grid)

    def forward(
        self, points: torch.Tensor | None, labels: torch.Tensor | None, masks: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch = (
            points.shape[0] if points is not None else (masks.shape[0] if masks is not None else 1)
        )
        sparse = embed_sparse(
            self.pe_layer,
            self.input_image_size,
            self.point_embeddings,
            self.not_a_point_embed,
            points,
            labels,
            None,
            batch,
            self.embed_dim,
        )
        if masks is not None:
            dense = self.mask_downscaling(masks)
        else:
            dense = self.no_mask_embed.weight.reshape(1, -1, 1, 1, 1).expand(batch, -1, *self.grid)
        return sparse, dense


class MaskDecoder3D(nn.Module):
    def __init__(self, cfg: SamMed3DConfig) -> None:
        super().__init__()
        dim = cfg.prompt_dim
        self.transformer = TwoWayTransformer(2, dim, cfg.decoder_heads, cfg.decoder_mlp_dim)
        self.num_mask_tokens = cfg.num_multimask_outputs + 1
        self.iou_token = nn.Embedding(1, dim)
        self.mask_tokens = nn.Embedding(self.num_mask_tokens, dim)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose3d(dim, dim // 4, kernel_size=2, stride=2),
            LayerNormChannels(dim // 4),
            nn.GELU(),
            nn.ConvTranspose3d(dim // 4, dim // 8, kernel_size=2, stride=2),
            nn.GELU(),
        )
        self.output_hypernetworks_mlps = nn.ModuleList(
            MLP(dim, dim, dim // 8, 3) for _ in range(self.num_mask_tokens)
        )
        self.iou_prediction_head = MLP(dim, cfg.iou_head_hidden_dim, self.num_mask_tokens, 3)

    def forward(
        self,
        image_embedding: torch.Tensor,
        image_pe: torch.Tensor,
        sparse: torch.Tensor,
        dense: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Single-mask output (token 0), as SAM-Med3D is used: ((B, 1, s, s, s), (B, 1))."""
        masks, iou, _ = decode_masks(
            self.transformer,
            self.iou_token,
            self.mask_tokens,
            self.output_upscaling,
            self.output_hypernetworks_mlps,
            self.iou_prediction_head,
            image_embedding,
            image_pe,
            sparse,
            dense,
        )
        return masks[:, :1], iou[:, :1]


class SamMed3DNet(nn.Module):
    """The three parts under the checkpoint's top-level names."""

    def __init__(self, cfg: SamMed3DConfig = FULL) -> None:
        super().__init__()
        self.config = cfg
        self.image_encoder = ImageEncoderViT3D(cfg)
        self.prompt_encoder = PromptEncoder3D(cfg)
        self.mask_decoder = MaskDecoder3D(cfg)

    def decode(
        self,
        embedding: torch.Tensor,
        points: torch.Tensor | None,
        labels: torch.Tensor | None,
        mask_input: torch.Tensor | None,
    ) -> torch.Tensor:
        """Low-res logits (B, 1, s, s, s) from a cached image embedding and prompts."""
        sparse, dense = self.prompt_encoder(points, labels, mask_input)
        logits, _ = self.mask_decoder(embedding, self.prompt_encoder.get_dense_pe(), sparse, dense)
        return logits
