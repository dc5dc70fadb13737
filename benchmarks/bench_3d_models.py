"""Speed of the 3D adapters (SAM-Med3D, SAM-Med3D Turbo, SegVol) on the demo data (prints
figures; no asserts).

For each model and each case of ``demo-real`` (anisotropic lung CT, brain and breast MRI),
every target runs one episode: SAM-Med3D(/Turbo) with 'points-per-volume' then
``--steps`` refinements by 'center-error-click' (previous prompts kept); SegVol (not
refinable) once with 'points-per-volume' and once with 'box-3d'. Reported per model:

* seconds per case: ``set_case`` (resampling / normalisation) + all its episodes;
* model seconds per step: the initial prediction vs a refinement step (SAM-Med3D reuses the
  crop's encoding, so a refinement step is decoder-only);
* encoder calls per episode (SAM-Med3D: 1 when the crop's encoding is reused; SegVol: zoom-out
  encoding once per case + one per zoom-in window, windows reused when the ROI repeats) and
  seconds per encoder call.

Default: tiny random-weight configurations on the CPU, which measure the adapter machinery
(resampling, cropping, pasting back, sliding windows), not the real networks. ``--full`` builds
the full-size architectures with random weights (slow on CPU: the SAM-Med3D encoder alone takes
~12 s per 128^3 crop on 2 cores); with checkpoints present use ``--weights checkpoint --full`` on
a GPU. Batching x autocast throughput (cases per minute) and the encoders' FLOP bound:
``benchmarks/bench_throughput.py``.

    .venv/bin/python benchmarks/bench_3d_models.py [--models sam-med3d segvol] [--device cpu]
        [--threads 2] [--steps 3] [--full] [--weights random|checkpoint]
        [--precision auto|fp32|bf16|fp16]
"""

from __future__ import annotations

import argparse
import statistics
import time

from intrabench import registry
from intrabench.engine.episode import run_episode

MODELS = ("sam-med3d", "sam-med3d-turbo", "segvol")


def _model(name: str, args: argparse.Namespace):
    params = {
        "device": args.device,
        "weights": args.weights,
        "tiny": not args.full,
        "precision": args.precision,
    }
    return registry.models.create(name, params)


def _time_encoder(model) -> list[float]:
    """Seconds of every image-encoder forward (hooks; CUDA synchronised when on a GPU)."""
    import torch

    seconds: list[float] = []
    encoder = model.net.image_encoder

    def sync() -> None:
        if model.device.type == "cuda":
            torch.cuda.synchronize()

    def before(module, inputs) -> None:
        sync()
        module._bench_started = time.perf_counter()

    def after(module, inputs, output) -> None:
        sync()
        seconds.append(time.perf_counter() - module._bench_started)

    encoder.register_forward_pre_hook(before)
    encoder.register_forward_hook(after)
    return seconds


def _episodes(name: str, model, case, steps: int) -> list[tuple[str, list]]:
    out = []
    for target in case.targets:
        if name == "segvol":
            for prompter_name in ("points-per-volume", "box-3d"):
                prompter = registry.prompters.create(prompter_name)
                calls = model.encoder_calls
                result = run_episode(case, target, model, prompter, prompter_name, seed=0)
                out.append((prompter_name, result, model.encoder_calls - calls))
        else:
            prompter = registry.prompters.create("points-per-volume")
            refiner = registry.refiners.create("center-error-click")
            calls = model.encoder_calls
            result = run_episode(
                case,
                target,
                model,
                prompter,
                "points-per-volume",
                refiner,
                "center-error-click",
                steps=steps,
                seed=0,
            )
            out.append(
                ("points-per-volume+center-error-click", result, model.encoder_calls - calls)
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--weights", default="random", choices=("random", "checkpoint"))
    parser.add_argument("--full", action="store_true", help="full-size architectures")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    cases = list(registry.datasets.create("demo-real"))  # every case, loaded
    size = "full-size" if args.full else "tiny"
    print(
        f"3D adapters, {size} {args.weights} weights, precision={args.precision}, "
        f"device={args.device}, "
        f"threads={args.threads}, {args.steps} refinement steps; demo-real "
        f"({', '.join(f'{c.case_id} {c.image.shape} @ {tuple(round(s, 2) for s in c.image.spacing)} mm' for c in cases)})"
    )
    header = (
        f"{'model':16s} {'case':8s} {'set_case s':>10s} {'case s':>8s} {'step0 s':>8s} "
        f"{'refine s':>9s} {'enc/episode':>12s} {'dice0':>6s}"
    )
    print(header)
    print("-" * len(header))
    for name in args.models:
        started = time.perf_counter()
        model = _model(name, args)
        build = time.perf_counter() - started
        encoder_seconds = _time_encoder(model)
        first_steps, refine_steps, encoder_calls = [], [], []
        for case in cases:
            case_started = time.perf_counter()
            model.set_case(case.image)
            set_case = time.perf_counter() - case_started
            episodes = _episodes(name, model, case, args.steps)
            case_seconds = time.perf_counter() - case_started
            step0 = [r[0].model_seconds for _, r, _ in episodes]
            refine = [s.model_seconds for _, r, _ in episodes for s in r[1:] if not s.converged]
            calls = [c for _, _, c in episodes]
            first_steps += step0
            refine_steps += refine
            encoder_calls += calls
            dice = statistics.mean(r[0].metrics["dice"] for _, r, _ in episodes)
            print(
                f"{name:16s} {case.case_id:8s} {set_case:10.3f} {case_seconds:8.2f} "
                f"{statistics.mean(step0):8.3f} "
                f"{(statistics.mean(refine) if refine else float('nan')):9.3f} "
                f"{statistics.mean(calls):12.2f} {dice:6.3f}"
            )
        print(
            f"{name:16s} {'ALL':8s} build {build:.2f} s; mean step0 "
            f"{statistics.mean(first_steps):.3f} s, mean refinement step "
            f"{(statistics.mean(refine_steps) if refine_steps else float('nan')):.3f} s, "
            f"encoder calls per episode {statistics.mean(encoder_calls):.2f} "
            f"(min {min(encoder_calls)}, max {max(encoder_calls)}), "
            f"encoder {statistics.mean(encoder_seconds):.3f} s per call "
            f"({len(encoder_seconds)} calls)"
        )


if __name__ == "__main__":
    main()
