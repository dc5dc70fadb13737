"""Throughput of the torch model adapters: cases per minute with and without batching and
autocast, and each image encoder's FLOPs and achieved TFLOP/s against the device's peak
(prints figures; no asserts).

Part ``cases``: for each model, the ``demo-real`` cases run end to end (``set_case`` with cold
caches, every target, the prompters below, metrics included) for each combination of

* batching: 2D models encode ``batch_size`` 1 vs 4 slices per encoder pass. For the 3D models
  batching does not apply: SAM-Med3D encodes one prompt-centred 128^3 crop per episode (the
  crop depends on the prompt, so there is nothing to stack within an episode, and its
  refinement steps reuse the encoding); SegVol encodes its zoom-out once per case and then one
  zoom-in window at a time (every demo-real ROI fits in one 32x256x256 window);
* precision: each of ``--precisions`` (default 'fp32', i.e. no autocast, and 'bf16' autocast;
  'fp16' only on CUDA).

Protocol per case: 2D models: up to three accepted prompters among box-per-slice,
center-point-per-slice, points-per-slice, box-3d, box-interpolation, each followed by
``--steps`` center-error-click refinements where the model takes a mask; SAM-Med3D:
points-per-volume + ``--steps`` refinements; SegVol: points-per-volume and box-3d. Printed:
cases/min (best of ``--repeats`` passes, interleaved across the combinations, after an untimed
warm-up case), the image encoder's share of that time and its number of forward passes, the
speed-up over the baseline (batch 1 or -, fp32) and the Dice between each combination's masks
and the baseline's (how much autocast changes the result; batching should not change it).

Part ``encoders``: for each model, one image-encoder forward pass on a random input of the
network's size: FLOPs (``intrabench.testing.flops``: matrix products and convolutions, 2 per
multiply-accumulate), seconds per pass (median of ``--passes`` after a warm-up pass, CUDA
synchronised), images/s, achieved TFLOP/s, and the share of the device's peak: on CUDA the
datasheet peak of the card (matched on ``torch.cuda.get_device_name()``; fp32 uses the
CUDA-core FP32 rate unless torch lets fp32 matmuls use TF32), or ``--peak-tflops`` (and
``--peak-tflops-half``); on the CPU only with ``--peak-tflops``. Also printed: the TFLOP/s of a
large square linear layer in each precision on the same device (a practical ceiling; "% GEMM").

``--tiny`` (default) builds tiny random-weight configurations (the adapter machinery, not the
real networks); ``--no-tiny`` the full-size architectures (random weights are fine for timing;
``--weights checkpoint`` loads the real ones). sam-med3d-turbo has the architecture and
pipeline of sam-med3d; name it with ``--models`` to include it.

    .venv/bin/python benchmarks/bench_throughput.py [--part cases encoders]
        [--models sam sam2 medsam sam-med2d sam-med3d segvol vista3d nninteractive medsam2] [--device cpu|cuda]
        [--tiny|--no-tiny] [--weights random|checkpoint] [--precisions fp32 bf16|fp16]
        [--variants sam=vit_b] [--threads 2] [--repeats 1] [--steps 2] [--passes 3]
        [--encoder-batch 1] [--peak-tflops X] [--peak-tflops-half Y]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.interfaces import incompatibility
from intrabench.models.runtime._precision import forward_context, resolve_precision
from intrabench.testing.flops import (
    achieved_tflops,
    count_flops,
    cuda_fp32_matmul_uses_tf32,
    lookup_gpu,
)

MODELS = (
    "sam",
    "sam2",
    "medsam",
    "sam-med2d",
    "sam-med3d",
    "segvol",
    "vista3d",
    "nninteractive",
    "medsam2",
)
PROMPTERS_2D = (
    "box-per-slice",
    "center-point-per-slice",
    "points-per-slice",
    "box-3d",
    "box-interpolation",
)
REFINER = "center-error-click"


# --------------------------------------------------------------------------------------
# Shared
# --------------------------------------------------------------------------------------


def build(name: str, args: argparse.Namespace, **params: Any) -> Any:
    """The adapter ``name`` with the command line's device, weights, size and variant."""
    chosen = {"device": args.device, "weights": args.weights, "tiny": args.tiny, "seed": 0}
    if name in args.variants:
        chosen["variant"] = args.variants[name]
    return registry.models.create(name, {**chosen, **params})


