"""Speed of the 2D SAM-family adapters on the demo data (prints figures; no asserts).

For each model (sam, sam2, medsam, sam-med2d) and each case of the ``demo-real`` dataset, every
target is run with three prompters (those the model accepts among box-per-slice,
center-point-per-slice, points-per-slice; MedSAM: box-per-slice, box-3d, box-interpolation)
and, where the model takes a mask, the 'center-error-click' refiner for 2 steps. Reported per
model:

* encoder calls (slices encoded) vs distinct prompted slices: equal when the embedding cache
  works (one encode per (case, slice), reused across targets, prompters and steps) and
  ``batch_size`` is 1 (the default off CUDA); with blocks of 4 (the CUDA default) "encoded"
  also counts the neighbours that share a prompted slice's block;
* encoder batches and seconds, prompt-decoder calls and mean milliseconds per decode;
* end-to-end seconds per case (set_case + all episodes, metrics included);
* encoder images/second with batch_size 1 vs batch_size 4 on the same slices.

Default: tiny random-weight configurations on the CPU (``--weights random --tiny``), which
measure the adapter machinery, not the real networks. With checkpoints present,
``--weights checkpoint --no-tiny`` runs the real models (use a GPU).

    .venv/bin/python benchmarks/bench_2d_models.py [--models sam sam2] [--device cpu]
        [--threads 2] [--weights random|checkpoint] [--no-tiny] [--precision auto|fp32|bf16|fp16]

Batching x autocast throughput (cases per minute) and the encoders' FLOP bound:
``benchmarks/bench_throughput.py``.
"""

from __future__ import annotations

import argparse
import time

from intrabench import registry
from intrabench.engine.episode import run_episode
from intrabench.interfaces import incompatibility

MODELS = ("sam", "sam2", "medsam", "sam-med2d")
PROMPTERS = (
    "box-per-slice",
    "center-point-per-slice",
    "points-per-slice",
    "box-3d",
    "box-interpolation",
)
REFINER = "center-error-click"


def _model(name: str, args: argparse.Namespace, **extra):
    params = {"device": args.device, "weights": args.weights, "precision": args.precision, **extra}
    if args.tiny:
        params["tiny"] = True
    return registry.models.create(name, params)


def bench_model(name: str, cases: list, args: argparse.Namespace) -> dict[str, float]:
    model = _model(name, args)
    model_cls = type(model)
    prompters = [
        p for p in PROMPTERS if incompatibility(model_cls, registry.prompters.get(p)) is None
    ][:3]
    refinable = incompatibility(model_cls, None, registry.refiners.get(REFINER)) is None
    _ = model.net  # build (and load) outside the timings
    distinct, case_seconds, episodes = 0, [], 0
    for case in cases:
        started = time.perf_counter()
        model.set_case(case.image)
        prompted: set[int] = set()
        for target in case.targets:
            for prompter_name in prompters:
                refiner = registry.refiners.create(REFINER) if refinable else None
                results = run_episode(
                    case,
                    target,
                    model,
                    registry.prompters.create(prompter_name),
                    prompter_name,
                    refiner,
                    REFINER,
                    steps=2 if refinable else 0,
                )
                episodes += 1
                for result in results:
                    prompted |= set(result.prompt.slices())
        case_seconds.append(time.perf_counter() - started)
        distinct += len(prompted)
    stats = model.stats
    return {
        "prompters": ",".join(prompters),
        "episodes": episodes,
        "refined": refinable,
        "distinct": distinct,
        "encoded": stats.slices_encoded,
        "batches": stats.encoder_batches,
        "encoder_s": stats.encoder_seconds,
        "decodes": stats.decoder_calls,
        "decode_ms": 1000 * stats.decoder_seconds / max(1, stats.decoder_calls),
        "case_s": sum(case_seconds) / len(case_seconds),
    }


def encoder_throughput(
    name: str, case, args: argparse.Namespace, batch_size: int, repeats: int = 3
) -> float:
    """Images per second of preprocess + encoder for all slices of ``case``."""
    model = _model(name, args, batch_size=batch_size)
    _ = model.net
    zs = list(range(case.image.shape[0]))
    best = float("inf")
    for _ in range(repeats):
        model.set_case(case.image)
        model.on_new_case(case.image)
        started = time.perf_counter()
        for z in zs:
            model.embedding(z)
        best = min(best, time.perf_counter() - started)
    return len(zs) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--weights", default="random", choices=["random", "checkpoint"])
    parser.add_argument("--no-tiny", dest="tiny", action="store_false")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    cases = list(registry.datasets.create("demo-real"))  # every case, loaded
    shapes = ", ".join(f"{c.case_id} {c.image.shape}" for c in cases)
    print(
        f"demo-real: {shapes}; device {args.device}, {args.threads} threads, "
        f"weights={args.weights}, tiny={args.tiny}, precision={args.precision}"
    )
    header = (
        f"{'model':10} {'episodes':>8} {'distinct':>8} {'encoded':>7} {'batches':>7} "
        f"{'enc s':>6} {'decodes':>7} {'ms/dec':>7} {'s/case':>7} "
        f"{'img/s b1':>8} {'img/s b4':>8}"
    )
    print(header)
    print("-" * len(header))
    for name in args.models:
        row = bench_model(name, cases, args)
        single = encoder_throughput(name, cases[0], args, batch_size=1)
        batched = encoder_throughput(name, cases[0], args, batch_size=4)
        print(
            f"{name:10} {row['episodes']:8d} {row['distinct']:8d} {row['encoded']:7d} "
            f"{row['batches']:7d} {row['encoder_s']:6.2f} {row['decodes']:7d} "
            f"{row['decode_ms']:7.1f} {row['case_s']:7.2f} {single:8.1f} {batched:8.1f}"
        )
        print(
            f"{'':10} prompters: {row['prompters']}; refiner: "
            f"{REFINER + ' x2' if row['refined'] else 'none (no mask input)'}"
        )


if __name__ == "__main__":
    main()
