"""``intrabench review build``: a self-contained, blinded rating site for a run's masks.

Layout of ``OUT``::

    OUT/index.html          the page (its script and style inline; works from file://)
    OUT/jobs/manifest.js    the review's id and its jobs, in the order raters see them
    OUT/jobs/job-001.js ... one job each, loaded when shown

Nothing in ``OUT`` names a model, prompter or configuration: the key from job to result row is
kept in the run directory, ``RUN/reviews/<review id>/key.csv``, for ``review import``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from intrabench.errors import UserError
from intrabench.review.render import job_data, job_script
from intrabench.review.sampling import (
    MASK_KEYS,
    candidate_masks,
    describe_sample,
    review_id,
    sample_masks,
)
from intrabench.types import prompt_until


@dataclass
class BuiltReview:
    """What :func:`build_review` made.

    Attributes:
        review_id: The review's identifier, recorded with each rating.
        site: The folder of the static page to hand to raters.
        key: The file mapping blinded jobs back to the run's rows (kept away from raters).
        jobs: The number of masks to rate.
        spread: What was sampled, one line per factor (``model: a 4, b 4, c 4``).
    """

    review_id: str
    site: Path
    key: Path
    jobs: int
    #: what was sampled, one line per factor (``model: a 4, b 4, c 4``)
    spread: list[str]


def _prompt_history(rows: pd.DataFrame, sample: pd.DataFrame) -> list[str | None]:
    """Per sampled mask: ``prompt_json`` of steps 0..its step, newline-joined (None when the
    run's rows carry no prompt geometry)."""
    if "prompt_json" not in rows:
        return [None] * len(sample)
    episode = [k for k in MASK_KEYS if k != "step"]
    indexed = rows.set_index(episode).sort_index()
    found = []
    for _, mask in sample.iterrows():
        # a list of one key: a frame even for an episode of one step (no refinement)
        steps = indexed.loc[[tuple(mask[k] for k in episode)]]
        steps = steps[steps["step"] <= mask["step"]].sort_values("step")
        found.append("\n".join(steps["prompt_json"].fillna("")))
    return found


def build_review(
    run_dir: str | Path, out: str | Path, n: int = 200, seed: int = 0, progress: bool | None = None
) -> BuiltReview:
    """Sample up to ``n`` saved masks of ``run_dir`` (see :mod:`intrabench.review.sampling`) and
    write the rating site to ``out``.

    Args:
        run_dir: A run directory that saved predictions (``save_predictions: true`` or
            ``all``).
        out: The folder of the rating site (created); the blinded key goes into
            ``run_dir/reviews/<review id>/``.
        n: The most masks to rate (at least 1).
        seed: Seeds the sample and the shuffled job order: the same seed gives the same review.
        progress: Show a progress bar; None: when standard error is a terminal.

    Returns:
        Where things went: the review id, the site, the key file, the job count and the spread
        of the sample.

    Raises:
        UserError: ``n`` is below 1, or the run saved no predictions to rate.
    """
    from intrabench.config import run_config, run_dataset
    from intrabench.io.results import atomic_write_text, load_results
    from intrabench.io.volume import read_volume
    from intrabench.modality import looks_like_ct

    run_dir, out = Path(run_dir), Path(out)
    progress = sys.stderr.isatty() if progress is None else progress
    if n < 1:
        raise UserError("--n: give at least 1 mask to rate")
    rows = load_results(run_dir)
    candidates = candidate_masks(rows, run_dir)
    if candidates.empty:
        raise UserError(
            f"{run_dir} saved no predictions to rate: run it with "
            "'save_predictions: true' (final masks) or 'all' (every step)"
        )
    sample = sample_masks(candidates, n, seed)
    identity = review_id(sample, seed)
    config = run_config(run_dir)
    keep_previous = bool(config.keep_previous_prompts)
    histories = _prompt_history(rows, sample)
    (out / "jobs").mkdir(parents=True, exist_ok=True)
    datasets: dict[str, object] = {}
    case_cache: dict[tuple[str, str], object] = {}
    # rendered case by case (the jobs' shuffled order would read a case once per job)
    order = sample.sort_values(["dataset", "case"], kind="stable").index
    for done, index in enumerate(order, start=1):
        mask = sample.loc[index]
        key = str(mask["dataset"])
        if key not in datasets:
            datasets[key] = run_dataset(run_dir, config, key)
        identity_case = (key, str(mask["case"]))
        if identity_case not in case_cache:
            case_cache.clear()  # one case in memory
            case_cache[identity_case] = datasets[key].load(str(mask["case"]))
        case = case_cache[identity_case]
        target = next(t for t in case.targets if t.target_id == str(mask["target"]))
        prediction = read_volume(mask["mask_file"]).array > 0.5
        if prediction.shape != case.label.shape:
            raise UserError(
                f"{mask['mask_file']}: its grid {prediction.shape} is not the "
                f"image's {case.label.shape}"
            )
        image = np.asarray(case.image.array)
        steps = (histories[index] or "").split("\n")
        prompt = prompt_until(steps, keep_previous)
        data = job_data(
            str(mask["job"]),
            image,
            case.image.spacing,
            looks_like_ct(image, str(getattr(datasets[key], "modality", ""))),
            prediction,
            case.target_mask(target),
            prompt,
            latest=prompt_until(steps[-1:], keep_previous=False),
        )
        atomic_write_text(out / "jobs" / f"{mask['job']}.js", job_script(data))
        if progress:
            print(f"\rrendering masks: {done}/{len(sample)}", end="", file=sys.stderr)
    print(("\n" if progress else "") + f"rendered {len(sample)} masks", file=sys.stderr)
    manifest = {"review": identity, "jobs": sample["job"].tolist(), "seed": seed}
    atomic_write_text(
        out / "jobs" / "manifest.js", f"window.intrabenchManifest = {json.dumps(manifest)};\n"
    )
    page = resources.files("intrabench.review").joinpath("page.html").read_text(encoding="utf-8")
    atomic_write_text(out / "index.html", page)
    key_path = run_dir / "reviews" / identity / "key.csv"
    key = sample[["job", *MASK_KEYS]].copy()
    key.insert(1, "review", identity)
    atomic_write_text(key_path, key.to_csv(index=False))
    spread = describe_sample(sample)
    atomic_write_text(
        key_path.with_name("sample.txt"),
        f"{len(sample)} of {len(candidates)} saved masks (seed {seed})\n"
        + "\n".join(spread)
        + "\n",
    )
    return BuiltReview(identity, out / "index.html", key_path, len(sample), spread)
