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


def sam_med2d_outputs(net: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Image embedding (every 4th position) and the three-mask decoder output (logits at every
    4th pixel, predicted IoUs) for clicks + box + mask input."""
    with torch.no_grad():
        embedding = net.image_encoder(inputs["image"])
        sparse, dense = net.prompt_encoder(points=(inputs["coords"], inputs["labels"]),
                                           boxes=inputs["box"], masks=inputs["mask"])
        low_res, iou = net.mask_decoder(image_embeddings=embedding,
                                        image_pe=net.prompt_encoder.get_dense_pe(),
                                        sparse_prompt_embeddings=sparse,
                                        dense_prompt_embeddings=dense, multimask_output=True)
    return {
        "embedding": embedding[0, :, ::4, ::4].numpy().astype(np.float32),
        "low_res_logits": low_res[0, :, ::4, ::4].numpy().astype(np.float32),
        "iou": iou[0].numpy().astype(np.float32),
    }
