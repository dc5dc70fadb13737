"""SAM-Med2D (Cheng et al. 2023): SAM ViT-B at 256 x 256 input with an adapter in every block.

No package exists, so the architecture is written here on top of ``segment_anything``:
:class:`AdapterBlock` subclasses ``segment_anything``'s encoder ``Block`` and adds
:class:`SliceAdapter` under the attribute name ``Adapter``, so that the public
``sam-med2d_b.pth`` (weights under 'model') loads strictly. Checkpoint keys per block:
``image_encoder.blocks.{i}.Adapter.{norm,channel.0,channel.2,spatial.0,spatial.2}.*``; the
encoder's ``pos_embed`` is (1, 16, 16, 768).

Preprocessing (paper Appendix A.4, SAM-Med2D's ``predictor_sammed.py``): each axial slice is
clipped to its own 0.5th/99.5th percentiles, scaled to 0..255 (8 bit), replicated to RGB,
standardised with SAM's pixel mean/std, then squashed to 256 x 256 (nearest neighbour, no
padding). Prompts are scaled per axis (256/W, 256/H). Decoding: three-mask output, best
predicted IoU (SAM-Med2D's ``test.py``); low-res logits (64 x 64) upsampled bilinearly to 256
and then to the slice size; threshold ``sigmoid > 0.5``. Refinement feeds ``sigmoid`` of the
64 x 64 logits back as mask input, as SAM-Med2D was trained and tested (``utils.generate_point``
in its ``train.py`` and ``test.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from intrabench.interfaces import SliceOutput
from intrabench.model_cards import variants_of
from intrabench.models.sam_family._sam_common import (
    SAM_CONFIGS,
    SAM_PIXEL_MEAN,
    SAM_PIXEL_STD,
    TINY_SAM,
    SamFamilyModel,
    build_sam,
    feedback_tensor,
    logits_feedback,
    percentile_window,
    prompt_tensors,
    sam_decode,
    sam_embedding_nbytes,
    slice_batch,
    to_uint8,
)
from intrabench.models.sam_family._sam_med2d_adapter import adapter_classes  # noqa: F401 - public here
from intrabench.registry import models
from intrabench.types import SlicePrompt

#: full-size SAM-Med2D: ViT-B, 256 input, adapters
SAM_MED2D_CONFIG = replace(SAM_CONFIGS["vit_b"], image_size=256, adapter=True)
#: tiny test/timing configuration of the same architecture (128 input, 8 x 8 tokens)
TINY_SAM_MED2D = replace(TINY_SAM, image_size=128, window_size=4, adapter=True)


def __getattr__(name: str) -> Any:  # SliceAdapter / AdapterBlock, built when first asked for
    if name in ("SliceAdapter", "AdapterBlock"):
        return dict(zip(("SliceAdapter", "AdapterBlock"), adapter_classes()))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@models.register
class SAMMed2D(SamFamilyModel):
    """SAM-Med2D (ViT-B with adapters, 256 input), slice by slice; points, boxes, mask refinement."""

    name: ClassVar[str] = "sam-med2d"
    licence: ClassVar[str] = "Apache-2.0"
    accepts: ClassVar[frozenset[str]] = frozenset({"point", "box2d", "box3d", "scribble", "mask"})
    #: variant -> checkpoint key, from the model's card (intrabench/resources/model_cards)
    VARIANTS: ClassVar[dict[str, str]] = variants_of("sam-med2d")
    DEFAULT_VARIANT: ClassVar[str] = "vit_b"
    AUTO_MULTIMASK: ClassVar[str] = "always"
    #: ``backend: onnxruntime | openvino`` on request; ``auto`` stays torch until measured
    EXPORTABLE_ENCODER: ClassVar[bool] = True
    #: non-persistent buffers here; tolerated if a checkpoint carries them
    IGNORED_CHECKPOINT_KEYS: ClassVar[tuple[str, ...]] = ("pixel_mean", "pixel_std")

    def build_network(self, tiny: bool) -> Any:
        """The SAM-Med2D torch module with random weights (the full architecture, or a tiny test
        configuration); the checkpoint is loaded by the caller.

        Args:
            tiny: Build the small test configuration instead of the full network.

        Returns:
            segment_anything's ``Sam`` module with SAM-Med2D's adapters.
        """
        return build_sam(TINY_SAM_MED2D if tiny else SAM_MED2D_CONFIG)

    def preprocess(self, zs: list[int]) -> Any:
        """Encoder input for axial slices ``zs``: each slice windowed to uint8, normalised and
        resized to S = 256; float32 (B, 3, S, S) on the model's device.

        Args:
            zs: Axial slice indices (z) of the current image.

        Returns:
            The batch, one slice per entry in the order of ``zs``.
        """
        import torch
        import torch.nn.functional as F

        slices = [self.image.array[z] for z in zs]
        batch = slice_batch((to_uint8(s, percentile_window(s)) for s in slices), self.device)
        mean = torch.tensor(SAM_PIXEL_MEAN, device=self.device)[None, :, None, None]
        std = torch.tensor(SAM_PIXEL_STD, device=self.device)[None, :, None, None]
        size = self.net.image_encoder.img_size
        return F.interpolate((batch - mean) / std, (size, size), mode="nearest")

    def embedding_nbytes(self) -> int:
        """Bytes of one slice embedding (float32), known from the architecture: sizes the cache's
        batches.

        Returns:
            Bytes of a float32 (256, 16, 16) embedding at full size.
        """
        return sam_embedding_nbytes(self.net)

    def encode(self, batch: Any) -> list[Any]:
        """Run the image encoder on a preprocessed batch (B, 3, S, S); one float32 embedding (C,
        h, w) per slice, (256, 16, 16) at full size.

        Args:
            batch: The encoder input of :meth:`preprocess`, (B, 3, 256, 256) at full size.

        Returns:
            B embedding tensors (C, h, w).
        """
        return [embedding.clone() for embedding in self.net.image_encoder(batch)]

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
        size = net.image_encoder.img_size
        coords, labels, box = prompt_tensors(prompt, size / height, size / width, self.device)
        mask_input = feedback_tensor(feedback, self.device)
        if mask_input is not None:  # trained and tested with probabilities (train.py, utils.py)
            mask_input = torch.sigmoid(mask_input)
        low_res, _ = sam_decode(
            net,
            embedding,
            coords,
            labels,
            box,
            mask_input,
            self.use_multimask(prompt, mask_input is not None),
        )
        logits = F.interpolate(low_res.float(), (size, size), mode="bilinear", align_corners=False)
        logits = F.interpolate(logits, (height, width), mode="bilinear", align_corners=False)
        mask = (torch.sigmoid(logits[0, 0]) > 0.5).cpu().numpy().astype(bool)
        return SliceOutput(np.ascontiguousarray(mask), logits_feedback(low_res))
