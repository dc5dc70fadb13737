"""SegVol architecture (image encoder, 3D prompt encoder, mask decoder), our own code, written so
the public ``SegVol_v1.pth`` (``{'model': 'module.'-prefixed state dict}``) loads strictly.

* Image encoder: ``monai.networks.nets.ViT`` (in 1 channel, img (32, 256, 256), patch (4, 16, 16),
  hidden 768, mlp 3072, 12 layers, 12 heads, ``proj_type="perceptron"``, no classification
  token). MONAI >= 1.4 adds an unused ``norm_cross_attn`` LayerNorm to every block (absent
  from the checkpoint, trained with MONAI 0.9); it is replaced by an Identity (no parameters),
  which is exactly the computation of a block without cross-attention.
* Prompt encoder: SAM-like in 3D at 768: random Fourier PE (3 x 384), 4 point embeddings
  (negative, positive, box min corner, box max corner), a not-a-point embedding, a no-mask
  embedding and a (2D, unused at inference) mask-downscaling stack kept for the key set.
* Mask decoder: two-way transformer (depth 2, 8 heads, mlp 2048), 4 mask tokens, upscaling by
  two ConvTranspose3d x2 with a full ``LayerNorm((192, 16, 32, 32))`` between them, and the
  text-alignment projection ``txt_align_upscaled_embedding`` (768 -> 96).
* The CLIP text encoder (``text_encoder.*``) is not built: text prompts are optional and not
  used by the benchmark. Its checkpoint keys are listed by :func:`text_encoder_keys` and are
  the only keys dropped before the strict load.

Array convention: input ``(B, 1, D0, D1, D2)`` with (D0, D1, D2) = (32, 256, 256) for the full
model (the adapter feeds canonical (z, y, x)); points ``(B, N, 3)`` and boxes
``(B, 6) = (min d0, d1, d2, max d0, d1, d2)`` in voxel indices of that input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from intrabench.models.volumetric._3d_sam_blocks import (
    MLP,
    RandomFourierPE,
    TwoWayTransformer,
    decode_masks,
    embed_sparse,
    mask_downscaling,
)


@dataclass(frozen=True)
class SegVolConfig:
    spatial_size: tuple[int, int, int] = (32, 256, 256)
    patch_size: tuple[int, int, int] = (4, 16, 16)
    hidden_size: int = 768
    mlp_dim: int = 3072
    num_layers: int = 12
    num_heads: int = 12
    decoder_heads: int = 8
    decoder_mlp_dim: int = 2048
    iou_head_hidden_dim: int = 256
    mask_in_chans: int = 16
    num_multimask_outputs: int = 3

    @property
    def feature_shape(self) -> tuple[int, int, int]:
        return tuple(s // p for s, p in zip(self.spatial_size, self.patch_size))


FULL = SegVolConfig()
#: tests and timing only: same module structure, random weights, tiny widths, (32, 160, 160)
#: input in 4^3 patches of (8, 40, 40) voxels (one window covers each demo volume)
TINY = SegVolConfig(
    spatial_size=(32, 160, 160),
    patch_size=(8, 40, 40),
    hidden_size=32,
    mlp_dim=64,
    num_layers=2,
    num_heads=2,
    decoder_heads=2,
    decoder_mlp_dim=32,
    iou_head_hidden_dim=16,
    mask_in_chans=8,
)


def text_encoder_keys(num_layers: int = 12) -> list[str]:
    """Checkpoint keys of SegVol's CLIP text encoder (default ``CLIPTextConfig``) + ``dim_align``.

    Includes ``embeddings.position_ids``, a persistent buffer in older ``transformers``.
    """
    base = "text_encoder.clip_text_model.text_model."
    keys = [
        base + "embeddings.token_embedding.weight",
        base + "embeddings.position_embedding.weight",
        base + "embeddings.position_ids",
        base + "final_layer_norm.weight",
        base + "final_layer_norm.bias",
        "text_encoder.dim_align.weight",
        "text_encoder.dim_align.bias",
    ]
    for i in range(num_layers):
        layer = f"{base}encoder.layers.{i}."
        for part in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.out_proj",
            "layer_norm1",
            "mlp.fc1",
            "mlp.fc2",
            "layer_norm2",
        ):
            keys += [f"{layer}{part}.weight", f"{layer}{part}.bias"]
    return keys


def build_image_encoder(cfg: SegVolConfig) -> nn.Module:
    from monai.networks.nets import ViT

    vit = ViT(
        in_channels=1,
        img_size=cfg.spatial_size,
        patch_size=cfg.patch_size,
        hidden_size=cfg.hidden_size,
        mlp_dim=cfg.mlp_dim,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        proj_type="perceptron",
        classification=False,
        dropout_rate=0.0,
    )
    for block in vit.blocks:
        if getattr(block, "with_cross_attention", False):
            raise RuntimeError("unexpected cross-attention block in MONAI ViT")
        if hasattr(block, "norm_cross_attn"):
            block.norm_cross_attn = nn.Identity()
    return vit


class SegVolPromptEncoder(nn.Module):
    def __init__(self, cfg: SegVolConfig) -> None:
        super().__init__()
        dim = cfg.hidden_size
        self.embed_dim = dim
        self.grid = cfg.feature_shape
        self.input_image_size = cfg.spatial_size
        self.pe_layer = RandomFourierPE(dim // 2, harmonics="sin_cos")
        self.point_embeddings = nn.ModuleList(nn.Embedding(1, dim) for _ in range(4))
        self.not_a_point_embed = nn.Embedding(1, dim)
        # 2D as published (masks are never given; the weights exist in the checkpoint)
        self.mask_downscaling = mask_downscaling(cfg.mask_in_chans, dim, spatial_dims=2)
        self.no_mask_embed = nn.Embedding(1, dim)

    def get_dense_pe(self) -> torch.Tensor:
        return self.pe_layer.dense(self.grid)

    def forward(
        self, points: torch.Tensor | None, labels: torch.Tensor | None, boxes: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        batch = (
            points.shape[0] if points is not None else (boxes.shape[0] if boxes is not None else 1)
        )
        sparse = embed_sparse(
            self.pe_layer,
            self.input_image_size,
            self.point_embeddings,
            self.not_a_point_embed,
            points,
            labels,
            boxes,
            batch,
            self.embed_dim,
        )
        dense = self.no_mask_embed.weight.reshape(1, -1, 1, 1, 1).expand(batch, -1, *self.grid)
        return sparse, dense


class SegVolMaskDecoder(nn.Module):
    def __init__(self, cfg: SegVolConfig) -> None:
        super().__init__()
        dim = cfg.hidden_size
        self.transformer = TwoWayTransformer(2, dim, cfg.decoder_heads, cfg.decoder_mlp_dim)
        self.num_mask_tokens = cfg.num_multimask_outputs + 1
        self.iou_token = nn.Embedding(1, dim)
        self.mask_tokens = nn.Embedding(self.num_mask_tokens, dim)
        upscaled = tuple(2 * f for f in cfg.feature_shape)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose3d(dim, dim // 4, kernel_size=2, stride=2),
            nn.LayerNorm((dim // 4, *upscaled)),
            nn.GELU(),
            nn.ConvTranspose3d(dim // 4, dim // 8, kernel_size=2, stride=2),
            nn.GELU(),
        )
        self.output_hypernetworks_mlps = nn.ModuleList(
            MLP(dim, dim, dim // 8, 3) for _ in range(self.num_mask_tokens)
        )
        self.iou_prediction_head = MLP(dim, cfg.iou_head_hidden_dim, self.num_mask_tokens, 3)
        self.txt_align_upscaled_embedding = nn.Linear(dim, dim // 8)

    def forward(
        self,
        image_embedding: torch.Tensor,
        image_pe: torch.Tensor,
        sparse: torch.Tensor,
        dense: torch.Tensor,
    ) -> torch.Tensor:
        """Single-mask low-resolution logits (B, 1, 4*F0, 4*F1, 4*F2); no text term."""
        masks, _, _ = decode_masks(
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
        return masks[:, :1]


class SegVolNet(nn.Module):
    """SegVol without its text encoder, under the checkpoint's top-level names."""

    def __init__(self, cfg: SegVolConfig = FULL) -> None:
        super().__init__()
        self.config = cfg
        self.image_encoder = build_image_encoder(cfg)
        self.prompt_encoder = SegVolPromptEncoder(cfg)
        self.mask_decoder = SegVolMaskDecoder(cfg)

    def encode(self, image: torch.Tensor) -> torch.Tensor:
        """(B, 1, *spatial_size) -> (B, hidden, *feature_shape)."""
        tokens, _ = self.image_encoder(image)
        return tokens.transpose(1, 2).reshape(image.shape[0], -1, *self.config.feature_shape)

    def decode(
        self,
        embedding: torch.Tensor,
        points: torch.Tensor | None,
        labels: torch.Tensor | None,
        boxes: torch.Tensor | None,
    ) -> torch.Tensor:
        """Logits (B, 1, *spatial_size): decoder output upsampled trilinearly, as upstream."""
        sparse, dense = self.prompt_encoder(points, labels, boxes)
        low = self.mask_decoder(embedding, self.prompt_encoder.get_dense_pe(), sparse, dense)
        return F.interpolate(
            low, size=self.config.spatial_size, mode="trilinear", align_corners=False
        )
