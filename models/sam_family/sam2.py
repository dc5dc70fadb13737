"""SAM2 / SAM2.1 (Ravi et al. 2024) image predictor slice by slice, via the ``sam2`` package.

Variants name the package's hydra configs (``configs/sam2.1/sam2.1_hiera_l.yaml`` ...: names on
the package's search path, never file paths) and the checkpoint table's files; the checkpoint is
read from a local file (weights under 'model') and loaded strictly. The network is built with
``sam2.build_sam.build_sam2`` defaults (dynamic multimask fallback via stability, as the image
predictor does).

Preprocessing (paper Appendix A.2, ``SAM2Transforms``): the volume is clipped to its
0.5th/99.5th percentiles and scaled to 0..255 (8 bit), each axial slice replicated to RGB,
scaled to [0, 1], squashed to 1024 x 1024 (bilinear, antialiased, aspect ratio not kept) and
normalised with ImageNet mean/std. Encoding follows ``SAM2ImagePredictor.set_image``
(``no_mem_embed`` added to the lowest-resolution features; two high-resolution feature maps kept
per slice). Decoding follows ``SAM2ImagePredictor._predict``: coordinates scaled per axis by
1024/W, 1024/H, a box becomes two points labelled 2 and 3 placed before the clicks, previous
low-res logits (256 x 256, clamped to +-32) as mask input when refining, logits upsampled
bilinearly to the slice size, threshold logits > 0. Multimask 'auto': three masks and the best
predicted IoU for a single click without box or mask (SAM2's ``multimask_max_pt_num=1``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np

from intrabench.interfaces import SliceOutput
from intrabench.models.sam_family._sam_common import (
    SamFamilyModel,
    feedback_tensor,
    logits_feedback,
    percentile_window,
    prompt_tensors,
    slice_batch,
    to_uint8,
)
from intrabench.registry import models
from intrabench.types import SlicePrompt

T = TypeVar("T")

#: variant -> hydra config name inside the sam2 package
SAM2_CONFIGS: dict[str, str] = {
    "sam2.1-hiera-large": "configs/sam2.1/sam2.1_hiera_l.yaml",
    "sam2.1-hiera-base-plus": "configs/sam2.1/sam2.1_hiera_b+.yaml",
    "sam2.1-hiera-small": "configs/sam2.1/sam2.1_hiera_s.yaml",
    "sam2.1-hiera-tiny": "configs/sam2.1/sam2.1_hiera_t.yaml",
    "sam2-hiera-large": "configs/sam2/sam2_hiera_l.yaml",
    "sam2-hiera-base-plus": "configs/sam2/sam2_hiera_b+.yaml",
    "sam2-hiera-small": "configs/sam2/sam2_hiera_s.yaml",
    "sam2-hiera-tiny": "configs/sam2/sam2_hiera_t.yaml",
}

#: hydra overrides of a tiny configuration of the same architecture (256 input, Hiera with
#: embed dim 16 and 5 blocks, 32-dim prompt/decoder, shrunken memory modules): tests/timing only
TINY_SAM2_OVERRIDES: tuple[str, ...] = (
    "++model.image_size=256",
    "++model.image_encoder.trunk.embed_dim=16",
    "++model.image_encoder.trunk.num_heads=1",
    "++model.image_encoder.trunk.stages=[1,1,2,1]",
    "++model.image_encoder.trunk.global_att_blocks=[3]",
    "++model.image_encoder.neck.backbone_channel_list=[128,64,32,16]",
    "++model.image_encoder.neck.d_model=32",
    "++model.image_encoder.neck.position_encoding.num_pos_feats=32",
    "++model.memory_attention.d_model=32",
    "++model.memory_attention.num_layers=1",
    "++model.memory_attention.layer.d_model=32",
    "++model.memory_attention.layer.dim_feedforward=64",
    "++model.memory_attention.layer.self_attention.embedding_dim=32",
    "++model.memory_attention.layer.cross_attention.embedding_dim=32",
    "++model.memory_encoder.out_dim=16",
    "++model.memory_encoder.position_encoding.num_pos_feats=16",
    "++model.memory_encoder.mask_downsampler.embed_dim=32",
    "++model.memory_encoder.fuser.layer.dim=32",
    "++model.memory_encoder.fuser.num_layers=1",
)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


#: what ``sam2.build_sam.build_sam2`` adds by default (image predictor post-processing)
DYNAMIC_MULTIMASK_OVERRIDES: tuple[str, ...] = (
    "++model.sam_mask_decoder_extra_args.dynamic_multimask_via_stability=true",
    "++model.sam_mask_decoder_extra_args.dynamic_multimask_stability_delta=0.05",
    "++model.sam_mask_decoder_extra_args.dynamic_multimask_stability_thresh=0.98",
)


def build_sam2_network(variant: str, tiny: bool = False) -> Any:
    """SAM2 network of ``variant`` with random weights, as ``build_sam2`` composes it.

    Built on the current default device and left there (so ``with torch.device("meta")``
    gives a weightless full-size model for shape checks); ``tiny`` applies
    :data:`TINY_SAM2_OVERRIDES` to the SAM2.1 Hiera-T config (tests/timing only).

    Args:
        variant: A key of ``SAM2_CONFIGS`` (e.g. ``"sam2.1-hiera-tiny"``); ignored when ``tiny``.
        tiny: Build the small test configuration.

    Returns:
        The ``SAM2Base`` torch module.
    """
    import sam2  # noqa: F401 - registers the package's hydra config module
    from hydra import compose
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    overrides = list(DYNAMIC_MULTIMASK_OVERRIDES) + (list(TINY_SAM2_OVERRIDES) if tiny else [])
    config = compose(
        config_name=SAM2_CONFIGS["sam2.1-hiera-tiny" if tiny else variant], overrides=overrides
    )
    OmegaConf.resolve(config)
    return instantiate(config.model, _recursive_=True)


def build_hiera_on_meta(build: Callable[[], T]) -> T:
    """``build()`` on the ``meta`` device (names and shapes only, no memory).

    Hiera computes its drop-path schedule with ``torch.linspace(...).item()``, which meta
    tensors cannot answer, so that one call is pinned to the CPU while building.

    Args:
        build: Builds the network (e.g. ``lambda: build_sam2_network(variant)``).

    Returns:
        What ``build()`` returns, its tensors on the ``meta`` device.
    """
    from unittest import mock

    import torch

    linspace = torch.linspace

    def cpu_linspace(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("device", "cpu")
        return linspace(*args, **kwargs)

    with torch.device("meta"), mock.patch.object(torch, "linspace", cpu_linspace):
        return build()


def build_sam2_meta(variant: str) -> Any:
    """The full-size network of ``variant`` on the ``meta`` device (names and shapes only).

    Args:
        variant: A key of ``SAM2_CONFIGS``.

    Returns:
        The network, its tensors on the ``meta`` device.
    """
    return build_hiera_on_meta(lambda: build_sam2_network(variant))


@models.register
class SAM2(SamFamilyModel):
    """SAM2/SAM2.1 image predictor (Hiera-L default), slice by slice; points, boxes, refinement."""

    name: ClassVar[str] = "sam2"
    licence: ClassVar[str] = "Apache-2.0"
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "box3d", "scribble", "mask"})
    VARIANTS: ClassVar[dict[str, str]] = {v: v for v in SAM2_CONFIGS}
    DEFAULT_VARIANT: ClassVar[str] = "sam2.1-hiera-large"
    AUTO_MULTIMASK: ClassVar[str] = "single-point"

    def build_network(self, tiny: bool) -> Any:
        """The SAM2 torch module with random weights (the full architecture, or a tiny test
        configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of the ``variant``'s network.

        Returns:
            The ``SAM2Base`` torch module.
        """
        return build_sam2_network(self.variant, tiny)

    def _window(self) -> tuple[float, float]:
        return self.case_value("window", lambda: percentile_window(self.image.array))

    def preprocess(self, zs: list[int]) -> Any:
        """Encoder input for axial slices ``zs``: each slice windowed to uint8, resized to S and
        normalised; float32 (B, 3, S, S) on the model's device.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs`` (S = 1024 at full size).
        """
        import torch
        import torch.nn.functional as F

        window = self._window()
        batch = slice_batch((to_uint8(self.image.array[z], window) for z in zs), self.device)
        size = self.net.image_size
        resized = F.interpolate(
            batch / 255.0, (size, size), mode="bilinear", align_corners=False, antialias=True
        )
        mean = torch.tensor(IMAGENET_MEAN, device=self.device)[None, :, None, None]
        std = torch.tensor(IMAGENET_STD, device=self.device)[None, :, None, None]
        return (resized - mean) / std

    def embedding_nbytes(self) -> int:
        """Image embedding (d, S/16, S/16) plus high-res maps (d/8, S/4, S/4), (d/4, S/8, S/8).

        Returns:
            Bytes of one slice's float32 image embedding and high-resolution maps.
        """
        dim, side = self.net.hidden_dim, self.net.image_size // 16
        return 4 * side * side * (dim + dim // 8 * 16 + dim // 4 * 4)

    def encode(self, batch: Any) -> list[Any]:
        """Run SAM2's image encoder on a preprocessed batch (B, 3, S, S); per slice its image
        embedding and high-resolution features.

        Args:
            batch: The encoder input of :meth:`preprocess`, (B, 3, S, S).

        Returns:
            Per slice, a tuple (image embedding (d, S/16, S/16), high-res level 0 (d/8, S/4, S/4),
            high-res level 1 (d/4, S/8, S/8)).
        """
        net = self.net
        backbone = net.forward_image(batch)
        _, features, _, sizes = net._prepare_backbone_features(backbone)
        if net.directly_add_no_mem_embed:
            features[-1] = features[-1] + net.no_mem_embed
        count = batch.shape[0]
        maps = [f.permute(1, 2, 0).reshape(count, -1, *size) for f, size in zip(features, sizes)]
        # per slice: (image embedding, high-res level 0, high-res level 1)
        return [(maps[-1][i].clone(), *(m[i].clone() for m in maps[:-1])) for i in range(count)]

    def decode(self, embedding: Any, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        """Mask and feedback of one slice prompt from its embedding.

        Args:
            embedding: The slice's embedding from :meth:`encode`.
            prompt: The slice's clicks (y, x) and box, in canonical voxels.
            feedback: The previous step's low-resolution logits of this slice, or None.

        Returns:
            The mask, bool (y, x) of the image's slice shape, and the feedback for the next step.
        """
        import torch
        import torch.nn.functional as F

        net = self.net
        height, width = self.image.shape[1:]
        size = net.image_size
        coords, labels, box = prompt_tensors(prompt, size / height, size / width, self.device)
        if box is not None:
            box_points = box.reshape(1, 2, 2)
            box_labels = torch.tensor([[2, 3]], dtype=torch.int, device=self.device)
            if coords is None:
                coords, labels = box_points, box_labels
            else:
                coords = torch.cat([box_points, coords], dim=1)
                labels = torch.cat([box_labels, labels], dim=1)
        mask_input = feedback_tensor(feedback, self.device)
        multimask = self.use_multimask(prompt, mask_input is not None)
        sparse, dense = net.sam_prompt_encoder(
            points=(coords, labels), boxes=None, masks=mask_input
        )
        image_embedding, *high_res = embedding
        low_res, iou, _, _ = net.sam_mask_decoder(
            image_embeddings=image_embedding[None],
            image_pe=net.sam_prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings=sparse,
            dense_prompt_embeddings=dense,
            multimask_output=multimask,
            repeat_image=False,
            high_res_features=[level[None] for level in high_res],
        )
        best = int(iou[0].float().argmax()) if multimask else 0
        low_res = low_res[:, best : best + 1].float()
        logits = F.interpolate(low_res, (height, width), mode="bilinear", align_corners=False)
        mask = (logits[0, 0] > 0.0).cpu().numpy().astype(bool)
        return SliceOutput(
            np.ascontiguousarray(mask), logits_feedback(torch.clamp(low_res, -32.0, 32.0))
        )
