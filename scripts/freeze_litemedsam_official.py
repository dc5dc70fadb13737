"""Run LiteMedSAM's official pre-processing and inference on the demo's real cases, and freeze
what they produce as the fixture ``tests/data/litemedsam_official_outputs.npz``.

    git clone -b LiteMedSAM https://github.com/bowang-lab/MedSAM /tmp/LiteMedSAM
    python scripts/freeze_litemedsam_official.py /tmp/LiteMedSAM

The official code runs unmodified, from the checkout, in this process:

1. ``pre_CT_MR.py`` (a subprocess, its own command line) turns each demo case's NIfTI image
   and label into its ``.npz`` of 8-bit slices (CT window 40/400 for the lung CT; percentiles
   of the non-zero voxels for the brain and breast MR), reading the arrays as SimpleITK stores
   them.
2. ``CVPR24_LiteMedSAM_infer.py`` is loaded as a module (its command line: the packaged
   checkpoint, temporary output folders); for each chosen slice, its
   ``MedSAM_infer_npz_2D`` segments a 2D ``.npz`` holding the slice (RGB) and the bounding box
   of the slice's label, and the logits it thresholds are captured where it calls
   ``postprocess_masks`` (upsampled to the slice, before the sigmoid).

Frozen per sample: the case, the stored slice index ``k``, the 8-bit slice, the box (x_min,
y_min, x_max, y_max, stored pixels), the logits (float32) and the official mask.
``tests/models2d/test_litemedsam_official.py`` compares the adapter with them.
"""

from __future__ import annotations

import argparse
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "intrabench" / "resources" / "demo_real"
OUTPUT = ROOT / "tests" / "data" / "litemedsam_official_outputs.npz"
#: (case, modality for pre_CT_MR.py, how many slices): two CT, three MR slices
SAMPLES = (("lung1", "CT", 2), ("brain1", "MR", 2), ("breast1", "MR", 1))


def preprocess_officially(checkout: Path, case: str, modality: str, work: Path) -> dict:
    """``pre_CT_MR.py`` on one case; its npz (imgs (k, y, x) uint8, gts)."""
    images, labels, out = work / f"{case}_img", work / f"{case}_gt", work / f"{case}_npz"
    for folder in (images, labels, out):
        folder.mkdir()
    (images / f"{case}_0000.nii.gz").symlink_to(DEMO / "imagesTr" / f"{case}_0000.nii.gz")
    (labels / f"{case}.nii.gz").symlink_to(DEMO / "labelsTr" / f"{case}.nii.gz")
    subprocess.run(
        [
            sys.executable,
            str(checkout / "pre_CT_MR.py"),
            "-modality",
            modality,
            "-anatomy",
            "Demo",
            "-img_path",
            str(images),
            "-gt_path",
            str(labels),
            "-output_path",
            str(out),
            "-num_workers",
            "1",
        ],
        check=True,
        cwd=work,
    )
    found = sorted(out.rglob("*.npz"))
    if len(found) != 1:
        raise SystemExit(f"pre_CT_MR.py wrote {len(found)} npz files for {case}")
    with np.load(found[0]) as npz:
        return {"imgs": npz["imgs"], "gts": npz["gts"]}


def stored_index(case: str, gt_slice: np.ndarray) -> int:
    """pre_CT_MR.py keeps only labelled slices (after removing specks): the stored index k of
    the label slice that ``gt_slice`` came from (the one it overlaps best, Dice > 0.9)."""
    import SimpleITK as sitk

    label = sitk.GetArrayFromImage(sitk.ReadImage(str(DEMO / "labelsTr" / f"{case}.nii.gz"))) > 0
    kept = gt_slice > 0
    dice = [2 * (kept & slice_).sum() / max(kept.sum() + slice_.sum(), 1) for slice_ in label]
    best = int(np.argmax(dice))
    if dice[best] <= 0.9:
        raise SystemExit(f"{case}: no label slice matches pre_CT_MR.py's (best Dice {dice[best]})")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "checkout", type=Path, help="a checkout of bowang-lab/MedSAM, branch LiteMedSAM"
    )
    args = parser.parse_args()
    checkout = args.checkout.resolve()

    from intrabench.io.checkpoints import packaged_path

    checkpoint = packaged_path("litemedsam")
    work = Path(tempfile.mkdtemp())
    sys.path.insert(0, str(checkout))  # its segment_anything and tiny_vit_sam
    sys.argv = [
        "CVPR24_LiteMedSAM_infer.py",
        "-i",
        str(work),
        "-o",
        str(work / "segs"),
        "-lite_medsam_checkpoint_path",
        str(checkpoint),
        "-device",
        "cpu",
        "-png_save_dir",
        str(work / "png"),
    ]
    official = runpy.run_path(
        str(checkout / "CVPR24_LiteMedSAM_infer.py"), run_name="litemedsam_official"
    )
    model = official["medsam_lite_model"]
    captured: list = []
    original_postprocess = model.postprocess_masks

    def capture(masks, new_size, original_size):
        upsampled = original_postprocess(masks, new_size, original_size)
        captured.append(upsampled[0, 0].numpy().astype(np.float32))
        return upsampled

    model.postprocess_masks = capture

    frozen: dict[str, list] = {key: [] for key in ("case", "k", "image", "box", "logits", "mask")}
    for case, modality, count in SAMPLES:
        npz = preprocess_officially(checkout, case, modality, work)
        areas = (npz["gts"] > 0).sum(axis=(1, 2))
        chosen = sorted(np.argsort(-areas, kind="stable")[:count].tolist())  # largest lesions
        for index in chosen:
            image, gt = npz["imgs"][index], npz["gts"][index] > 0
            rows, cols = np.nonzero(gt)
            box = np.array([cols.min(), rows.min(), cols.max(), rows.max()])
            sample = work / f"2D_{case}_{index}.npz"
            np.savez(sample, imgs=np.repeat(image[:, :, None], 3, axis=-1), boxes=box[None])
            captured.clear()
            official["MedSAM_infer_npz_2D"](str(sample))
            with np.load(work / "segs" / sample.name) as result:
                mask = result["segs"] > 0
            frozen["case"].append(case)
            frozen["k"].append(stored_index(case, npz["gts"][index]))
            frozen["image"].append(image)
            frozen["box"].append(box)
            frozen["logits"].append(captured[0])
            frozen["mask"].append(mask)
            print(f"{case} k={frozen['k'][-1]} box={box.tolist()} mask voxels={int(mask.sum())}")
    arrays = {
        f"{key}_{i}": np.asarray(value)
        for key, values in frozen.items()
        for i, value in enumerate(values)
    }
    np.savez_compressed(OUTPUT, n=len(frozen["case"]), **arrays)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