def synchronize(device: Any) -> None:
    import torch

    if getattr(device, "type", str(device)).startswith("cuda"):
        torch.cuda.synchronize(device)


def dice(a: np.ndarray, b: np.ndarray) -> float:
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2.0 * int((a & b).sum()) / total


def encoder_module(model: Any) -> Any:
    """The image-encoder torch module of an adapter (the SAM family, SegVol and VISTA3D wrap
    one ``image_encoder``; nnInteractive's U-Net is timed whole: image and interactions in,
    mask out)."""
    if model.name == "nninteractive":
        return model.session.network
    return model.net.image_encoder


def encoder_call(model: Any) -> tuple[Callable[[Any], Any], tuple[int, ...]]:
    """(what the adapter runs to encode a batch, shape of one input image (C, *spatial))."""
    if model.name == "nninteractive":  # image + interaction channels, one patch
        session = model.session
        return session.network, (
            1 + session.num_interaction_channels,
            *session.configuration_manager.patch_size,
        )
    net = model.net
    if model.name in ("sam2", "medsam2"):  # trunk + neck + the high-resolution convolutions
        return net.forward_image, (3, net.image_size, net.image_size)
    if model.dimension == 2:
        size = net.image_encoder.img_size
        return net.image_encoder, (3, size, size)
    if model.name == "segvol":
        return net.encode, (1, *model.config.spatial_size)
    if model.name == "vista3d":  # the SegResNetDS2 encoder on one point-centred window
        return net.image_encoder, (1, *model.roi_size)
    return net.image_encoder, (1, *(model.config.image_size,) * 3)


# --------------------------------------------------------------------------------------
# Part 1: cases per minute
# --------------------------------------------------------------------------------------


def episodes_of(model: Any) -> list[tuple[str, str | None]]:
    """(prompter, refiner or None) pairs run for every target."""
    model_cls = type(model)
    refinable = incompatibility(model_cls, None, registry.refiners.get(REFINER)) is None
    refiner = REFINER if refinable else None
    if model.dimension == 2:
        prompters = [
            p for p in PROMPTERS_2D if incompatibility(model_cls, registry.prompters.get(p)) is None
        ][:3]
    elif refinable:
        prompters = ["points-per-volume"]
    else:
        prompters = [
            p
            for p in ("points-per-volume", "box-3d")
            if incompatibility(model_cls, registry.prompters.get(p)) is None
        ]
    return [(p, refiner) for p in prompters]


def run_cases(model: Any, cases: list, steps: int) -> list[np.ndarray]:
    """Every case, target and episode of the protocol; the masks of every step, in order."""
    masks = []
    for case in cases:
        model.set_case(dataclasses.replace(case.image))  # a new image: caches start cold
        for target in case.targets:
            for prompter, refiner in episodes_of(model):
                results = run_episode(
                    case,
                    target,
                    model,
                    registry.prompters.create(prompter),
                    prompter,
                    registry.refiners.create(refiner) if refiner else None,
                    refiner or "",
                    steps=steps if refiner else 0,
                )
                masks += [result.prediction.mask for result in results]
    return masks


def time_encoder(model: Any) -> list[float]:
    """Seconds of every image-encoder forward pass from now on (CUDA synchronised)."""
    seconds: list[float] = []
    started: list[float] = []
    module = encoder_module(model)

    def before(_module: Any, _inputs: Any) -> None:
        synchronize(model.device)
        started.append(time.perf_counter())

    def after(_module: Any, _inputs: Any, _output: Any) -> None:
        synchronize(model.device)
        seconds.append(time.perf_counter() - started.pop())

    module.register_forward_pre_hook(before)
    module.register_forward_hook(after)
    return seconds


