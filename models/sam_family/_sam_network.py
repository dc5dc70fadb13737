"""segment_anything's network for SAM, MedSAM and SAM-Med2D: the configurations, the builder,
and the prompt, decode and feedback helpers shared by their adapters.

Array conventions: points arrive as (N, 2) (y, x) voxel indices and go to the network as
(x, y) in its input frame; inclusive boxes (y_min, x_min, y_max, x_max) go as (x_min, y_min,
x_max, y_max); low-resolution logits handed back between steps are float32 (h_low, w_low).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from intrabench.types import SlicePrompt

#: SAM's pixel statistics (0..255 RGB), also used by SAM-Med2D
SAM_PIXEL_MEAN = (123.675, 116.28, 103.53)
SAM_PIXEL_STD = (58.395, 57.12, 57.375)


@dataclass(frozen=True)
class SamConfig:
    """Hyper-parameters of a segment_anything ``Sam`` (full-size or tiny)."""

    embed_dim: int
    depth: int
    num_heads: int
    global_attn_indexes: tuple[int, ...]
    image_size: int = 1024
    patch_size: int = 16
    window_size: int = 14
    prompt_dim: int = 256
    decoder_mlp_dim: int = 2048
    decoder_heads: int = 8
    iou_hidden_dim: int = 256
    adapter: bool = False


SAM_CONFIGS: dict[str, SamConfig] = {
    "vit_h": SamConfig(1280, 32, 16, (7, 15, 23, 31)),
    "vit_l": SamConfig(1024, 24, 16, (5, 11, 17, 23)),
    "vit_b": SamConfig(768, 12, 12, (2, 5, 8, 11)),
}

#: a small configuration of the same architecture, for tests and timing only
TINY_SAM = SamConfig(
    embed_dim=64,
    depth=2,
    num_heads=2,
    global_attn_indexes=(1,),
    image_size=256,
    window_size=8,
    prompt_dim=32,
    decoder_mlp_dim=64,
    decoder_heads=2,
    iou_hidden_dim=32,
)


def build_sam(config: SamConfig) -> Any:
    """A segment_anything ``Sam`` for ``config`` (random weights); with ``config.adapter`` every
    encoder block is a SAM-Med2D :class:`~intrabench.models.sam_family.sam_med2d.AdapterBlock`."""
    from functools import partial

    import torch

    from intrabench.models.sam_family._segment_anything import modeling

    # the network's modules only: segment_anything's own __init__ imports torchvision
    sam_modules = modeling()
    ImageEncoderViT, MaskDecoder = sam_modules.ImageEncoderViT, sam_modules.MaskDecoder  # noqa: N806
    PromptEncoder, Sam = sam_modules.PromptEncoder, sam_modules.Sam  # noqa: N806
    TwoWayTransformer = sam_modules.TwoWayTransformer  # noqa: N806

    grid = config.image_size // config.patch_size
    norm = partial(torch.nn.LayerNorm, eps=1e-6)
    encoder = ImageEncoderViT(
        depth=0 if config.adapter else config.depth,
        embed_dim=config.embed_dim,
        img_size=config.image_size,
        mlp_ratio=4,
        norm_layer=norm,
        num_heads=config.num_heads,
        patch_size=config.patch_size,
        qkv_bias=True,
        use_rel_pos=True,
        global_attn_indexes=config.global_attn_indexes,
        window_size=config.window_size,
        out_chans=config.prompt_dim,
    )
    if config.adapter:
        from intrabench.models.sam_family._sam_med2d_adapter import adapter_classes

        AdapterBlock = adapter_classes()[1]  # noqa: N806 - a class
        for index in range(config.depth):
            window = 0 if index in config.global_attn_indexes else config.window_size
            encoder.blocks.append(
                AdapterBlock(
                    dim=config.embed_dim,
                    num_heads=config.num_heads,
                    mlp_ratio=4,
                    qkv_bias=True,
                    norm_layer=norm,
                    use_rel_pos=True,
                    window_size=window,
                    input_size=(grid, grid),
                )
            )
    return Sam(
        image_encoder=encoder,
        prompt_encoder=PromptEncoder(
            embed_dim=config.prompt_dim,
            image_embedding_size=(grid, grid),
            input_image_size=(config.image_size, config.image_size),
            mask_in_chans=16,
        ),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=3,
            transformer=TwoWayTransformer(
                depth=2,
                embedding_dim=config.prompt_dim,
                mlp_dim=config.decoder_mlp_dim,
                num_heads=config.decoder_heads,
            ),
            transformer_dim=config.prompt_dim,
            iou_head_depth=3,
            iou_head_hidden_dim=config.iou_hidden_dim,
        ),
        pixel_mean=list(SAM_PIXEL_MEAN),
        pixel_std=list(SAM_PIXEL_STD),
    )


def sam_embedding_nbytes(net: Any) -> int:
    """Bytes of one float32 segment_anything image embedding (C, h, w)."""
    height, width = net.prompt_encoder.image_embedding_size
    return 4 * net.prompt_encoder.embed_dim * height * width


def slice_batch(images: Iterable[np.ndarray], device: Any) -> Any:
    """Stack 8-bit (y, x) slices into a float tensor (B, 3, y, x) of 0..255 (RGB replicated)."""
    import torch

    stacked = np.stack([np.asarray(image) for image in images]).astype(np.float32)
    tensor = torch.from_numpy(stacked).to(device)
    return tensor[:, None].expand(-1, 3, -1, -1).contiguous()


def prompt_tensors(
    prompt: SlicePrompt, scale_y: float, scale_x: float, device: Any
) -> tuple[Any, Any, Any]:
    """(coords (1, N, 2) as (x, y), labels (1, N), box (1, 4) as x0, y0, x1, y1) in the network
    input frame (per-axis scale factors); None where the prompt has no points / no box."""
    import torch

    coords = labels = box = None
    if len(prompt.points):
        xy = prompt.points[:, ::-1].astype(np.float32) * np.array([scale_x, scale_y], np.float32)
        coords = torch.as_tensor(xy, device=device)[None]
        labels = torch.as_tensor(prompt.labels.astype(np.int64), device=device)[None].int()
    if prompt.box is not None:
        b = prompt.box
        values = np.array(
            [b.x_min * scale_x, b.y_min * scale_y, b.x_max * scale_x, b.y_max * scale_y],
            dtype=np.float32,
        )
        box = torch.as_tensor(values, device=device)[None]
    return coords, labels, box


def feedback_tensor(feedback: Any, device: Any) -> Any:
    """Low-res logits (h, w) from the previous step as the (1, 1, h, w) mask input, or None."""
    import torch

    if feedback is None:
        return None
    return torch.as_tensor(np.asarray(feedback, dtype=np.float32), device=device)[None, None]


def sam_decode(
    net: Any, embedding: Any, coords: Any, labels: Any, box: Any, mask_input: Any, multimask: bool
) -> tuple[Any, Any]:
    """segment_anything prompt encoder + mask decoder on one cached embedding (C, h, w).

    Returns the chosen low-res logits (1, 1, h_low, w_low) and its predicted IoU: the single
    output, or with ``multimask`` the best predicted IoU of the three.
    """
    points = (coords, labels) if coords is not None else None
    sparse, dense = net.prompt_encoder(points=points, boxes=box, masks=mask_input)
    low_res, iou = net.mask_decoder(
        image_embeddings=embedding[None],
        image_pe=net.prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings=sparse,
        dense_prompt_embeddings=dense,
        multimask_output=multimask,
    )
    best = int(iou[0].float().argmax()) if multimask else 0
    return low_res[:, best : best + 1], iou[0, best]


def logits_feedback(low_res: Any) -> np.ndarray:
    """The (h_low, w_low) float32 numpy logits handed back at the next refinement step."""
    return low_res[0, 0].float().cpu().numpy().astype(np.float32)
