"""MobileSAM (Zhang et al. 2023): SAM's prompt encoder and mask decoder behind a TinyViT-5M image
encoder distilled from SAM's ViT-H; points, boxes and mask input, slice by slice.

The trained weights are the official ``mobile_sam.pt`` (ChaoningZhang/MobileSAM, Apache-2.0;
``intrabench models download mobilesam``, which ``scripts/install.sh`` runs). The TinyViT
encoder is MobileSAM's own module (the ``mobilesam-mirror`` package, code only); the prompt
encoder and mask decoder are ``segment_anything``'s, whose 137 tensors the checkpoint matches
in names and shapes.

Pre-processing is the SAM family's, exactly as the official ``SamPredictor.set_image`` does it
(the same as the ``sam`` adapter, paper Appendix A.1): the volume clipped to its 0.5th/99.5th
percentiles and scaled to 8 bit, each axial slice replicated to RGB, its longest side resized to
1024 with PIL's bilinear filter (``ResizeLongestSide.apply_image``: the official code's own
function, so the encoder sees the official input to the grey level), SAM's pixel mean/std, zero
padding to 1024 x 1024. Decoding as ``SamPredictor.predict``: points (x, y) and box scaled to the
resized frame, the previous low-res logits (256 x 256) as mask input, logits upsampled and
cropped, mask = logits > 0. Multimask 'auto' as SAM: the three-mask output with the best
predicted IoU for a single click without box or mask input, else the single-mask output.

Array conventions: slices (y, x) of the canonical (z, y, x) volume; prompts in voxel indices.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from intrabench.model_cards import variants_of
from intrabench.models.sam_family._sam_common import (
    SamConfig,
    TinyViTExport,
    build_sam,
    slice_batch,
    to_uint8,
)
from intrabench.models.sam_family._segment_anything import modeling
from intrabench.models.sam_family.sam import SAM
from intrabench.registry import models

#: MobileSAM's TinyViT-5M (``build_sam_vit_t``): input 1024, embedding 256 x 64 x 64
TINY_VIT_5M = {
    "embed_dims": [64, 128, 160, 320],
    "depths": [2, 2, 6, 2],
    "num_heads": [2, 4, 5, 10],
    "window_sizes": [7, 7, 14, 7],
}
#: a narrow, shallow TinyViT of the same architecture, for tests and timing only. Its input stays
#: 1024 (MobileSAM's TinyViT reshapes to 64 x 64 in its forward pass) and its last width 320:
#: it keeps the last stage's resolution (stride 1) only for output widths 320, 448 and 576
TINY_TINY_VIT = {
    "embed_dims": [16, 32, 48, 320],
    "depths": [1, 1, 1, 1],
    "num_heads": [1, 2, 2, 4],
    "window_sizes": [7, 7, 14, 7],
}
#: the prompt encoder and mask decoder of SAM, as MobileSAM builds them (its ViT has no role)
MOBILESAM_HEADS = SamConfig(embed_dim=16, depth=0, num_heads=1, global_attn_indexes=())
TINY_HEADS = SamConfig(
    embed_dim=16,
    depth=0,
    num_heads=1,
    global_attn_indexes=(),
    decoder_mlp_dim=64,
    decoder_heads=2,
    iou_hidden_dim=32,
)


def tiny_vit(image_size: int, shape: dict[str, list[int]]) -> Any:
    """MobileSAM's TinyViT image encoder (random weights; its neck gives 256 channels at
    ``image_size / 16``). Imported quietly: timm's deprecation notes and registry overwrites
    (LiteMedSAM's copy of TinyViT registers the same names).

    Args:
        image_size: The encoder's square input side, in pixels (1024 for MobileSAM).
        shape: TinyViT's ``embed_dims``, ``depths``, ``num_heads`` and ``window_sizes``.

    Returns:
        The TinyViT torch module.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TinyViT = modeling("mobile_sam").TinyViT  # noqa: N806 - a class
        return TinyViT(
            img_size=image_size,
            in_chans=3,
            num_classes=1000,
            mlp_ratio=4.0,
            drop_rate=0.0,
            drop_path_rate=0.0,
            use_checkpoint=False,
            mbconv_expand_ratio=4.0,
            local_conv_size=3,
            layer_lr_decay=0.8,
            **shape,
        )


def build_mobilesam(tiny: bool = False) -> Any:
    """segment_anything's ``Sam`` with MobileSAM's TinyViT as its image encoder.

    Args:
        tiny: Build the small test configuration instead of the full network.

    Returns:
        The ``Sam`` torch module, random weights.
    """
    heads = TINY_HEADS if tiny else MOBILESAM_HEADS
    net = build_sam(heads)
    net.image_encoder = tiny_vit(heads.image_size, TINY_TINY_VIT if tiny else TINY_VIT_5M)
    return net


@models.register
class MobileSAM(TinyViTExport, SAM):
    """MobileSAM (TinyViT-5M encoder, SAM's decoder), slice by slice; points, boxes, scribbles,
    mask refinement. Trained on natural images (SA-1B, distilled from SAM ViT-H)."""

    name: ClassVar[str] = "mobilesam"
    licence: ClassVar[str] = "Apache-2.0"
    #: variant -> checkpoint key, from the model's card (intrabench/resources/model_cards)
    VARIANTS: ClassVar[dict[str, str]] = variants_of("mobilesam")
    DEFAULT_VARIANT: ClassVar[str] = "vit_t"
    EXPORTABLE_ENCODER: ClassVar[bool] = True
    #: measured: OpenVINO and ONNX Runtime faster than torch per slice (docs/performance.md)
    AUTO_EXPORT: ClassVar[bool] = True

    def build_network(self, tiny: bool) -> Any:
        """The MobileSAM (TinyViT encoder) torch module with random weights (the full
        architecture, or a tiny test configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of the full network.

        Returns:
            segment_anything's ``Sam`` module with the TinyViT encoder.
        """
        return build_mobilesam(tiny)

    def resized_input(self, zs: list[int]) -> Any:
        """Slices ``zs`` as the official predictor resizes them: 8-bit, longest side to the
        encoder's input size with PIL's bilinear filter (what ``ResizeLongestSide.apply_image``
        calls, without importing torchvision for it), replicated to RGB: a float tensor
        (B, 3, h', w') of 0..255 on the device.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs``.
        """
        from PIL import Image

        height, width = self._input_shape()
        window = self._window()
        resized = [
            np.asarray(
                Image.fromarray(to_uint8(self.image.array[z], window)).resize(
                    (width, height), Image.BILINEAR
                )
            )
            for z in zs
        ]
        return slice_batch(resized, self.device)