@dataclasses.dataclass
class Combination:
    """One (batching, precision) setting of a model and its best timed pass."""

    batch: int | None
    precision: str
    model: Any
    encoder_seconds: list[float]
    best: float = float("inf")
    encoder_share: float = 0.0
    encoder_calls: int = 0
    masks: list[np.ndarray] = dataclasses.field(default_factory=list)

    def timed_pass(self, cases: list, steps: int) -> None:
        self.encoder_seconds.clear()
        synchronize(self.model.device)
        started = time.perf_counter()
        masks = run_cases(self.model, cases, steps)
        synchronize(self.model.device)
        seconds = time.perf_counter() - started
        if seconds < self.best:
            self.best, self.masks = seconds, masks
            self.encoder_share = sum(self.encoder_seconds) / seconds
            self.encoder_calls = len(self.encoder_seconds)


def bench_cases(name: str, cases: list, args: argparse.Namespace) -> None:
    """Cases per minute of ``name`` for batching x precision; the combinations' timed passes
    are interleaved (A B C D A B C D ...) so that a disturbance hits them alike."""
    dimension = registry.models.get(name).dimension
    batches = (1, 4) if dimension == 2 else (None,)
    combinations = []
    for precision in args.precisions:
        for batch in batches:
            params = {"precision": precision}
            if batch is not None:
                params["batch_size"] = batch
            try:
                model = build(name, args, **params)
            except Exception as error:  # noqa: BLE001 - a missing checkpoint skips the model
                print(f"{name:16s} skipped: {error}")
                return
            run_cases(model, cases[:1], args.steps)  # warm-up: first-call allocations, imports
            combinations.append(Combination(batch, precision, model, time_encoder(model)))
    for _ in range(args.repeats):
        for combination in combinations:
            combination.timed_pass(cases, args.steps)
    baseline = combinations[0]
    for combination in combinations:
        rate = 60.0 * len(cases) / combination.best
        agreement = [dice(a, b) for a, b in zip(combination.masks, baseline.masks)]
        batch = "-" if combination.batch is None else str(combination.batch)
        print(
            f"{name:16s} {batch:>5s} {combination.precision:>9s} {rate:9.2f} "
            f"{combination.best / len(cases):8.2f} {100 * combination.encoder_share:6.1f}% "
            f"{combination.encoder_calls:6d} {baseline.best / combination.best:7.2f}x "
            f"{statistics.mean(agreement):9.4f} {min(agreement):8.4f}"
        )


# --------------------------------------------------------------------------------------
# Part 2: encoder FLOPs against the device's peak
# --------------------------------------------------------------------------------------


def peak_tflops(precision: str, args: argparse.Namespace, device: Any) -> tuple[float | None, str]:
    """(peak TFLOP/s for ``precision`` on ``device`` or None, where the figure comes from)."""
    override = (
        args.peak_tflops if precision == "fp32" else (args.peak_tflops_half or args.peak_tflops)
    )
    if override:
        return override, "--peak-tflops" + ("" if precision == "fp32" else "-half")
    if device.type == "cuda":
        import torch

        card_name = torch.cuda.get_device_name(device)
        card = lookup_gpu(card_name)
        if card is None:
            return (
                None,
                f"'{card_name}' not in intrabench.testing.flops.KNOWN_GPUS: pass --peak-tflops",
            )
        tf32 = precision == "fp32" and cuda_fp32_matmul_uses_tf32()
        kind = (
            "TF32 tensor"
            if tf32
            else ("FP32" if precision == "fp32" else f"{precision.upper()} tensor")
        )
        return card.for_precision(precision, tf32), f"{card.name} dense {kind}, {card.source}"
    return None, "no CPU peak known: pass --peak-tflops for a ratio"


