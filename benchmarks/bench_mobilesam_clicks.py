"""MobileSAM's click refinement: IntraBench against the careful loop a user writes.

Both are whole commands in fresh processes, timed from launch to exit, on the same phantoms
(written once as NIfTI files and read by each command, as a user's run reads its data; the
files of ``bench_gpu_run.py`` and ``bench_vs_naive.py`` for the same shape and count):

* **careful loop**: ``segment_anything.SamPredictor`` over MobileSAM's network (the one
  IntraBench builds, with the official ``mobile_sam.pt`` weights), written by a user who
  caches: every slice that some target covers is given to ``set_image`` once per case (its
  embedding kept for the case), and every click is one ``predict`` from that embedding: the
  first click of a slice with the three-mask output (the best predicted IoU kept, as SAM does
  for one ambiguous click), every later click with all of the slice's clicks so far and the
  previous low-resolution logits as ``mask_input`` (fed back), single-mask. The clicks come
  from IntraBench's prompter and refiner (``center-point-per-slice``, then
  ``corrective-point-per-slice`` on every slice with an error, ``--steps`` times, with the
  run's random streams): the simulated user is not what is compared.
* **intrabench run**: the same model, prompter, refiner and steps through ``intrabench run``
  (metrics of every step, result rows and the summary table included), at ``precision: fp32``
  (the loop's) and, on CUDA, at the default (``auto``: bf16 autocast) too.

Each command's start (from its launch to its first forward pass: the loop records its first
``set_image``, the run goes through ``benchmarks/timed_command.py``) and its steady state (from
there to its exit) are printed apart, with the steady states' ratios, as in
``bench_vs_naive.py``. The final TP/FP/FN of every episode are compared: on the CPU the run's
masks must equal the loop's (the benchmark stops otherwise); on a GPU the run encodes several
slices per pass where the loop encodes one, so float rounding may move a mask, and the
episodes that differ are counted instead.

Usage::

    python benchmarks/bench_mobilesam_clicks.py --tiny --cases 1 --shape 8 96 96 --lesions 1 2
    # (a CPU check: a small MobileSAM with random weights, one phantom)
    python benchmarks/bench_mobilesam_clicks.py --device cuda --cases 4 --shape 160 512 512

``--tiny`` builds a small MobileSAM with random weights (no checkpoint needed: for a
rehearsal only). The last lines are ``intrabench speed-up over the careful loop: N.NNx``
(whole commands, the fp32 run) and the same for the steady states.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
PROMPTER = "center-point-per-slice"
REFINER = "corrective-point-per-slice"


def model_params(args: argparse.Namespace) -> dict:
    """The MobileSAM parameters of both commands (backend torch: the loop's network)."""
    params: dict = {"device": args.device, "backend": "torch"}
    if args.tiny:
        params.update(tiny=True, weights="random")
    return params


def dataset_cases(dataset: dict) -> Iterator:
    """Every case of a dataset given as in a run config (``{"name": ..., **params}``)."""
    from intrabench import registry

    params = {k: v for k, v in dataset.items() if k not in ("name", "label")}
    loaded = registry.datasets.create(dataset["name"], params)
    for case_id in loaded.case_ids():
        yield loaded.load(case_id)


class CachedSlices:
    """A case's slices for ``SamPredictor``: each slice's embedding computed once (the first
    time a click needs it) and kept for the case."""

    def __init__(self, predictor, image: np.ndarray) -> None:
        # the volume's 0.5th/99.5th percentiles to 0..255, rounded (as the adapter windows)
        values = np.asarray(image, dtype=np.float32)
        low, high = (float(v) for v in np.percentile(values, (0.5, 99.5)))
        high = high if high > low else low + 1.0
        scaled = (np.clip(values, low, high) - low) * (255.0 / (high - low))
        self.scaled = np.rint(scaled).astype(np.uint8)
        self.predictor = predictor
        self.kept: dict[int, tuple] = {}
        self.first_forward_at: float | None = None

    def use(self, z: int) -> None:
        """Make slice ``z``'s embedding the predictor's (computing it the first time)."""
        predictor = self.predictor
        if z not in self.kept:
            if self.first_forward_at is None:
                self.first_forward_at = time.time()
            predictor.set_image(np.repeat(self.scaled[z][..., None], 3, axis=2))
            self.kept[z] = (predictor.features, predictor.original_size, predictor.input_size)
        else:
            predictor.features, predictor.original_size, predictor.input_size = self.kept[z]
            predictor.is_image_set = True


class Episode:
    """One target's clicks per slice, its last low-resolution logits per slice (fed back as
    ``mask_input``) and its predicted mask, bool (z, y, x)."""

    def __init__(self, cached: CachedSlices, predicted: np.ndarray) -> None:
        self.cached, self.predicted = cached, predicted
        self.points: dict[int, list[tuple[int, int, int]]] = {}  # z -> [(x, y, label), ...]
        self.logits: dict[int, np.ndarray] = {}  # z -> (256, 256)

    def add(self, prompt) -> set[int]:
        """Add a prompt's clicks ((z, y, x) voxels); the slices they are on."""
        touched = set()
        for (z, y, x), label in zip(prompt.points, prompt.point_labels):
            self.points.setdefault(int(z), []).append((int(x), int(y), int(label)))
            touched.add(int(z))
        return touched

    def decode(self, z: int) -> None:
        """One ``predict`` of slice ``z`` with its clicks so far and its fed-back logits."""
        predictor = self.cached.predictor
        self.cached.use(z)
        coords = np.array([(x, y) for x, y, _ in self.points[z]], dtype=np.float32)
        labels = np.array([label for _, _, label in self.points[z]])
        feedback = self.logits.get(z)
        multimask = len(self.points[z]) == 1 and feedback is None
        masks, scores, low_res = predictor.predict(
            point_coords=coords,
            point_labels=labels,
            mask_input=None if feedback is None else feedback[None],
            multimask_output=multimask,
        )
        best = int(np.argmax(scores)) if multimask else 0
        self.predicted[z] = masks[best]
        self.logits[z] = low_res[best]


def careful_loop(dataset: dict, params: dict, steps: int, seeds: list[int]) -> dict:
    """The careful click loop over every case, target and seed (runs in the child).

    Returns the count of targets, ``set_image`` calls and clicks decoded, every episode's final
    TP/FP/FN and Dice, and the wall-clock time (seconds since the epoch) of the first
    ``set_image``.
    """
    import torch
    from segment_anything import SamPredictor

    from intrabench import registry
    from intrabench.config import ComponentSpec
    from intrabench.interfaces import PromptContext, RefineContext
    from intrabench.masks import masks_equal
    from intrabench.seeding import derive_rng

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    net = registry.models.create("mobilesam", params).net  # the network intrabench builds
    predictor = SamPredictor(net)
    prompter = registry.prompters.create(PROMPTER, {})
    refiner = registry.refiners.create(REFINER, {})
    prompter_key = ComponentSpec.model_validate(PROMPTER).key
    refiner_key = ComponentSpec.model_validate(REFINER).key
    episodes, encodes, clicks, first = [], 0, 0, None
    for case in dataset_cases(dataset):
        cached = CachedSlices(predictor, case.image.array)
        for target in case.targets:
            truth = case.target_mask(target)
            identity = (case.dataset, case.case_id, target.target_id)
            for seed in seeds:
                episode = Episode(cached, np.zeros_like(truth))
                predicted = episode.predicted
                prompt = prompter.initial(
                    PromptContext(
                        ground_truth=truth,
                        spacing=case.image.spacing,
                        rng=derive_rng(seed, *identity, prompter_key, "initial"),
                    )
                )
                for z in sorted(episode.add(prompt)):
                    episode.decode(z)
                    clicks += 1
                history = [prompt]
                for step in range(1, steps + 1):
                    if masks_equal(predicted, truth):
                        break
                    new = refiner.refine(
                        RefineContext(
                            ground_truth=truth,
                            prediction=predicted.copy(),
                            spacing=case.image.spacing,
                            rng=derive_rng(seed, *identity, prompter_key, refiner_key, step),
                            step=step,
                            model_dimension=2,
                            history=history,
                        )
                    )
                    if new is None or new.is_empty:
                        break
                    history.append(new)
                    for z in sorted(episode.add(new)):
                        episode.decode(z)
                        clicks += 1
                tp = int(np.count_nonzero(predicted & truth))
                fp = int(np.count_nonzero(predicted & ~truth))
                fn = int(np.count_nonzero(~predicted & truth))
                episodes.append(
                    {
                        "case": case.case_id,
                        "target": target.target_id,
                        "seed": seed,
                        "tp": tp,
                        "fp": fp,
                        "fn": fn,
                        "dice": 2 * tp / max(2 * tp + fp + fn, 1),
                    }
                )
        encodes += len(cached.kept)
        if first is None:
            first = cached.first_forward_at
    return {
        "episodes": episodes,
        "encodes": encodes,
        "clicks": clicks,
        "first_forward_at": first,
    }


def run_intrabench(
    dataset: dict, params: dict, steps: int, seeds: list[int], folder: Path, env: dict
) -> tuple[float, float, object]:
    """One whole ``intrabench run`` through ``timed_command.py``: its wall time, its start
    (seconds from its launch to its first forward pass) and its result rows."""
    import pandas as pd
    from bench_vs_naive import timed

    tag = params.get("precision", "default")
    config = folder / f"mobilesam-clicks-{tag}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "mobilesam-clicks",
                "seeds": seeds,
                "datasets": [dataset],
                "models": [{"name": "mobilesam", **params}],
                "prompters": [PROMPTER],
                "refiners": [REFINER],
                "refinement_steps": steps,
                "target_attributes": False,
            }
        )
    )
    spans = folder / f"spans-{tag}.json"
    launched = time.time()
    seconds, _ = timed(
        [
            sys.executable,
            str(HERE / "timed_command.py"),
            "mobilesam",
            str(spans),
            "run",
            str(config),
            "--out",
            str(folder / f"run-{tag}"),
        ],
        env,
    )
    start = json.loads(spans.read_text())["first_forward_at"] - launched
    return seconds, start, pd.read_parquet(folder / f"run-{tag}" / "results.parquet")


