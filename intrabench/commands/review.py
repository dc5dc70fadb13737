"""``intrabench review build`` and ``intrabench review import``: masks rated by people."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from intrabench.commands._arguments import count, resamples


def cmd_review_build(args: argparse.Namespace) -> int:
    """``intrabench review build``: a blinded site of sampled masks to rate; returns the exit
    status.

    Args:
        args: The parsed command line: ``run_dir``, ``n`` (masks), ``seed``, ``out`` (default
            ``RUN_DIR/review-site``).

    Returns:
        0 once the site is written.
    """
    from intrabench.review.build import build_review

    out = Path(args.out) if args.out else Path(args.run_dir) / "review-site"
    built = build_review(args.run_dir, out, n=args.n, seed=args.seed)
    print(
        f"review {built.review_id}: {built.jobs} masks to rate, blinded and shuffled, "
        "sampled as evenly as their number allows:\n"
        + "".join(f"  {line}\n" for line in built.spread)
        + f"  open {built.site.resolve()} in a web browser (works offline, from file://), or "
        f"hand the folder {out} to the raters;\n"
        f"  the key (which mask is which) stays in {built.key}.\n"
        f"  then: intrabench review import {args.run_dir} RATINGS.json ..."
    )
    return 0


def cmd_review_import(args: argparse.Namespace) -> int:
    """``intrabench review import``: ratings joined with the run's metrics; returns the exit status.

    The ratings of earlier imports stay (``--replace`` starts over); a mask rated in both keeps
    its newest rating.

    Args:
        args: The parsed command line: ``run_dir``, ``ratings`` (the exported files),
            ``n_boot``, ``seed``, ``replace``.

    Returns:
        0 once the analysis is written under ``RUN_DIR/reviews/<review id>/``.
    """
    import pandas as pd

    from intrabench.evaluation.aggregate import to_markdown
    from intrabench.evaluation.metric_registry import metric_label
    from intrabench.io.results import load_results
    from intrabench.review.ratings import (
        RATING_COLUMNS,
        analyse_ratings,
        join_ratings,
        newest_ratings,
        read_rating_files,
    )

    given = read_rating_files(args.ratings)
    ratings, repeated = newest_ratings(given)
    rows = load_results(args.run_dir)  # read once: the check below and the join after it
    join_ratings(ratings, args.run_dir, rows)  # checks review and jobs before anything is kept
    review = str(ratings["review"].iloc[0])
    out = Path(args.run_dir) / "reviews" / review
    # the ratings of earlier imports stay: two raters imported one after the other are two
    # raters, not the last one (--replace starts over)
    imported = out / "imported-ratings.csv"
    # the earlier imports are input too: read with the same checks as a rater's file, and
    # a mask rated in both keeps its newest rating (an old export sent again changes nothing)
    earlier = read_rating_files([imported]) if imported.is_file() and not args.replace else None
    if earlier is not None and len(earlier):
        ratings, repeated = newest_ratings(
            pd.concat(
                [earlier.assign(earlier=True), given.assign(earlier=False)], ignore_index=True
            )
        )
        from_earlier = ratings.pop("earlier").astype(bool)
        kept = ratings[from_earlier]
        print(
            f"kept {len(kept)} earlier rating(s) of {kept['rater'].nunique()} rater(s) "
            f"({', '.join(sorted(kept['rater'].unique())[:5])}) from earlier imports; "
            "--replace starts over",
            file=sys.stderr,
        )
    for rater, masks in sorted(repeated.items()):
        print(
            f"{rater} rated {masks} mask(s) more than once: the newest rating (rated_at) of "
            "each is kept",
            file=sys.stderr,
        )
    ratings[RATING_COLUMNS + ["rated_at", "file"]].to_csv(imported, index=False)
    joined = join_ratings(ratings, args.run_dir, rows)
    analysis = analyse_ratings(joined, n_boot=args.n_boot, seed=args.seed)
    joined.to_csv(out / "ratings.csv", index=False)
    analysis.per_configuration.to_csv(
        out / "per-configuration.csv", index=False, float_format="%.6g"
    )
    analysis.per_mask.to_csv(out / "per-mask.csv", index=False, float_format="%.6g")
    import json

    from intrabench.io.results import atomic_write_text

    def finite(value):  # JSON has no NaN: a statistic that could not be computed is null
        return None if isinstance(value, float) and value != value else value

    atomic_write_text(
        out / "summary.json",
        json.dumps(
            {
                "review": review,
                "ratings": len(joined),
                "masks": int(joined["job"].nunique()),
                "raters": analysis.n_raters,
                "krippendorff_alpha_ordinal": finite(analysis.alpha),
                **{
                    f"spearman_rating_{metric}": [finite(v) for v in values]
                    for metric, values in analysis.rho.items()
                },
            },
            indent=1,
            allow_nan=False,
        ),
    )
    print(
        f"review {review}: {len(joined)} ratings of {joined['job'].nunique()} masks by "
        f"{analysis.n_raters} rater(s)\n"
    )
    print(
        "Mean rating (1-10; a mask's rating is the mean over its raters), bootstrap 95% CI "
        "over masks:\n"
    )
    print(to_markdown(analysis.per_configuration, digits=2))
    alpha = (
        "n/a (needs two raters on one mask)"
        if analysis.alpha != analysis.alpha
        else f"{analysis.alpha:.3f}"
    )
    print(f"\nAgreement between raters: Krippendorff's alpha (ordinal) = {alpha}")
    for metric, (rho, p_value, n) in analysis.rho.items():
        shown = "n/a" if rho != rho else f"{rho:.3f} (p = {p_value:.3g}, {n} masks)"
        print(f"Spearman's rho of rating with {metric_label(metric)}: {shown}")
    if not analysis.rater_disagreement.empty:
        print("\nMasks the raters disagree on most:\n")
        print(
            to_markdown(
                analysis.rater_disagreement[
                    [
                        "job",
                        "model",
                        "prompter",
                        "case",
                        "target",
                        "step",
                        "rating",
                        "rating_std",
                        "dice",
                    ]
                ]
            )
        )
    print("\nMasks whose rating and Dice disagree most (percentile ranks):\n")
    print(
        to_markdown(
            analysis.metric_disagreement[
                ["job", "model", "prompter", "case", "target", "step", "rating", "dice", "rank_gap"]
            ]
        )
    )
    print(
        f"\nwritten: {out / 'ratings.csv'}, {out / 'per-configuration.csv'}, "
        f"{out / 'per-mask.csv'}; `intrabench report {args.run_dir}` shows them",
        file=sys.stderr,
    )
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench review build|import``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    review = commands.add_parser(
        "review",
        help="a blinded web page for people to rate masks, "
        "and their ratings joined with the metrics",
    )
    actions = review.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="a self-contained rating site of sampled masks")
    build.add_argument("run_dir", metavar="RUN_DIR")
    build.add_argument("--n", type=int, default=200, help="masks to rate (default 200)")
    build.add_argument("--seed", type=count, default=0, help="sampling and order seed")
    build.add_argument("--out", help="folder of the site (default RUN_DIR/review-site)")
    build.set_defaults(func=cmd_review_build)
    imported = actions.add_parser(
        "import", help="ratings files (JSON/CSV from the page) joined with the run's metrics"
    )
    imported.add_argument("run_dir", metavar="RUN_DIR")
    imported.add_argument("ratings", nargs="+", metavar="RATINGS")
    imported.add_argument("--n-boot", type=resamples, default=1000)
    imported.add_argument("--seed", type=count, default=0)
    imported.add_argument(
        "--replace",
        action="store_true",
        help="forget the ratings of earlier imports of this review (default: "
        "they stay; a rater's new rating of a mask replaces their old)",
    )
    imported.set_defaults(func=cmd_review_import)