def gemm_tflops(device: Any, precision: str, size: int, passes: int = 5) -> float:
    """TFLOP/s of a ``size`` x ``size`` by ``size`` x ``size`` linear layer (what most encoder
    FLOPs are) in float32 or under autocast to ``precision`` (best of ``passes``)."""
    import torch

    inputs = torch.randn(size, size, device=device)
    weight = torch.randn(size, size, device=device)
    best = float("inf")
    with forward_context(device, precision):
        for index in range(passes + 1):
            synchronize(device)
            started = time.perf_counter()
            torch.nn.functional.linear(inputs, weight)
            synchronize(device)
            if index:  # the first pass warms up
                best = min(best, time.perf_counter() - started)
    return achieved_tflops(2.0 * size**3, best)


def parse_options(text: str) -> dict[str, Any]:
    """``attention=fused,encoder_weights=bf16,compile=true`` -> adapter parameters."""
    options: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        options[key] = {"true": True, "false": False}.get(value.lower(), value)
    return options


def bench_encoder(name: str, args: argparse.Namespace) -> None:
    for text in args.encoder_options:
        try:
            model = build(name, args, **parse_options(text))
            run, shape = encoder_call(model)
        except Exception as error:  # noqa: BLE001 - a missing checkpoint or option skips it
            print(f"{name:16s} {text or '-':>36s} skipped: {error}")
            continue
        time_encoder_options(name, text or "-", model, run, shape, args)


def time_encoder_options(
    name: str,
    label: str,
    model: Any,
    run: Callable[[Any], Any],
    shape: tuple[int, ...],
    args: argparse.Namespace,
) -> None:
    import torch

    device = model.device
    generator = torch.Generator().manual_seed(0)
    batch = torch.randn((args.encoder_batch, *shape), generator=generator).to(device)
    flops = None
    for precision in args.precisions:
        with forward_context(device, precision):
            if flops is None:  # counting pass doubles as the first warm-up (and compiles)
                flops = count_flops(lambda: run(batch))
            else:
                run(batch)
            seconds = []
            for _ in range(args.passes):
                synchronize(device)
                started = time.perf_counter()
                run(batch)
                synchronize(device)
                seconds.append(time.perf_counter() - started)
        per_pass = statistics.median(seconds)
        tflops = achieved_tflops(flops, per_pass)
        peak = args.peaks[precision][0]
        share = f"{100 * tflops / peak:7.2f}%" if peak else f"{'-':>8s}"
        print(
            f"{name:16s} {label:>36s} {'x'.join(map(str, shape)):>14s} "
            f"{args.encoder_batch:3d} {flops / 1e9 / args.encoder_batch:9.3f} {precision:>5s} "
            f"{per_pass:9.3f} {args.encoder_batch / per_pass:8.2f} {tflops:8.4f} {share} "
            f"{100 * tflops / args.gemm[precision]:7.1f}%"
        )


# --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", nargs="+", default=["cases", "encoders"], choices=["cases", "encoders"]
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ...")
    parser.add_argument(
        "--tiny",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tiny test configurations (default) or the full-size networks",
    )
    parser.add_argument("--weights", default="random", choices=["random", "checkpoint"])
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["fp32", "bf16"],
        choices=["fp32", "bf16", "fp16"],
        help="the first is the baseline; bf16/fp16 autocast (fp16: CUDA only)",
    )
    parser.add_argument(
        "--variants",
        nargs="*",
        default=[],
        metavar="MODEL=VARIANT",
        help="e.g. sam=vit_b sam2=sam2.1-hiera-tiny",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1, help="timed passes over the cases")
    parser.add_argument("--steps", type=int, default=2, help="refinement steps per episode")
    parser.add_argument("--passes", type=int, default=3, help="timed encoder passes")
    parser.add_argument("--encoder-batch", type=int, default=1, help="images per encoder pass")
    parser.add_argument(
        "--encoder-options",
        nargs="+",
        default=[""],
        metavar="K=V,K=V",
        help="adapter speed options per timed row, e.g. '' 'attention=fused' "
        "'attention=fused,encoder_weights=bf16,compile=true'",
    )
    parser.add_argument(
        "--gemm-size",
        type=int,
        default=None,
        help="size of the linear-layer ceiling (default 1024 on CPU, 8192 on CUDA)",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="device peak TFLOP/s for fp32 (and bf16/fp16 unless --peak-tflops-half)",
    )
    parser.add_argument(
        "--peak-tflops-half", type=float, default=None, help="device peak TFLOP/s for bf16/fp16"
    )
    args = parser.parse_args()
    args.variants = dict(item.split("=", 1) for item in args.variants)
    return args


