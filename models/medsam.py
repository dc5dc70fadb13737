"""MedSAM (Ma et al. 2024): SAM ViT-B fine-tuned on medical images, box prompts only.

Preprocessing (paper Appendix A.3 and MedSAM's own inference code): each axial slice is
clipped to its own 0.5th/99.5th percentiles and scaled to 0..255 (8 bit), replicated to RGB,
squashed to 1024 x 1024 (bicubic, aspect ratio not kept), min-max scaled to [0, 1] *after* the
resize, and fed to the image encoder directly (no pixel mean/std, no padding).
Decoding: the box only (points are ignored: MedSAM was not trained on them), box scaled per
axis by 1024/W and 1024/H, single-mask output, ``sigmoid(low-res logits)`` upsampled bilinearly
to the slice size, threshold > 0.5. No mask input, so the model cannot be refined.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from intrabench.protocols import SliceOutput
from intrabench.registry import models
from intrabench.types import SlicePrompt

from ._sam_common import (
    SAM_CONFIGS,
    TINY_SAM,
    SamFamilyModel,
    build_sam,
    logits_feedback,
    percentile_window,
    prompt_tensors,
    sam_decode,
    sam_embedding_nbytes,
    slice_batch,
    to_uint8,
)


@models.register
class MedSAM(SamFamilyModel):
    """MedSAM (SAM ViT-B fine-tuned for medical images), slice by slice; box prompts only."""

    name: ClassVar[str] = "medsam"
    accepts: ClassVar[frozenset[str]] = frozenset({"box2d", "box3d"})
    VARIANTS: ClassVar[dict[str, str]] = {"vit_b": "medsam"}
    DEFAULT_VARIANT: ClassVar[str] = "vit_b"
    AUTO_MULTIMASK: ClassVar[str] = "never"

    def build_network(self, tiny: bool) -> Any:
        return build_sam(TINY_SAM if tiny else SAM_CONFIGS["vit_b"])

    def preprocess(self, zs: list[int]) -> Any:
        import torch
        import torch.nn.functional as F

        slices = [self.image.array[z] for z in zs]
        batch = slice_batch((to_uint8(s, percentile_window(s)) for s in slices), self.device)
        size = self.net.image_encoder.img_size
        resized = F.interpolate(batch, (size, size), mode="bicubic", align_corners=False)
        flat = resized.flatten(1)
        low = flat.min(dim=1).values[:, None, None, None]
        high = flat.max(dim=1).values[:, None, None, None]
        return (resized - low) / torch.clamp(high - low, min=1e-8)

    def embedding_nbytes(self) -> int:
        return sam_embedding_nbytes(self.net)

    def encode(self, batch: Any) -> list[Any]:
        return [embedding.clone() for embedding in self.net.image_encoder(batch)]

    def decode(self, embedding: Any, prompt: SlicePrompt, feedback: Any) -> SliceOutput:
        import torch
        import torch.nn.functional as F

        height, width = self.image.shape[1:]
        if prompt.box is None:  # points alone: MedSAM has nothing to segment from
            return SliceOutput(np.zeros((height, width), dtype=bool), None)
        size = self.net.image_encoder.img_size
        box_only = SlicePrompt(z=prompt.z, points=np.zeros((0, 2), np.int64),
                               labels=np.zeros((0,), np.int8), box=prompt.box)
        _, _, box = prompt_tensors(box_only, size / height, size / width, self.device)
        low_res, _ = sam_decode(self.net, embedding, None, None, box, None, multimask=False)
        probability = F.interpolate(torch.sigmoid(low_res.float()), (height, width),
                                    mode="bilinear", align_corners=False)
        mask = (probability[0, 0] > 0.5).cpu().numpy().astype(bool)
        return SliceOutput(np.ascontiguousarray(mask), logits_feedback(low_res))
