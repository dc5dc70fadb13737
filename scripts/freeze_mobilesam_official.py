"""Run MobileSAM's official predictor on demo slices and freeze what it produces as the fixture
``tests/data/mobilesam_official_outputs.npz``.

    python scripts/freeze_mobilesam_official.py [--checkpoint PATH]

The official code is the ``mobile_sam`` package (``mobilesam-mirror``, an unmodified packaging of
ChaoningZhang/MobileSAM): ``sam_model_registry["vit_t"]`` with the official ``mobile_sam.pt``
(default: the checkpoint directory's, ``intrabench models download mobilesam``), and its
``SamPredictor``: ``set_image`` on the 8-bit RGB slice, ``predict(..., return_logits=True)``.

The shared input is the 8-bit slice: IntraBench's percentile window of the canonical slice
(``to_uint8``), replicated to RGB, as a user would hand a slice to the predictor. Per case
(lung1, brain1, breast1), on the slice with the largest lesion area, five prompts:

* ``point``: one positive click at the lesion's centre pixel, three masks (the best predicted
  IoU kept, as SAM's rule for a single click);
* ``box``: the lesion's bounding box;
* ``box+points``: the box, a positive click and a negative click outside the lesion;
* ``mask``: the ``box`` prompt's low-res logits fed back with a positive click (refinement);
* ``points``: two positive clicks and one negative, single-mask output.

Frozen per sample: the case, canonical slice index ``z``, the 8-bit slice, the SHA-256 and shape
of the resized input the predictor built (uint8, one channel, before normalisation), points
(y, x) and labels, box (y_min, x_min, y_max, x_max, inclusive; -1 when none), which sample's
low-res logits were fed back as mask input, multimask, the full-resolution logits, and the
chosen low-res logits (256 x 256) of the samples fed back. The test is
``tests/models2d/test_mobilesam.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "tests" / "data" / "mobilesam_official_outputs.npz"
CASES = ("lung1", "brain1", "breast1")


def lesion_slice(case) -> tuple[int, np.ndarray]:
    """The canonical slice with the largest lesion area, and that slice's lesion mask."""
    areas = (case.label > 0).sum(axis=(1, 2))
    z = int(np.argmax(areas))
    return z, case.label[z] > 0


def prompts_for(mask: np.ndarray) -> dict[str, dict]:
    """The five prompts on one slice: points (y, x), labels, box (y0, x0, y1, x1)."""
    ys, xs = np.nonzero(mask)
    box = np.array([ys.min(), xs.min(), ys.max(), xs.max()])
    centre = np.array([int(np.median(ys)), int(np.median(xs))])
    if not mask[tuple(centre)]:  # the lesion pixel nearest to the median
        nearest = np.argmin((ys - centre[0]) ** 2 + (xs - centre[1]) ** 2)
        centre = np.array([ys[nearest], xs[nearest]])
    outside = np.array([max(box[0] - 3, 0), max(box[1] - 3, 0)])
    second = np.array([ys[len(ys) // 3], xs[len(xs) // 3]])
    return {
        "point": {"points": centre[None], "labels": np.array([1]), "box": None, "multimask": True},
        "box": {
            "points": np.zeros((0, 2), int),
            "labels": np.zeros(0, int),
            "box": box,
            "multimask": False,
        },
        "box+points": {
            "points": np.stack([centre, outside]),
            "labels": np.array([1, 0]),
            "box": box,
            "multimask": False,
        },
        "mask": {
            "points": second[None],
            "labels": np.array([1]),
            "box": None,
            "multimask": False,
            "feedback_from": "box",
        },
        "points": {
            "points": np.stack([centre, second, outside]),
            "labels": np.array([1, 1, 0]),
            "box": None,
            "multimask": False,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint", type=Path, help="mobile_sam.pt (default: the checkpoint directory's)"
    )
    args = parser.parse_args()
    import torch

    from intrabench import registry
    from intrabench.io.checkpoints import check_pinned, checkpoint_path
    from intrabench.models.sam_family._sam_common import percentile_window, to_uint8

    path = args.checkpoint or checkpoint_path("mobilesam")
    check_pinned("mobilesam", path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from mobile_sam import SamPredictor, sam_model_registry
    net = sam_model_registry["vit_t"](checkpoint=str(path)).eval()
    predictor = SamPredictor(net)
    dataset = registry.datasets.create("demo-real")
    frozen: dict[str, list] = {}

    def keep(**values) -> None:
        for key, value in values.items():
            frozen.setdefault(key, []).append(np.asarray(value))

    for case_id in CASES:
        case = dataset.load(case_id)
        z, mask = lesion_slice(case)
        eight_bit = to_uint8(case.image.array[z], percentile_window(case.image.array))
        with torch.no_grad():
            predictor.set_image(np.repeat(eight_bit[..., None], 3, axis=2))
        resized = predictor.transform.apply_image(np.repeat(eight_bit[..., None], 3, axis=2))
        low_res_of: dict[str, np.ndarray] = {}
        for name, prompt in prompts_for(mask).items():
            feedback = low_res_of.get(prompt.get("feedback_from", ""))
            points = prompt["points"]
            box = prompt["box"]
            with torch.no_grad():
                logits, scores, low_res = predictor.predict(
                    point_coords=points[:, ::-1].astype(np.float32) if len(points) else None,
                    point_labels=prompt["labels"] if len(points) else None,
                    box=None if box is None else box[[1, 0, 3, 2]].astype(np.float32),
                    mask_input=None if feedback is None else feedback[None],
                    multimask_output=prompt["multimask"],
                    return_logits=True,
                )
            best = int(np.argmax(scores)) if prompt["multimask"] else 0
            low_res_of[name] = low_res[best]
            fed_back = any(p.get("feedback_from") == name for p in prompts_for(mask).values())
            keep(
                case=case_id,
                prompt=name,
                z=z,
                image=eight_bit,
                resized_sha256=hashlib.sha256(np.ascontiguousarray(resized[..., 0])).hexdigest(),
                resized_shape=resized.shape[:2],
                points=points.reshape(-1, 2),
                labels=prompt["labels"],
                box=np.full(4, -1) if box is None else box,
                feedback_from=prompt.get("feedback_from", ""),
                multimask=prompt["multimask"],
                low_res=(low_res[best] if fed_back else np.zeros((0, 0))).astype(np.float32),
                logits=logits[best].astype(np.float32),
            )
            print(
                f"{case_id} z={z} {name:10s} mask voxels={int((logits[best] > 0).sum())} "
                f"score={float(scores[best]):.3f}"
            )
    count = len(frozen["case"])
    arrays = {
        f"{key}_{i}": value for key, values in frozen.items() for i, value in enumerate(values)
    }
    np.savez_compressed(OUTPUT, n=count, **arrays)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes, {count} samples)")


if __name__ == "__main__":
    main()