def main() -> None:
    args = parse_args()

    import torch

    from intrabench.device import select_device

    torch.set_num_threads(args.threads)
    device = select_device(args.device)
    for precision in args.precisions:  # fp16 on the CPU: a clear error before any work
        try:
            resolve_precision(precision, device)
        except ValueError as error:
            raise SystemExit(f"bench_throughput.py: {error}") from None
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"device {device} ({name}), {args.threads} torch threads, torch {torch.__version__}, "
        f"{'tiny' if args.tiny else 'full-size'} networks, weights={args.weights}"
        f"{', variants ' + str(args.variants) if args.variants else ''}"
    )
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        print(
            f"note: this CPU ({torch.backends.cpu.get_cpu_capability()}) has no native bf16: "
            f"bf16 autocast is emulated here and slower than fp32"
        )

    if "cases" in args.part:
        cases = list(registry.datasets.create("demo-real"))  # every case, loaded
        shapes = ", ".join(f"{c.case_id} {c.image.shape}" for c in cases)
        print(
            f"\ncases per minute on demo-real ({shapes}); {args.steps} refinement steps; "
            f"best of {args.repeats} interleaved pass(es) after a warm-up case"
        )
        header = (
            f"{'model':16s} {'batch':>5s} {'precision':>9s} {'cases/min':>9s} "
            f"{'s/case':>8s} {'enc %':>7s} {'encs':>6s} {'vs base':>8s} "
            f"{'Dice mean':>9s} {'Dice min':>8s}"
        )
        print(header + "\n" + "-" * len(header))
        for model_name in args.models:
            bench_cases(model_name, cases, args)
        print(
            "vs base: speed-up over the model's first row (batch 1 or -, first precision); "
            "Dice: the "
            "masks of every episode step against that row's; encs: encoder forward passes"
        )

    if "encoders" in args.part:
        size = args.gemm_size or (8192 if device.type == "cuda" else 1024)
        args.gemm = {p: gemm_tflops(device, p, size) for p in args.precisions}
        args.peaks = {p: peak_tflops(p, args, device) for p in args.precisions}
        print(
            f"\nimage encoders: random input, median of {args.passes} timed passes after a "
            f"warm-up pass"
        )
        for precision in args.precisions:
            peak, source = args.peaks[precision]
            print(
                f"  {precision}: peak {f'{peak:g} TFLOP/s ({source})' if peak else source}; "
                f"GEMM ceiling ({size}^2 x {size} linear layer) "
                f"{args.gemm[precision]:.4f} TFLOP/s"
            )
        header = (
            f"{'model':16s} {'options':>36s} {'input':>14s} {'B':>3s} {'GFLOP/img':>9s} {'prec':>5s} "
            f"{'s/pass':>9s} {'img/s':>8s} {'TFLOP/s':>8s} {'% peak':>8s} {'% GEMM':>8s}"
        )
        print(header + "\n" + "-" * len(header))
        for model_name in args.models:
            bench_encoder(model_name, args)


if __name__ == "__main__":
    main()
