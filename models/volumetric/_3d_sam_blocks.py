"""SAM-style 3D building blocks shared by SAM-Med3D and SegVol (torch modules, our own code).

Written from the published architectures' behaviour so that the public checkpoints load
strictly: module and parameter *names* follow the checkpoints (``q_proj``, ``lin1``,
``output_hypernetworks_mlps`` ...). Tensors are channel-first ``(B, C, D0, D1, D2)`` where
``D0, D1, D2`` are the three spatial axes of whatever array the model is fed (the adapters
document which canonical axis goes where). Point coordinates are ``(B, N, 3)`` voxel indices in
that same axis order.

Import this module only where torch is wanted (model constructors), never at registry time.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from intrabench.models.runtime._precision import autocast_disabled


class MLPBlock(nn.Module):
    """Linear -> activation -> Linear (keys ``lin1``, ``lin2``)."""

    def __init__(self, embedding_dim: int, mlp_dim: int, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__()
        self.lin1 = nn.Linear(embedding_dim, mlp_dim)
        self.lin2 = nn.Linear(mlp_dim, embedding_dim)
        self.act = act()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin2(self.act(self.lin1(x)))


class MLP(nn.Module):
    """``num_layers`` linear layers with ReLU between them (keys ``layers.{i}``)."""

    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, num_layers: int) -> None:
        super().__init__()
        dims_in = [input_dim] + [hidden_dim] * (num_layers - 1)
        dims_out = [hidden_dim] * (num_layers - 1) + [output_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims_in, dims_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < last:
                x = F.relu(x)
        return x


class LayerNormChannels(nn.Module):
    """LayerNorm over the channel axis of a channel-first tensor of any spatial rank.

    ``spatial_dims`` only decides how the affine parameters broadcast.
    """

    def __init__(self, num_channels: int, spatial_dims: int = 3, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))
        self.eps = eps
        self.view = (-1,) + (1,) * spatial_dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + self.eps)
        return self.weight.view(self.view) * x + self.bias.view(self.view)


class TokenAttention(nn.Module):
    """Multi-head attention whose q/k/v projections may shrink the width (``downsample_rate``)."""

    def __init__(self, embedding_dim: int, num_heads: int, downsample_rate: int = 1) -> None:
        super().__init__()
        self.internal_dim = embedding_dim // downsample_rate
        self.num_heads = num_heads
        if self.internal_dim % num_heads:
            raise ValueError(f"{num_heads} heads do not divide width {self.internal_dim}")
        self.q_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.k_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.v_proj = nn.Linear(embedding_dim, self.internal_dim)
        self.out_proj = nn.Linear(self.internal_dim, embedding_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        return x.reshape(b, n, self.num_heads, c // self.num_heads).transpose(1, 2)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (
            self._heads(self.q_proj(q)),
            self._heads(self.k_proj(k)),
            self._heads(self.v_proj(v)),
        )
        weights = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1)
        out = (weights @ v).transpose(1, 2)
        return self.out_proj(out.reshape(out.shape[0], out.shape[1], -1))


class TwoWayBlock(nn.Module):
    """Tokens self-attend, attend to the image, MLP, then the image attends to the tokens."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_dim: int,
        downsample_rate: int,
        skip_first_layer_pe: bool,
    ) -> None:
        super().__init__()
        self.self_attn = TokenAttention(dim, num_heads)
        self.norm1 = nn.LayerNorm(dim)
        self.cross_attn_token_to_image = TokenAttention(dim, num_heads, downsample_rate)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLPBlock(dim, mlp_dim, nn.ReLU)
        self.norm3 = nn.LayerNorm(dim)
        self.norm4 = nn.LayerNorm(dim)
        self.cross_attn_image_to_token = TokenAttention(dim, num_heads, downsample_rate)
        self.skip_first_layer_pe = skip_first_layer_pe

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        query_pe: torch.Tensor,
        key_pe: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.skip_first_layer_pe:
            queries = self.self_attn(queries, queries, queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q, q, queries)
        queries = self.norm1(queries)
        queries = self.norm2(
            queries + self.cross_attn_token_to_image(queries + query_pe, keys + key_pe, keys)
        )
        queries = self.norm3(queries + self.mlp(queries))
        keys = self.norm4(
            keys + self.cross_attn_image_to_token(keys + key_pe, queries + query_pe, queries)
        )
        return queries, keys


