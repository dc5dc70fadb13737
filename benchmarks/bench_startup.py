"""Before the first forward pass: the first case's read and the first model's build.

``intrabench run`` builds the first model (torch imported, network built, checkpoint read)
in a thread while it reads the first case (``Runner._prepare_model`` beside
``Runner._first_case``). This benchmark times the two one after the other and side by side,
each in a fresh process (imports included, as in a real run), alternating::

    python benchmarks/bench_startup.py [--variant vit_b] [--repeats 3]

The case is the first CT-sized phantom of ``bench_gpu_run.py --proxy-ms`` (160 x 512 x 512,
written once under ``--cache``); the model is SAM (``--variant``, default vit_b) on the CPU
with a checkpoint of random weights saved once under ``--cache`` (the file a user would have,
same size and layout, no download). It prints the median seconds of each way and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def checkpoint_file(cache: Path, variant: str) -> Path:
    """SAM ``variant`` with random weights as a plain state dict (once; reused when present)."""
    path = cache / f"sam_{variant}_random.pth"
    if not path.exists():
        import torch

        from intrabench import registry

        model = registry.models.create(
            "sam", {"variant": variant, "weights": "random", "device": "cpu"}
        )
        cache.mkdir(parents=True, exist_ok=True)
        torch.save(model.net.state_dict(), path.with_suffix(".partial"))
        path.with_suffix(".partial").rename(path)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB)", file=sys.stderr)
    return path


def one_start(way: str, spec: Path, checkpoint: Path, variant: str) -> dict[str, float]:
    """In this (fresh) process: read the first case and build the model, ``way`` = 'serial'
    or 'overlapped' (as ``Runner.run`` does). Seconds of the whole and of each part."""
    started = time.perf_counter()
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner

    config = RunConfig.model_validate(
        {
            "name": "startup",
            "datasets": [{"name": "folder", "spec": str(spec)}],
            "models": [
                {"name": "sam", "variant": variant, "checkpoint": str(checkpoint), "device": "cpu"}
            ],
            "prompters": ["box-per-slice"],
        }
    )
    with tempfile.TemporaryDirectory() as directory:
        runner = Runner(config, Path(directory), background="inline")
        unit = runner.plan().units[0]
        spans: dict[str, float] = {}

        def build() -> None:
            begun = time.perf_counter()
            runner.executor._prepare_model(unit.model)
            spans["build"] = time.perf_counter() - begun

        def read() -> None:
            begun = time.perf_counter()
            runner.executor._first_case(unit)
            spans["read"] = time.perf_counter() - begun

        begun = time.perf_counter()
        if way == "serial":
            read()
            build()
        else:
            builder = threading.Thread(target=build)
            builder.start()
            read()
            builder.join()
        spans["both"] = time.perf_counter() - begun
        runner.close()
    spans["process"] = time.perf_counter() - started
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="vit_b", choices=["vit_b", "vit_l", "vit_h"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "intrabench"
        / "bench-phantoms",
    )
    parser.add_argument("--one", choices=["serial", "overlapped"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_start(args.one, args.spec, args.checkpoint, args.variant)))
        return

    from bench_gpu_run import write_phantoms

    spec = write_phantoms(args.cache / "160x512x512-n2", 2, (160, 512, 512))
    checkpoint = checkpoint_file(args.cache, args.variant)
    results: dict[str, list[dict[str, float]]] = {"serial": [], "overlapped": []}
    for _ in range(args.repeats):
        for way in results:
            output = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    way,
                    "--spec",
                    str(spec),
                    "--checkpoint",
                    str(checkpoint),
                    "--variant",
                    args.variant,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[way].append(json.loads(output.strip().splitlines()[-1]))
    print(
        f"SAM {args.variant} from a checkpoint on the CPU + the first phantom case, "
        f"{args.repeats} fresh processes each, median seconds"
    )
    print(f"{'':12s} {'read':>6s} {'build':>6s} {'both':>6s} {'process':>8s}")
    medians = {}
    for way, runs in results.items():
        medians[way] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        m = medians[way]
        print(f"{way:12s} {m['read']:6.2f} {m['build']:6.2f} {m['both']:6.2f} {m['process']:8.2f}")
    print(
        f"first case and model ready: {medians['serial']['both']:.2f} s -> "
        f"{medians['overlapped']['both']:.2f} s "
        f"({medians['serial']['both'] / medians['overlapped']['both']:.2f}x)"
    )


if __name__ == "__main__":
    main()
