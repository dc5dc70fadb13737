"""LiteMedSAM's per-slice pre-processing: the official NumPy/OpenCV steps on the CPU against
the same steps in torch on the model's device (``preprocessing: device``), side by side, with
their results compared to the bit (issue #48 item 3: the card should not wait for the CPU).

Input: ``--cases`` generated CT phantoms (``--shape``, default 80 x 512 x 512, the H100
workload's), encoded in blocks of ``--block`` slices as the adapter does on a GPU (4). Prints
milliseconds per slice of each way (best of ``--repeats``, the device synchronised), their
ratio, and whether every block was equal. On the CPU (``--device cpu``) the torch path is
slower (measured 3.5 ms against 0.7 ms a slice on 2 AVX2 cores), which is why ``auto`` keeps
the official steps there.

Usage: ``python benchmarks/bench_lite_preprocess.py [--device cuda]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", type=int, nargs=3, default=[80, 512, 512])
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--block", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from intrabench import registry

    torch.set_num_threads(2)
    dataset = registry.datasets.create(
        "demo-phantoms", {"n_cases": args.cases, "seed": 7, "shape": args.shape}
    )
    cases = [dataset.load(case_id) for case_id in dataset.case_ids()]
    params = {"device": args.device, "weights": "random", "tiny": True, "batch_size": args.block}
    ways = {
        way: registry.models.create("litemedsam", {**params, "preprocessing": way})
        for way in ("numpy", "device")
    }

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    seconds = {way: float("inf") for way in ways}
    outputs: dict[str, list] = {way: [] for way in ways}
    slices = 0
    for repeat in range(args.repeats + 1):  # the first round warms up (CUDA kernels, cv2)
        for way, model in ways.items():
            elapsed, slices = 0.0, 0
            for case in cases:
                model.set_case(case.image)
                model.intensity_bounds()  # per case, the same for both: not timed
                depth = case.image.shape[0]
                for start in range(0, depth, args.block):
                    zs = list(range(start, min(start + args.block, depth)))
                    sync()
                    began = time.perf_counter()
                    batch = model.preprocess(zs)
                    sync()
                    elapsed += time.perf_counter() - began
                    slices += len(zs)
                    if repeat == 0:
                        # a tensor, or NumPy where the CPU encoder runs without torch
                        outputs[way].append(
                            batch.cpu().numpy() if hasattr(batch, "cpu") else np.asarray(batch)
                        )
            if repeat > 0:
                seconds[way] = min(seconds[way], elapsed)
    equal = all(np.array_equal(a, b) for a, b in zip(outputs["numpy"], outputs["device"]))
    print(
        f"device {args.device}; {len(cases)} phantoms {tuple(args.shape)}; blocks of "
        f"{args.block}; {slices} slices"
    )
    for way in ways:
        print(f"{way:8s} {1000 * seconds[way] / slices:8.3f} ms per slice")
    print(f"device / numpy time: {seconds['device'] / seconds['numpy']:.3f}")
    print(f"equal to the bit: {'yes' if equal else 'NO'}")
    if not equal:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