class TwoWayTransformer(nn.Module):
    """SAM's two-way transformer on a flattened 3D image embedding."""

    def __init__(
        self, depth: int, embedding_dim: int, num_heads: int, mlp_dim: int, downsample_rate: int = 2
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TwoWayBlock(embedding_dim, num_heads, mlp_dim, downsample_rate, i == 0)
            for i in range(depth)
        )
        self.final_attn_token_to_image = TokenAttention(embedding_dim, num_heads, downsample_rate)
        self.norm_final_attn = nn.LayerNorm(embedding_dim)

    def forward(
        self, image: torch.Tensor, image_pe: torch.Tensor, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys = image.flatten(2).transpose(1, 2)
        key_pe = image_pe.flatten(2).transpose(1, 2)
        queries = tokens
        for layer in self.layers:
            queries, keys = layer(queries, keys, tokens, key_pe)
        attended = self.final_attn_token_to_image(queries + tokens, keys + key_pe, keys)
        return self.norm_final_attn(queries + attended), keys


class RandomFourierPE(nn.Module):
    """Positional encoding with a fixed random Gaussian frequency matrix (3, F).

    Both published models use SAM's convention carried over to 3D, reproduced as trained:

    * dense grid of size (S0, S1, S2): the 3 normalised coordinates are stacked in the order
      (position along axis 1, along axis 0, along axis 2), each in (0, 1) at voxel centres;
    * a point (c0, c1, c2) (already shifted by +0.5) is normalised as
      (c0 / S1, c1 / S0, c2 / S2) of the *input image* size.

    ``harmonics``: "sin_cos" (SegVol, output 2F) or "sin_cos_sin" (SAM-Med3D, output 3F).
    """

    def __init__(self, num_feats: int, harmonics: str = "sin_cos") -> None:
        super().__init__()
        self.register_buffer("positional_encoding_gaussian_matrix", torch.randn((3, num_feats)))
        self.harmonics = harmonics

    def _encode(self, coords: torch.Tensor) -> torch.Tensor:
        # always float32: under bf16 autocast the phases (tens of radians) would lose ~0.1 rad
        with autocast_disabled(coords.device.type):
            matrix = self.positional_encoding_gaussian_matrix.float()
            projected = 2 * math.pi * ((2 * coords.float() - 1) @ matrix)
        parts = [torch.sin(projected), torch.cos(projected)]
        if self.harmonics == "sin_cos_sin":
            parts.append(torch.sin(projected))
        return torch.cat(parts, dim=-1)

    def dense(self, size: tuple[int, int, int]) -> torch.Tensor:
        """(1, C, S0, S1, S2) encoding of the embedding grid."""
        device = self.positional_encoding_gaussian_matrix.device
        axes = [(torch.arange(n, device=device, dtype=torch.float32) + 0.5) / n for n in size]
        a0, a1, a2 = torch.meshgrid(*axes, indexing="ij")
        return self._encode(torch.stack([a1, a0, a2], dim=-1)).permute(3, 0, 1, 2).unsqueeze(0)

    def points(self, coords: torch.Tensor, image_size: tuple[int, int, int]) -> torch.Tensor:
        """(B, N, C) encoding of (B, N, 3) voxel coordinates (pixel-centre shift applied here)."""
        coords = coords.float() + 0.5
        scale = torch.tensor(
            [image_size[1], image_size[0], image_size[2]], dtype=torch.float32, device=coords.device
        )
        return self._encode(coords / scale)


def mask_downscaling(mask_in_chans: int, dim: int, spatial_dims: int) -> nn.Sequential:
    """SAM's mask encoder: two stride-2 convolutions (each + channel LayerNorm + GELU) to
    ``mask_in_chans``, then a 1x1 convolution to ``dim``; 2D or 3D. The layer order is the
    published one, so checkpoint keys (``mask_downscaling.0.weight``...) match."""
    conv = nn.Conv3d if spatial_dims == 3 else nn.Conv2d
    quarter = mask_in_chans // 4
    return nn.Sequential(
        conv(1, quarter, kernel_size=2, stride=2),
        LayerNormChannels(quarter, spatial_dims=spatial_dims),
        nn.GELU(),
        conv(quarter, mask_in_chans, kernel_size=2, stride=2),
        LayerNormChannels(mask_in_chans, spatial_dims=spatial_dims),
        nn.GELU(),
        conv(mask_in_chans, dim, kernel_size=1),
    )


def embed_sparse(
    pe: RandomFourierPE,
    image_size: tuple[int, int, int],
    point_embeddings: nn.ModuleList,
    not_a_point: nn.Embedding,
    points: torch.Tensor | None,
    labels: torch.Tensor | None,
    boxes: torch.Tensor | None,
    batch: int,
    dim: int,
) -> torch.Tensor:
    """Sparse prompt tokens (B, N, C) as SAM builds them.

    Points get the positive/negative embedding by label (1/0); label -1 marks a padding point
    (SAM appends one when no box is given). Boxes (B, 6) = (min corner, max corner) get the two
    corner embeddings ``point_embeddings[2]`` and ``[3]``.
    """
    device = not_a_point.weight.device
    tokens = [torch.empty((batch, 0, dim), device=device)]
    if points is not None:
        labels = labels.float()
        if boxes is None:
            points = torch.cat([points, torch.zeros((batch, 1, 3), device=points.device)], 1)
            labels = torch.cat([labels, -torch.ones((batch, 1), device=labels.device)], 1)
        embedded = pe.points(points, image_size)
        embedded = torch.where((labels == -1)[..., None], torch.zeros_like(embedded), embedded)
        embedded = embedded + (labels == -1)[..., None] * not_a_point.weight
        embedded = embedded + (labels == 0)[..., None] * point_embeddings[0].weight
        embedded = embedded + (labels == 1)[..., None] * point_embeddings[1].weight
        tokens.append(embedded)
    if boxes is not None:
        corners = pe.points(boxes.reshape(-1, 2, 3), image_size)
        corners = (
            corners
            + torch.stack([point_embeddings[2].weight[0], point_embeddings[3].weight[0]])[None]
        )
        tokens.append(corners)
    return torch.cat(tokens, dim=1)


def decode_masks(
    transformer: TwoWayTransformer,
    iou_token: nn.Embedding,
    mask_tokens: nn.Embedding,
    output_upscaling: nn.Module,
    hypernetworks: nn.ModuleList,
    iou_head: MLP,
    image_embedding: torch.Tensor,
    image_pe: torch.Tensor,
    sparse: torch.Tensor,
    dense: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SAM's mask prediction: returns (masks (B, M, ...), iou (B, M), upscaled embedding)."""
    output_tokens = torch.cat([iou_token.weight, mask_tokens.weight], dim=0)
    tokens = torch.cat([output_tokens[None].expand(sparse.shape[0], -1, -1), sparse], dim=1)
    src = image_embedding
    if src.shape[0] != tokens.shape[0]:
        src = torch.repeat_interleave(src, tokens.shape[0], dim=0)
    src = src + dense
    pos = torch.repeat_interleave(image_pe, tokens.shape[0], dim=0)
    b, c = src.shape[:2]
    spatial = src.shape[2:]
    hs, src = transformer(src, pos, tokens)
    n_masks = mask_tokens.weight.shape[0]
    upscaled = output_upscaling(src.transpose(1, 2).reshape(b, c, *spatial))
    hyper = torch.stack([hypernetworks[i](hs[:, 1 + i]) for i in range(n_masks)], dim=1)
    b, c = upscaled.shape[:2]
    masks = (hyper @ upscaled.reshape(b, c, -1)).reshape(b, n_masks, *upscaled.shape[2:])
    return masks, iou_head(hs[:, 0]), upscaled
