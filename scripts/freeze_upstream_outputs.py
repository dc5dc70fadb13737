"""Run an upstream model's own network code beside IntraBench's adapter, and freeze the outputs.

Some upstream packages cannot be installed (SAM-Med2D ships a modified ``segment_anything``
inside its repository, SegVol its ``segment_anything_volumetric``). This script imports the
upstream package from a checkout, fills every tensor of a full-size network with seeded random
non-zero values, loads that one state dict strictly into the upstream module and into ours,
feeds both the same seeded inputs, checks they agree, and writes a small frozen sample of the
outputs to ``tests/data/`` for the test suite (which re-creates the same state dict and
inputs from the seed and compares our network to the frozen numbers).

    python scripts/freeze_upstream_outputs.py sam-med2d PATH/TO/SAM-Med2D
    python scripts/freeze_upstream_outputs.py segvol PATH/TO/SegVol

The paths are checkouts of OpenGVLab/SAM-Med2D and BAAI-DCAI/SegVol (their
``segment_anything`` / ``segment_anything_volumetric`` folders are imported under another
package name, so they cannot shadow the real ``segment_anything``). SegVol's image encoder is
MONAI's ``ViT`` in both, so only its prompt encoder and mask decoder are compared.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from upstream_fixtures import (  # noqa: E402
    SAM_MED2D_FROZEN,
    SEGVOL_FROZEN,
    sam_med2d_inputs,
    sam_med2d_outputs,
    seeded_non_zero_state,
    segvol_inputs,
    segvol_outputs,
)


def _import_copy(folder: Path, name: str):
    staging = Path(tempfile.mkdtemp())
    shutil.copytree(folder, staging / name)
    sys.path.insert(0, str(staging))
    return __import__(name)


def freeze_sam_med2d(checkout: Path) -> None:
    from intrabench import registry

    upstream_pkg = _import_copy(checkout / "segment_anything", "sammed2d_upstream")
    from sammed2d_upstream.build_sam import _build_sam

    upstream = _build_sam(768, 12, 12, [2, 5, 8, 11], 256, None, True).eval()
    ours = registry.models.create("sam-med2d", {"weights": "random", "device": "cpu"}).net.eval()
    state = seeded_non_zero_state(ours)
    assert set(state) == set(upstream.state_dict()), "key sets differ"
    upstream.load_state_dict(state, strict=True)
    ours.load_state_dict(state, strict=True)
    inputs = sam_med2d_inputs()
    theirs = sam_med2d_outputs(upstream, inputs)
    mine = sam_med2d_outputs(ours, inputs)
    _compare(theirs, mine)
    SAM_MED2D_FROZEN.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(SAM_MED2D_FROZEN, **theirs)
    print(f"written {SAM_MED2D_FROZEN} (upstream {upstream_pkg.__name__} at {checkout})")


def _compare(theirs: dict, mine: dict) -> None:
    for key in theirs:
        difference = float(np.abs(theirs[key] - mine[key]).max())
        print(f"{key}: shape {theirs[key].shape}, max |upstream - ours| = {difference:.2e}")
        assert difference <= 1e-5 * max(1.0, float(np.abs(theirs[key]).max())), key


def freeze_segvol(checkout: Path) -> None:
    import torch

    from intrabench.models.volumetric._segvol_arch import (
        FULL,
        SegVolMaskDecoder,
        SegVolPromptEncoder,
    )

    # its own name: the package imports itself absolutely (no installed package has it)
    _import_copy(checkout / "segment_anything_volumetric", "segment_anything_volumetric")
    from segment_anything_volumetric.modeling import MaskDecoder, PromptEncoder, TwoWayTransformer

    size, patch = np.array(FULL.spatial_size), np.array(FULL.patch_size)
    prompt_encoder = PromptEncoder(
        embed_dim=768,
        image_embedding_size=[int(v) for v in size // patch],
        input_image_size=[int(v) for v in size],
        mask_in_chans=16,
    ).eval()
    mask_decoder = MaskDecoder(
        image_encoder_type="vit",
        num_multimask_outputs=3,
        transformer=TwoWayTransformer(depth=2, embedding_dim=768, mlp_dim=2048, num_heads=8),
        transformer_dim=768,
        iou_head_depth=3,
        iou_head_hidden_dim=256,
        image_size=size,
        patch_size=patch,
    ).eval()
    ours_prompt, ours_decoder = SegVolPromptEncoder(FULL).eval(), SegVolMaskDecoder(FULL).eval()
    for upstream, ours in ((prompt_encoder, ours_prompt), (mask_decoder, ours_decoder)):
        state = seeded_non_zero_state(ours)
        assert set(state) == set(upstream.state_dict()), "key sets differ"
        upstream.load_state_dict(state, strict=True)
        ours.load_state_dict(state, strict=True)
    inputs = segvol_inputs()
    theirs = segvol_outputs(prompt_encoder, mask_decoder, inputs, upstream=True)
    _compare(theirs, segvol_outputs(ours_prompt, ours_decoder, inputs, upstream=False))
    np.savez_compressed(SEGVOL_FROZEN, **theirs)
    print(f"written {SEGVOL_FROZEN} (upstream at {checkout}; torch {torch.__version__})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=["sam-med2d", "segvol"])
    parser.add_argument("checkout", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(2)
    (freeze_sam_med2d if args.model == "sam-med2d" else freeze_segvol)(args.checkout)


if __name__ == "__main__":
    main()
