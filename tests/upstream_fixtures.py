"""Seeded state dicts, inputs and outputs shared by the frozen upstream comparisons.

``scripts/freeze_upstream_outputs.py`` runs these against the upstream network code and writes
the outputs; the tests run them against ours and compare with the frozen file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

DATA = Path(__file__).parent / "data"
SAM_MED2D_FROZEN = DATA / "sam_med2d_upstream_outputs.npz"


def frozen_logits_tolerance(expected: np.ndarray) -> float:
    """The largest difference accepted from logits frozen on another machine: 1e-4 plus 5e-6
    of their largest magnitude (float32 accumulation differs across CPU instruction sets:
    MobileSAM's official predictor run on an AVX-512/AMX Xeon differs from its fixture frozen
    on an AVX2 EPYC by up to 9.3e-5 on logits up to 35.6)."""
    return 1e-4 + 5e-6 * float(np.abs(expected).max())


def seeded_non_zero_state(module: torch.nn.Module, seed: int = 7) -> dict[str, torch.Tensor]:
    """Every tensor of ``module``'s state dict as seeded random non-zero values (norm weights
    near 1, everything else N(0, 0.05)), drawn in key order by the CPU generator."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in sorted(module.state_dict().items()):
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float32) * 0.05
        noise = torch.where(noise == 0, torch.full_like(noise, 1e-3), noise)  # randn hits 0.0
        base = 1.0 if key.endswith("weight") and value.ndim == 1 else 0.0
        state[key] = (base + noise).to(value.dtype)
    return state


def sam_med2d_inputs(seed: int = 11) -> dict[str, torch.Tensor]:
    """A standardised 256x256 image, two clicks, a box and a 64x64 mask input."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "image": torch.randn(1, 3, 256, 256, generator=generator),
        "coords": torch.tensor([[[120.0, 96.0], [40.0, 200.0]]]),
        "labels": torch.tensor([[1, 0]]),
        "box": torch.tensor([[80.0, 60.0, 170.0, 150.0]]),
        "mask": torch.randn(1, 1, 64, 64, generator=generator),
    }


def sam_med2d_outputs(
    net: torch.nn.Module, inputs: dict[str, torch.Tensor]
) -> dict[str, np.ndarray]:
    """Image embedding (every 4th position) and the three-mask decoder output (logits at every
    4th pixel, predicted IoUs) for clicks + box + mask input."""
    with torch.no_grad():
        embedding = net.image_encoder(inputs["image"])
        sparse, dense = net.prompt_encoder(
            points=(inputs["coords"], inputs["labels"]), boxes=inputs["box"], masks=inputs["mask"]
        )
        low_res, iou = net.mask_decoder(
            image_embeddings=embedding,
            image_pe=net.prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings=sparse,
            dense_prompt_embeddings=dense,
            multimask_output=True,
        )
    return {
        "embedding": embedding[0, :, ::4, ::4].numpy().astype(np.float32),
        "low_res_logits": low_res[0, :, ::4, ::4].numpy().astype(np.float32),
        "iou": iou[0].numpy().astype(np.float32),
    }


SEGVOL_FROZEN = DATA / "segvol_upstream_outputs.npz"


def segvol_inputs(seed: int = 13) -> dict[str, torch.Tensor]:
    """A full-size image embedding (768 x 8x16x16), three clicks and a box on the 32x256x256
    grid, in SegVol's (D, H, W) order."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "embedding": torch.randn(1, 768, 8, 16, 16, generator=generator),
        "coords": torch.tensor([[[10.0, 100.0, 120.0], [20.0, 60.0, 200.0], [5.0, 30.0, 40.0]]]),
        "labels": torch.tensor([[1, 0, 1]]),
        "box": torch.tensor([[4.0, 50.0, 70.0, 25.0, 180.0, 210.0]]),
    }


def segvol_outputs(
    prompt_encoder: torch.nn.Module,
    mask_decoder: torch.nn.Module,
    inputs: dict[str, torch.Tensor],
    upstream: bool,
) -> dict[str, np.ndarray]:
    """Single-mask low-resolution logits (every 4th voxel) for clicks + box, through either
    upstream's modules (``upstream``: their signatures, no text) or ours."""
    points = (inputs["coords"], inputs["labels"])
    with torch.no_grad():
        if upstream:
            sparse, dense = prompt_encoder(
                points=points, boxes=inputs["box"], masks=None, text_embedding=None
            )
            low, _ = mask_decoder(
                image_embeddings=inputs["embedding"],
                text_embedding=None,
                image_pe=prompt_encoder.get_dense_pe(),
                sparse_prompt_embeddings=sparse,
                dense_prompt_embeddings=dense,
                multimask_output=False,
            )
        else:
            sparse, dense = prompt_encoder(*points, inputs["box"])
            low = mask_decoder(inputs["embedding"], prompt_encoder.get_dense_pe(), sparse, dense)
    return {
        "low_res_logits": low[0, 0, ::4, ::4, ::4].numpy().astype(np.float32),
        "sparse": sparse[0].numpy().astype(np.float32),
    }