def final_counts(rows) -> object:
    """Each episode's last step: TP/FP/FN and Dice, indexed by (case, target, seed)."""
    last = rows.sort_values("step").groupby(["case", "target", "seed"]).last()
    columns = {"true_positives": "tp", "false_positives": "fp", "false_negatives": "fn"}
    return last[[*columns, "dice"]].rename(columns=columns).sort_index()


def main() -> None:
    """Time the careful loop and the run(s), print their starts, steady states and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[32, 256, 256])
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument(
        "--lesions", type=int, nargs=2, default=None, help="lesions per phantom: LOW HIGH"
    )
    parser.add_argument("--steps", type=int, default=3, help="corrective click rounds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", help="a small MobileSAM, random weights")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "intrabench"
        / "bench-phantoms",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the careful loop in its own process
        payload = json.loads(args.child)
        print(
            json.dumps(
                careful_loop(
                    payload["dataset"], payload["params"], payload["steps"], payload["seeds"]
                )
            )
        )
        return

    import pandas as pd

    sys.path.insert(0, str(HERE))
    from bench_gpu_run import PHANTOM_LESIONS, PHANTOM_SEED, phantom_folder_name, write_phantoms
    from bench_vs_naive import timed

    shape = tuple(args.shape)
    lesions = tuple(args.lesions or PHANTOM_LESIONS)
    spec = write_phantoms(
        args.cache / phantom_folder_name(shape, args.cases, PHANTOM_SEED, lesions),
        args.cases,
        shape,
        PHANTOM_SEED,
        lesions,
    )
    dataset = {"name": "folder", "spec": str(spec)}
    params = model_params(args)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env.setdefault("OMP_NUM_THREADS", "2")
    load = os.getloadavg()
    print(
        f"phantoms: {args.cases} x {shape}, {lesions[0]}-{lesions[1]} lesions (NIfTI files), model: mobilesam {params}, "
        f"{args.steps} corrective rounds, seeds {args.seeds}; load average {load[0]:.2f}"
    )
    payload = {"dataset": dataset, "params": {**params, "precision": "fp32"}}
    payload.update(steps=args.steps, seeds=args.seeds)
    launched = time.time()
    loop_seconds, output = timed([sys.executable, __file__, "--child", json.dumps(payload)], env)
    loop = json.loads(output.strip().splitlines()[-1])
    loop_start = loop["first_forward_at"] - launched
    precisions = [{"precision": "fp32"}]
    if args.device.startswith("cuda"):  # the default there is bf16 autocast: that one too
        precisions.append({})
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        for extra in precisions:
            name = f"intrabench run, {extra.get('precision', 'default precision')}"
            runs[name] = run_intrabench(
                dataset, {**params, **extra}, args.steps, args.seeds, Path(folder), env
            )
    looped = pd.DataFrame(loop["episodes"]).set_index(["case", "target", "seed"]).sort_index()
    on_gpu = args.device != "cpu"
    print(
        f"episodes {len(looped)}; careful loop: {loop['encodes']} set_image calls (once per "
        f"slice and case), {loop['clicks']} clicks decoded"
    )
    print(f"{'':34s} {'wall':>8s} {'start':>8s} {'steady':>8s} {'mean Dice':>10s}")
    print(
        f"{'careful loop':34s} {loop_seconds:7.1f}s {loop_start:7.1f}s "
        f"{loop_seconds - loop_start:7.1f}s {looped['dice'].mean():10.4f}"
    )
    for name, (seconds, start, rows) in runs.items():
        ran = final_counts(rows)
        print(
            f"{name:34s} {seconds:7.1f}s {start:7.1f}s {seconds - start:7.1f}s "
            f"{ran['dice'].mean():10.4f}"
        )
    print("(start: from the launch to the first forward pass; steady: from there to the exit)")
    for name, (_, _, rows) in runs.items():
        ran = final_counts(rows)
        if list(ran.index) != list(looped.index):
            sys.exit(f"the loop and {name} saw other episodes: {len(looped)} vs {len(ran)}")
        differ = ran[["tp", "fp", "fn"]].ne(looped[["tp", "fp", "fn"]]).any(axis=1)
        if differ.any() and not on_gpu and name.endswith("fp32"):
            sys.exit(
                f"{name}: masks differ from the careful loop's in {int(differ.sum())} episodes"
            )
        print(
            f"same masks, careful loop and {name} (final TP/FP/FN of {len(ran)} episodes): "
            + ("yes" if not differ.any() else f"no: {int(differ.sum())} differ")
        )
    loop_steady = loop_seconds - loop_start
    for name, (seconds, start, _) in runs.items():
        print(f"{name}, steady state: {loop_steady / (seconds - start):.2f}x the careful loop's")
    seconds = runs["intrabench run, fp32"][0]
    print(f"intrabench speed-up over the careful loop: {loop_seconds / seconds:.2f}x")


if __name__ == "__main__":
    main()
